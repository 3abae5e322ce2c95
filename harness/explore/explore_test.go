package explore

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

func caps(t testing.TB, name string) Caps {
	t.Helper()
	c, err := CapsOf(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The same (seed, i) gives the same schedule, whatever was drawn before;
// another i or seed gives another one.
func TestGenerateDeterministic(t *testing.T) {
	c := caps(t, "inprocess")
	var first []string
	for i := range 50 {
		first = append(first, Generate(Derive(7, i), Space{}, c, "inprocess", "x").YAML())
	}
	for i := 49; i >= 0; i-- { // in reverse: no hidden state between schedules
		if got := Generate(Derive(7, i), Space{}, c, "inprocess", "x").YAML(); got != first[i] {
			t.Fatalf("schedule %d differs on a second draw:\n%s\nvs\n%s", i, first[i], got)
		}
	}
	distinct := map[string]bool{}
	for _, y := range first {
		distinct[y] = true
	}
	if len(distinct) < 45 {
		t.Errorf("50 draws gave only %d distinct schedules", len(distinct))
	}
	if Generate(Derive(8, 0), Space{}, c, "inprocess", "x").YAML() == first[0] {
		t.Error("seeds 7 and 8 drew the same schedule 0")
	}
}

// Every drawn schedule is a valid scenario the harness accepts for its
// target, and keeps the configuration's promises.
func TestGenerateValid(t *testing.T) {
	for _, tgt := range []string{"inprocess", "wait", "logical", "bad-memory-only"} {
		c := caps(t, tgt)
		for i := range 300 {
			s := Generate(Derive(3, i), Space{}, c, tgt, "x")
			sc, err := s.Scenario("x.yaml")
			if err != nil {
				t.Fatalf("%s schedule %d does not parse: %v\n%s", tgt, i, err, s.YAML())
			}
			if err := harness.Prepare([]*scenario.Scenario{sc}, harness.Options{Mode: scenario.ModeSimulated}); err != nil {
				t.Fatalf("%s schedule %d refused: %v\n%s", tgt, i, err, s.YAML())
			}
			for _, f := range s.Faults {
				for _, name := range f.Nodes {
					n, _ := s.node(name)
					switch f.Kind {
					case faults.KindRestart:
						if !restartable(n) || (f.WipeCheckpoint && n.Lease == "") {
							t.Fatalf("%s schedule %d restarts node %s, which keeps no mark:\n%s", tgt, i, name, s.YAML())
						}
					case faults.KindClone, faults.KindHandoff:
						if n.Lease == "" {
							t.Fatalf("%s schedule %d: a %s of node %s without a lease:\n%s", tgt, i, f.Kind, name, s.YAML())
						}
					}
				}
			}
		}
	}
}

// A space narrows what is drawn.
func TestGenerateSpace(t *testing.T) {
	sp := Space{Kinds: []faults.Kind{faults.KindStep}, Faults: IntRange{2, 2}, Nodes: IntRange{1, 1}, Duration: DurRange{time.Second, time.Second},
		Rate: FloatRange{500, 500}, Burst: -1, Batch: IntRange{1, 1}, Shift: DurRange{time.Millisecond, 2 * time.Millisecond}}
	for i := range 50 {
		s := Generate(Derive(1, i), sp, caps(t, "wait"), "wait", "x")
		if len(s.Nodes) != 1 || s.Duration != time.Second || s.Load.Rate != 500 || s.Load.Burst != nil || s.Load.Batch != 1 || len(s.Faults) != 2 {
			t.Fatalf("schedule %d outside the space:\n%s", i, s.YAML())
		}
		for _, f := range s.Faults {
			if f.Kind != faults.KindStep || max(f.By, -f.By) < time.Millisecond || max(f.By, -f.By) > 2*time.Millisecond {
				t.Fatalf("schedule %d: fault outside the space: %+v", i, f)
			}
		}
	}
}

// A known-bad reference's failure shrinks to at most two faults and one
// node, and the shrunk YAML, parsed as any scenario file, fails the same
// invariant under `run` and passes against the safe generator.
func TestShrinkReference(t *testing.T) {
	ctx := context.Background()
	sp := Space{Kinds: []faults.Kind{faults.KindStep, faults.KindFreeze, faults.KindSmear, faults.KindPause, faults.KindLeap, faults.KindDrift}}
	rep, err := Run(ctx, Options{Seed: 2, Schedules: 40, Targets: []string{"bad-no-rewind-check"}, Space: sp, First: true, Shrink: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Finds) != 1 || rep.ExitCode() != 1 {
		t.Fatalf("want one find, got %d (exit %d)", len(rep.Finds), rep.ExitCode())
	}
	f := rep.Finds[0]
	if f.Shrunk == nil || len(f.Shrunk.Faults) > 2 || len(f.Shrunk.Nodes) > 1 || f.Shrunk.Duration > f.Original.Duration {
		t.Fatalf("not shrunk enough:\n%s", f.Shrunk.YAML())
	}
	sc, err := scenario.Parse("shrunk.yaml", []byte(f.Shrunk.YAML()))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := harness.Run(ctx, []*scenario.Scenario{sc}, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hr.ExitCode() != 1 {
		t.Fatalf("the shrunk YAML exits %d under run, want 1:\n%s", hr.ExitCode(), f.Shrunk.YAML())
	}
	failed := false
	for _, c := range hr.Scenarios[0].Runs[0].Checks {
		failed = failed || (c.Verdict == harness.Fail && subject(c.Expr) == f.Key)
	}
	if !failed {
		t.Fatalf("the shrunk YAML does not fail %s", f.Key)
	}
	safe := f.Shrunk.Clone()
	safe.Target = "wait"
	if out := RunSchedule(ctx, safe, harness.Options{}); out.Verdict != harness.Pass {
		t.Fatalf("the shrunk schedule fails the safe generator too (%v):\n%s", out.Failed, safe.YAML())
	}
	// The same exploration again gives the same find and the same shrink.
	again, _ := Run(ctx, Options{Seed: 2, Schedules: 40, Targets: []string{"bad-no-rewind-check"}, Space: sp, First: true, Shrink: 1, Parallel: 1})
	if again.Finds[0].Index != f.Index || again.Finds[0].Shrunk.YAML() != f.Shrunk.YAML() {
		t.Fatalf("a second exploration found schedule %d, shrunk to\n%s\nnot %d,\n%s", again.Finds[0].Index, again.Finds[0].Shrunk.YAML(), f.Index, f.Shrunk.YAML())
	}
}

// The safe generator: a short exploration finds nothing.
func TestExploreSafe(t *testing.T) {
	rep, err := Run(context.Background(), Options{Seed: 11, Schedules: 60, Targets: []string{"inprocess"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed > 0 {
		t.Fatalf("explore failed the safe generator: %v\n%s", rep.Finds[0].Failed, rep.Finds[0].Original.YAML())
	}
	if rep.Invalid > 0 {
		t.Fatalf("%d invalid schedules: %v", rep.Invalid, rep.UnknownWhy)
	}
	if rep.Schedules != 60 || rep.Passed < 45 {
		t.Fatalf("%d schedules, %d passed", rep.Schedules, rep.Passed)
	}
	var b strings.Builder
	if err := Text(&b, rep); err != nil || !strings.Contains(b.String(), "no failure found") {
		t.Fatalf("text report: %v\n%s", err, b.String())
	}
}

func TestDur(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 1500, time.Millisecond, 80500 * time.Microsecond, -150 * time.Millisecond, 3 * time.Second, 1001 * time.Millisecond} {
		got, err := time.ParseDuration(Dur(d))
		if err != nil || got != d {
			t.Errorf("Dur(%v) = %q, parses as %v, %v", d, Dur(d), got, err)
		}
	}
	if Dur(80500*time.Microsecond) != "80500us" || Dur(2*time.Second) != "2s" {
		t.Errorf("Dur: %s, %s", Dur(80500*time.Microsecond), Dur(2*time.Second))
	}
}

func TestSideBySide(t *testing.T) {
	got := SideBySide("a", "x\ny\nz", "b", "1", 8)
	want := []string{"--- a", "x", "y", "z"}
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != 4 || !slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, "| 1") }) {
		t.Fatalf("%q", got)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Fatalf("line %d: %q", i, lines[i])
		}
	}
}
