package ntpcheck

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestPredictionMatchesSimulation runs suggested scenarios through the
// harness on simulated time and holds ntpcheck's prediction (RewindEffect)
// against what the generator actually did in the step's window: whether
// every request got IDs, and how long the node issued none.
func TestPredictionMatchesSimulation(t *testing.T) {
	local := loadResponse(t, "chrony-local-stratum8")
	const by = 300 * time.Millisecond
	for _, cfg := range []Config{
		{Policy: generator.PolicyRefuse},
		{Policy: generator.PolicyWait, MaxWait: time.Second},
		{Policy: generator.PolicyWait, MaxWait: 100 * time.Millisecond},
		{Policy: generator.PolicyLogical, MaxLead: time.Second},
		{Policy: generator.PolicyLogical, MaxLead: 100 * time.Millisecond},
	} {
		cfg := cfg.withDefaults()
		name := fmt.Sprintf("%v-wait%v-lead%v", cfg.Policy, cfg.MaxWait, cfg.MaxLead)
		t.Run(name, func(t *testing.T) {
			r := Evaluate(cfg, []ServerResult{Summarize("a:123", []Sample{{Response: skewed(local, by)}}, cfg)})
			y, err := SuggestScenario(r)
			if err != nil {
				t.Fatal(err)
			}
			s, err := scenario.Parse(name+".yaml", y)
			if err != nil {
				t.Fatal(err)
			}
			if err := harness.Validate(s, ""); err != nil {
				t.Fatalf("harness rejects the suggestion: %v\n%s", err, y)
			}
			res := harness.RunOne(context.Background(), s, s.Targets[0], harness.Options{})
			if res.Verdict != harness.Pass || res.Error != "" {
				t.Fatalf("run verdict %v error %q\n%s", res.Verdict, res.Error, y)
			}
			var w *harness.WindowResult
			for i := range res.Windows {
				if res.Windows[i].Name == "ntp-step" {
					w = &res.Windows[i]
				}
			}
			if w == nil {
				t.Fatalf("no ntp-step window in %+v", res.Windows)
			}
			e := RewindEffect(by, cfg.Policy, cfg.MaxWait, cfg.MaxLead)
			if got := w.Availability == 1; got != e.Covered {
				t.Errorf("predicted covered=%v (%s), simulated availability %v", e.Covered, e.Text, w.Availability)
			}
			// Simulated time is deterministic; allow the load's spacing
			// (4 clients at 5000/s) and tick rounding.
			gap := time.Duration(w.LongestGap)
			if diff := gap - e.Stall; diff > 5*time.Millisecond || diff < -5*time.Millisecond {
				t.Errorf("predicted stall %v (%s), simulated longest gap %v", e.Stall, e.Text, gap)
			}
		})
	}
}
