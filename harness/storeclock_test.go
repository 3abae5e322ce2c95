package harness_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestStorePause: a paused lease store answers nobody and its clock
// stands still; the node's calls hang, its fence closes before its lease
// ends by the store's clock (no overrun), and once the store is back the
// node learns its lease was lost and takes its only worker ID back.
func TestStorePause(t *testing.T) {
	s, err := scenario.Parse("pause.yaml", []byte(`name: store-pause
duration: 6s
nodes:
  - {name: a, worker: 1, worker_range: 1-1, holder: pod-a, checkpoint: on, reserve: 5s, lease: memory, lease_ttl: 1s}
load: {per: node, clients: 2, rate: 2000/s}
faults:
  - {name: fast, at: 100ms, kind: store_drift, ppm: 60000}
  - {name: frozen, at: 1200ms, kind: store_pause, for: 2s}
invariants: ["duplicates == 0", "lease_overruns == 0", "availability < 0.9 during frozen", "rebinds == 1"]
targets: [wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	var b bytes.Buffer
	report.Terminal(&b, rep)
	w := rep.Scenarios[0].Runs[0]
	if w.Verdict != harness.Pass || w.Figures.LeaseOverruns != 0 || w.Figures.Rebinds != 1 {
		t.Fatalf("verdict %s, overruns %d\n%s", w.Verdict, w.Figures.LeaseOverruns, b.String())
	}
	if f := w.Faults[1]; !f.Confirmed || !strings.Contains(strings.Join(f.Detail, "; "), "lease store paused for 2s") {
		t.Fatalf("pause fault: %+v", f)
	}
	for _, n := range w.Nodes {
		if n.Worker != 1 {
			t.Fatalf("node moved off its only worker ID: %+v", w.Nodes)
		}
	}
}

// TestStoreClockValidate: a hanging store is simulated only, and a
// target's fence_margin needs a node that leases.
func TestStoreClockValidate(t *testing.T) {
	prepareFails(t, map[string]string{
		`name: x
mode: real
duration: 2s
nodes: [{name: a, worker: 1, lease: memory}]
load: {rate: 10/s}
faults: [{at: 1s, kind: store_outage, for: 500ms, hang: on}]
invariants: ["duplicates == 0"]
`: "x.yaml:6: faults[0]: a store_outage whose calls hang is simulated only",
		`name: x
mode: real
duration: 2s
nodes: [{name: a, worker: 1, lease: memory}]
load: {rate: 10/s}
faults: [{at: 1s, kind: store_pause, for: 500ms}]
invariants: ["duplicates == 0"]
`: "x.yaml:6: faults[0]: a store_pause whose calls hang is simulated only",
		`name: x
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: ["duplicates == 0"]
targets: [{name: w, use: wait, fence_margin: off}]
`: "x.yaml:6: targets[0]: target w sets a lease setting but none of its nodes leases a worker ID",
	})
}
