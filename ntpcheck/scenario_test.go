package ntpcheck

import (
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestSuggestScenarioParses checks that the suggested scenario is one the
// harness's own parser accepts, and that it replays the measured offset.
func TestSuggestScenarioParses(t *testing.T) {
	local := loadResponse(t, "chrony-local-stratum8")
	leapIns := loadResponse(t, "fake-leap-insert-2016-12-31")
	for _, tc := range []struct {
		name   string
		cfg    Config
		resp   []Sample
		faults []faults.Kind
	}{
		{"suggest-step-back", Config{Policy: generator.PolicyWait, MaxWait: 100 * time.Millisecond},
			[]Sample{{Response: skewed(local, 300*time.Millisecond)}}, []faults.Kind{faults.KindStep}},
		{"suggest-step-forward", Config{Policy: generator.PolicyRefuse},
			[]Sample{{Response: skewed(local, -2*time.Second)}}, []faults.Kind{faults.KindStep}},
		{"suggest-within-threshold-leap", Config{Policy: generator.PolicyLogical, MaxLead: 200 * time.Millisecond},
			[]Sample{{Response: skewed(leapIns, 5*time.Millisecond)}}, []faults.Kind{faults.KindStep, faults.KindLeap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Evaluate(tc.cfg, []ServerResult{Summarize("a:123", tc.resp, tc.cfg)})
			r.Time = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
			y, err := SuggestScenario(r)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".yaml", y)
			s, err := scenario.Parse(tc.name+".yaml", y)
			if err != nil {
				t.Fatalf("the harness parser rejects the suggestion: %v\n%s", err, y)
			}
			if len(s.Nodes) != 1 || s.Nodes[0].Policy != r.Limits.Policy || s.Nodes[0].MaxWait != r.Limits.MaxWait ||
				s.Nodes[0].MaxLead != r.Limits.MaxLead {
				t.Errorf("nodes %+v do not carry the policy %+v", s.Nodes, r.Limits)
			}
			if s.Nodes[0].ClockOffset != -r.Offset {
				t.Errorf("clock_offset %v, want %v", s.Nodes[0].ClockOffset, -r.Offset)
			}
			var kinds []faults.Kind
			for _, f := range s.Faults {
				kinds = append(kinds, f.Kind)
				if f.At+f.Span(s.Duration-f.At) > s.Duration {
					t.Errorf("fault %s outlasts the run (%v)", f.Name, s.Duration)
				}
			}
			if len(kinds) != len(tc.faults) {
				t.Fatalf("faults %v, want %v", kinds, tc.faults)
			}
			for i := range kinds {
				if kinds[i] != tc.faults[i] {
					t.Fatalf("faults %v, want %v", kinds, tc.faults)
				}
			}
			if s.Faults[0].By != r.Offset || !s.Faults[0].All {
				t.Errorf("step by %v on all=%v, want %v on all nodes", s.Faults[0].By, s.Faults[0].All, r.Offset)
			}
		})
	}
}

func TestSuggestScenarioNeedsAMeasurement(t *testing.T) {
	r := Evaluate(Config{}, []ServerResult{unreachable("a:123", Config{})})
	if _, err := SuggestScenario(r); !errors.Is(err, ErrNoUsableServer) {
		t.Errorf("err = %v, want ErrNoUsableServer", err)
	}
}
