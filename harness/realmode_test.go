package harness_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestRealModeTolerance: in real mode a run's timing bounds are judged
// widened by the suite's calibration, its safety bounds as written; a
// target or scenario marked real_na is n/a with its reason, in every
// report, and never a pass; simulated mode ignores both.
func TestRealModeTolerance(t *testing.T) {
	s, err := scenario.Parse("tol.yaml", []byte(`name: tol
duration: 300ms
nodes: [{name: a, worker: 1, checkpoint: on, reserve: 20ms}]
load: {per: node, clients: 2, rate: 1000/s}
faults:
  - {at: 100ms, kind: step, by: -2ms, nodes: [a]}
invariants: ["duplicates == 0", "order_violations == 0", "max_wait <= 0s", "availability == 1"]
targets:
  - wait
  - {name: bad-seq-reset-first, real_na: its duplicates need a race inside one millisecond}
expect:
  bad-seq-reset-first: {duplicates: "> 0"}
`))
	if err != nil {
		t.Fatal(err)
	}
	long, err := scenario.Parse("long.yaml", []byte(`name: long
duration: 26h
real_na: 26 h of wall-clock time
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: ["duplicates == 0"]
`))
	if err != nil {
		t.Fatal(err)
	}
	// Sleep.Max of an hour: no run's probe raises the tolerance.
	cal := &harness.Calibration{Samples: 1, Sleep: harness.Jitter{Max: harness.Duration(time.Hour)}, Tolerance: harness.Duration(time.Hour)}
	rep := run(t, []*scenario.Scenario{s, long}, harness.Options{Mode: scenario.ModeReal, Calibration: cal})
	var text, js, page bytes.Buffer
	if err := report.Terminal(&text, rep); err != nil {
		t.Fatal(err)
	}
	if rep.Calibration != cal || rep.Verdict != harness.Pass {
		t.Fatalf("calibration %v, verdict %s:\n%s", rep.Calibration, rep.Verdict, text.String())
	}
	w := rep.Scenarios[0].Runs[0]
	for _, c := range w.Checks {
		switch {
		case strings.HasPrefix(c.Expr, "max_wait"):
			if c.Bound != "wait max <= 1h0m0s" || c.Verdict != harness.Pass {
				t.Errorf("%s: bound %q, verdict %s: want widened by 1h", c.Expr, c.Bound, c.Verdict)
			}
		case strings.HasPrefix(c.Expr, "availability"):
			if c.Bound == "" {
				t.Errorf("%s: not widened", c.Expr)
			}
		default:
			if c.Bound != "" {
				t.Errorf("safety check %s widened to %q", c.Expr, c.Bound)
			}
		}
	}
	bad := rep.Scenarios[0].Runs[1]
	if bad.Verdict != harness.NA || !strings.Contains(bad.NotApplicable, "real mode: its duplicates need a race") || len(bad.Checks) != 0 {
		t.Errorf("real_na control: verdict %s, reason %q", bad.Verdict, bad.NotApplicable)
	}
	if sr := rep.Scenarios[1]; sr.Verdict != harness.NA || len(sr.Runs) != 1 || !strings.Contains(sr.Runs[0].NotApplicable, "26 h of wall-clock time") {
		t.Errorf("real_na scenario: %s %+v", sr.Verdict, sr.Runs)
	}
	if rep.Summary.NotApplicable != 2 || rep.Summary.Passed != 1 || countCaughtText(text.String()) != 0 {
		t.Errorf("summary %+v:\n%s", rep.Summary, text.String())
	}
	for _, want := range []string{"real-mode calibration (1 samples)", "judged as wait max <= 1h0m0s", "n/a: not judged in real mode: 26 h of wall-clock time"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("terminal report lacks %q:\n%s", want, text.String())
		}
	}
	if err := report.JSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Calibration struct {
			Tolerance float64 `json:"tolerance_seconds"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Calibration.Tolerance != 3600 {
		t.Errorf("JSON calibration: %+v %v", back, err)
	}
	if !strings.Contains(js.String(), `"bound": "wait max \u003c= 1h0m0s"`) {
		t.Errorf("JSON lacks the judged bound")
	}
	if err := report.HTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"real-mode calibration", "judged as wait max &lt;= 1h0m0s", "not judged in real mode: its duplicates need a race"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}

	// Simulated: the same scenario judges max_wait as written (and runs
	// the control); the long one runs too.
	sim := run(t, []*scenario.Scenario{s}, harness.Options{Calibration: cal})
	if sim.Calibration != nil {
		t.Error("simulated report carries a calibration")
	}
	for _, r := range sim.Scenarios[0].Runs {
		if r.Verdict == harness.NA {
			t.Errorf("simulated %s n/a: %s", r.Target, r.NotApplicable)
		}
		for _, c := range r.Checks {
			if c.Bound != "" {
				t.Errorf("simulated %s: %s judged as %s", r.Target, c.Expr, c.Bound)
			}
		}
	}
}

func countCaughtText(s string) int { return strings.Count(s, "negative controls caught") }
