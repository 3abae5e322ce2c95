package survival

import (
	"context"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/bench/peers"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

const dir = "../../scenarios/peers"

func load(t *testing.T) []*scenario.Scenario {
	t.Helper()
	suite, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(suite) < 6 {
		t.Fatalf("%d scenarios", len(suite))
	}
	return suite
}

// TestScenariosParse checks that the peer scenarios parse and that the
// harness accepts every target for every fault.
func TestScenariosParse(t *testing.T) {
	suite := load(t)
	if err := harness.Prepare(suite, harness.Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestTargetsMatchApplicability checks that a scenario lists a peer
// exactly when every one of its faults reaches the peer: nothing
// applicable is left out, and n/a is never run.
func TestTargetsMatchApplicability(t *testing.T) {
	for _, s := range load(t) {
		listed := map[string]bool{}
		for _, tg := range s.Targets {
			listed[tg.Name] = true
		}
		for _, p := range peers.All() {
			na := NotApplicable(p, s)
			if listed[p.Name] == (na != "") {
				t.Errorf("%s / %s: listed %v, n/a %q", s.Name, p.Name, listed[p.Name], na)
			}
		}
	}
}

// TestSimulatedRun runs the simulated clock-fault scenarios for ulid and
// renders the table: ulid has a cell there, the peers that cannot be
// faulted say n/a.
func TestSimulatedRun(t *testing.T) {
	var sim []*scenario.Scenario
	for _, s := range load(t) {
		if s.Mode == scenario.ModeSimulated {
			sim = append(sim, s)
		}
	}
	rep, err := Run(context.Background(), sim, harness.Options{Targets: []string{"ulid"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != harness.Pass {
		t.Fatalf("verdict %s", rep.Verdict)
	}
	var b strings.Builder
	if err := Build(rep).Markdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| ulid | 0 · ", "| bwmarrin | n/a | n/a |", "- bwmarrin / clock-step-back: step: reads Go's monotonic clock"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestRealRunCatchesDuplicates runs the restart-in-the-same-ms scenario
// for bwmarrin (expected to re-issue IDs) and ulid (not): both verdicts
// pass, and bwmarrin's duplicates are shown in bold.
func TestRealRunCatchesDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time run")
	}
	var s *scenario.Scenario
	for _, x := range load(t) {
		if x.Name == "peers-restart-same-ms" {
			s = x
		}
	}
	rep, err := Run(context.Background(), []*scenario.Scenario{s}, harness.Options{Targets: []string{"bwmarrin", "ulid"}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Build(rep).Markdown(&b); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != harness.Pass {
		t.Fatalf("verdict %s:\n%s", rep.Verdict, b.String())
	}
	if !strings.Contains(b.String(), "| bwmarrin | **") {
		t.Errorf("bwmarrin's duplicates not shown:\n%s", b.String())
	}
}
