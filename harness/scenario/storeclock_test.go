package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// TestParseStoreClockAndSticky: the store clock faults, a hanging store
// outage, a sticky holder identity and the fence_margin control.
func TestParseStoreClockAndSticky(t *testing.T) {
	s, err := Parse("sticky.yaml", []byte(`name: sticky
duration: 10s
nodes:
  - {name: a, worker: 1, worker_range: 1-1, holder: pod-a, lease: memory, fence_margin: off}
  - {name: b, worker: 2, lease: memory}
load: {rate: 100/s}
faults:
  - {name: fast, at: 1s, kind: store_drift, ppm: 50000}
  - {name: ahead, at: 2s, kind: store_step, by: 300ms}
  - {name: frozen, at: 3s, kind: store_pause, for: 2s}
  - {name: hang, at: 6s, kind: store_outage, for: 1s, hang: on, nodes: [a]}
invariants: ["lease_overruns == 0"]
targets:
  - wait
  - {name: m, use: wait, fence_margin: on}
  - {name: z, use: wait, fence_margin: off}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Nodes[0], s.Nodes[1]
	if a.Holder != "pod-a" || !a.NoFenceMargin || a.WorkerRange.Len() != 1 || b.Holder != "" || b.NoFenceMargin {
		t.Fatalf("nodes: %+v", s.Nodes)
	}
	if n := s.Targets[1].Apply(a); n.NoFenceMargin || n.Holder != "pod-a" {
		t.Fatalf("fence_margin: on applied: %+v", n)
	}
	if n := s.Targets[2].Apply(b); !n.NoFenceMargin {
		t.Fatalf("fence_margin: off applied: %+v", n)
	}
	if n := s.Targets[0].Apply(a); !n.NoFenceMargin {
		t.Fatalf("plain target changed the node: %+v", n)
	}
	want := []struct {
		kind  faults.Kind
		clock faults.Kind
		span  time.Duration
	}{
		{faults.KindStoreDrift, faults.KindDrift, 9 * time.Second},
		{faults.KindStoreStep, faults.KindStep, 300 * time.Millisecond},
		{faults.KindStorePause, faults.KindPause, 2 * time.Second},
	}
	for i, w := range want {
		f := s.Faults[i]
		ck, ok := f.Kind.StoreClock()
		if f.Kind != w.kind || !ok || ck != w.clock || f.Kind.Clock() || f.Span(s.Duration-f.At) != w.span {
			t.Errorf("fault %d: %+v (clock %q %v, span %v)", i, f, ck, ok, f.Span(s.Duration-f.At))
		}
	}
	if f := s.Faults[0]; f.PPM != 50000 {
		t.Errorf("drift: %+v", f)
	}
	if f := s.Faults[3]; !f.Hang || !f.Partition || s.Faults[2].Hang {
		t.Errorf("hang: %+v", f)
	}
	if _, ok := faults.KindStoreOutage.StoreClock(); ok {
		t.Error("store_outage is not a store clock fault")
	}
	if s.Invariants[0].Metric != MetricLeaseOverruns {
		t.Errorf("invariant: %+v", s.Invariants[0])
	}
}

// TestParseStoreClockErrors: each bad value is named by file, line and key.
func TestParseStoreClockErrors(t *testing.T) {
	const head = "name: x\nduration: 10s\nload: {rate: 1/s}\ninvariants: [\"duplicates == 0\"]\n"
	lease := "nodes: [{name: a, worker: 1, lease: memory}, {name: b, worker: 2, lease: memory}]\n"
	cases := []struct {
		name, body, want string
	}{
		{"holder without lease", "nodes: [{name: a, worker: 1, holder: pod-a}]\n", "x.yaml:5: nodes[0].holder: holder needs a lease"},
		{"fence_margin without lease", "nodes: [{name: a, worker: 1, fence_margin: off}]\n", "x.yaml:5: nodes[0].fence_margin: fence_margin needs a lease"},
		{"bad holder", "nodes: [{name: a, worker: 1, lease: memory, holder: \"-x\"}]\n", "nodes[0].holder: \"-x\" is not a valid name"},
		{"holder shared", "nodes: [{name: a, worker: 1, lease: memory, holder: p}, {name: b, worker: 2, lease: memory, holder: p}]\n", "x.yaml:5: nodes[1].holder: holder \"p\" is already node a's identity"},
		{"holder is another node's name", "nodes: [{name: a, worker: 1, lease: memory}, {name: b, worker: 2, lease: memory, holder: a}]\n", "nodes[1].holder: holder \"a\" is already node a's identity"},
		{"fence_margin not bool", "nodes: [{name: a, worker: 1, lease: memory, fence_margin: 0}]\n", "nodes[0].fence_margin: want on or off"},
		{"target fence_margin not bool", lease + "targets: [{name: w, use: wait, fence_margin: none}]\n", "targets[0].fence_margin: want on or off"},
		{"store fault with nodes", lease + "faults: [{at: 1s, kind: store_step, by: 1s, nodes: [a]}]\n", "x.yaml:6: faults[0].nodes: a store_step acts on the lease store's clock: it takes no nodes"},
		{"drift zero", lease + "faults: [{at: 1s, kind: store_drift, ppm: 0}]\n", "faults[0].ppm: a store_drift fault's \"ppm\" 0 is out of range"},
		{"drift too fast", lease + "faults: [{at: 1s, kind: store_drift, ppm: 2e6}]\n", "faults[0].ppm: a store_drift fault's \"ppm\" 2e+06 is out of range"},
		{"step zero", lease + "faults: [{at: 1s, kind: store_step, by: 0s}]\n", "faults[0].by: a store_step fault's \"by\" 0s is out of range"},
		{"pause without for", lease + "faults: [{at: 1s, kind: store_pause}]\n", "faults[0].for: missing: a store_pause fault needs for"},
		{"pause past the end", lease + "faults: [{at: 9s, kind: store_pause, for: 2s}]\n", "faults[0]: the store_pause lasts until 11s, beyond the duration 10s"},
		{"hang not bool", lease + "faults: [{at: 1s, kind: store_outage, for: 1s, hang: maybe}]\n", "faults[0].hang: want on or off"},
		{"hang on a clock fault", lease + "faults: [{at: 1s, kind: store_step, by: 1s, hang: on}]\n", "faults[0].hang: a store_step fault takes only by"},
		{"store clock without lease", "nodes: [{name: a, worker: 1}]\nfaults: [{at: 1s, kind: store_drift, ppm: 10}]\n", "x.yaml:6: faults[0]: a store_drift needs a node with lease: memory"},
		{"overruns during", lease + "faults: [{name: f, at: 1s, kind: store_step, by: 1s}]\ninvariants: [\"lease_overruns == 0 during f\"]\n", "lease_overruns is counted over the whole run"},
	}
	for _, c := range cases {
		body := head + c.body
		if strings.Contains(c.body, "invariants:") {
			body = strings.Replace(head, "invariants: [\"duplicates == 0\"]\n", "", 1) + c.body
		}
		_, err := Parse("x.yaml", []byte(body))
		if err == nil {
			t.Errorf("%s: parsed", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, c.want)
		}
	}
}
