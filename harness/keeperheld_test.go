package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestKeeperHeldOverruns: lease overruns that follow the simulation
// holding a node's keeper back (its host busy with a call waiting out a
// leap second) are not judged; the same schedule with nothing waiting
// (policy refuse) renews and passes; and a VM pause, which holds a real
// host's keeper too, is judged as ever (a step back of the pause's size
// hides it from the node: lease_overruns fails).
func TestKeeperHeldOverruns(t *testing.T) {
	const renewals = `duration: 1200ms
nodes:
  - {name: a, worker: 4094, policy: POLICY, layout: "41/12/10", epoch: 2026-01-01T00:00:00Z, lease: memory, lease_ttl: 1698013us}
load: {per: node, rate: 1652/s}
faults:
  - {at: 700ms, kind: store_step, by: 500ms}
  - {at: 200ms, kind: leap, nodes: [a]}
invariants: ["lease_overruns == 0"]
targets: [inprocess]
`
	const pause = `duration: 1074ms
nodes:
  - {name: a, worker: 11, policy: wait, max_lead: 1s, lease: memory, lease_ttl: 300ms}
load: {per: node, clients: 3, rate: 2796/s}
faults:
  - {at: 273ms, kind: pause, for: 800ms, nodes: [a]}
  - {at: 273ms, kind: step, by: -800ms, nodes: [a]}
invariants: ["lease_overruns == 0"]
targets: [inprocess]
`
	for _, c := range []struct {
		name, src string
		want      harness.Verdict
		reason    string
	}{
		{"wait", strings.Replace(renewals, "POLICY", "wait", 1), harness.Unknown, "held the node's lease keeper back"},
		{"refuse", strings.Replace(renewals, "POLICY", "refuse", 1), harness.Pass, ""},
		{"pause", pause, harness.Fail, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := scenario.Parse(c.name+".yaml", []byte("name: held-"+c.name+"\n"+c.src))
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, []*scenario.Scenario{s}, harness.Options{}).Scenarios[0].Runs[0]
			var check harness.Check
			for _, ch := range r.Checks {
				if ch.Expr == "lease_overruns == 0" {
					check = ch
				}
			}
			if check.Verdict != c.want || !strings.Contains(check.Reason, c.reason) {
				t.Fatalf("lease_overruns == 0: %s (%s), observed %s, figures %+v; want %s with %q", check.Verdict, check.Reason, check.Observed, r.Figures, c.want, c.reason)
			}
			if c.want == harness.Unknown && (r.Figures.LeaseOverrunsHeld == 0 || r.Figures.KeeperHeld == 0) {
				t.Fatalf("figures %+v: want the held overruns and the hold", r.Figures)
			}
		})
	}
}

// TestClockFaultWithNoNode: a clock fault that strikes while a node's
// start waits for the lease store reaches no process, and the node that
// starts afterwards reads its host's first offset: the fault is
// unconfirmed and the shadow does not take it, so max_lead_own is not
// judged against a clock the node never had (it read 84 ms when the shadow
// took the slew).
func TestClockFaultWithNoNode(t *testing.T) {
	s, err := scenario.Parse("absent.yaml", []byte(`name: absent
seed: 589059488
duration: 2033ms
nodes:
  - {name: a, worker: 10, policy: logical, layout: "39/16/8@10ms", checkpoint: on, max_lead: 10ms, lease: memory, lease_ttl: 1276176us}
load: {per: node, rate: 5454/s}
faults:
  - {at: 1078ms, kind: store_pause, for: 110ms}
  - {at: 1086568us, kind: handoff, behind: 3800us, nodes: [a]}
  - {at: 1097443us, kind: slew, by: -84ms, ppm: 128000, nodes: [a]}
invariants: ["max_lead_own <= 20ms"]
targets: [inprocess]
`))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, []*scenario.Scenario{s}, harness.Options{}).Scenarios[0].Runs[0]
	slew := r.Faults[2]
	if slew.Confirmed || !strings.Contains(strings.Join(slew.Detail, "; "), "reached no process") {
		t.Fatalf("slew: %+v", slew)
	}
	c := r.Checks[0]
	if c.Verdict != harness.Unknown || time.Duration(r.Figures.MaxLeadOwn) > 20*time.Millisecond {
		t.Fatalf("max_lead_own: %s (%s), observed %s", c.Verdict, c.Reason, c.Observed)
	}
}
