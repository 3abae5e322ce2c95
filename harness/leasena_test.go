package harness_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// opaqueNode hides its lease keeper, as a node in a process of its own
// (the process, http and netns targets) does.
type opaqueNode struct{ target.Node }

func init() {
	target.Register(&wrapTarget{name: "test-opaque-lease", wrap: func(n target.Node) target.Node { return opaqueNode{n} }})
}

// TestLeaseCountersNA: a run whose nodes' keepers the harness cannot read
// reports its lease counters as n/a (JSON counters_na), not as zeros; a
// run that can read them reports them.
func TestLeaseCountersNA(t *testing.T) {
	s, err := scenario.Parse("opaque.yaml", []byte(`name: opaque
duration: 500ms
nodes: [{name: a, worker: 1, lease: memory}]
load: {rate: 500/s}
invariants: ["duplicates == 0"]
targets: [test-opaque-lease, wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	opaque, read := rep.Scenarios[0].Runs[0].Lease, rep.Scenarios[0].Runs[1].Lease
	if opaque == nil || !opaque.CountersNA || read == nil || read.CountersNA || read.Acquisitions == 0 {
		t.Fatalf("lease results %+v and %+v: want the opaque run's counters n/a, the in-process run's counted", opaque, read)
	}
	var b bytes.Buffer
	if err := report.Terminal(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "test-opaque-lease  lease: acquired n/a") || !strings.Contains(b.String(), "wait               lease: acquired 1,") {
		t.Errorf("the matrix does not print n/a for the opaque run and the count for the other:\n%s", b.String())
	}
}
