package ntpcheck

import (
	"errors"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// suggested is the part of a suggested scenario this package decides:
// the node's rewind settings and measured offset, the faults replaying the
// correction. (harness.TestNTPSuggestionRunsAsPredicted holds the whole
// file against the harness's parser and its simulation.)
type suggested struct {
	Duration string `yaml:"duration"`
	Nodes    []struct {
		Policy      string `yaml:"policy"`
		MaxWait     string `yaml:"max_wait"`
		MaxLead     string `yaml:"max_lead"`
		ClockOffset string `yaml:"clock_offset"`
	} `yaml:"nodes"`
	Faults []struct {
		At    string `yaml:"at"`
		Kind  string `yaml:"kind"`
		By    string `yaml:"by"`
		Nodes string `yaml:"nodes"`
	} `yaml:"faults"`
}

// duration parses a Go duration the suggestion wrote.
func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

// TestSuggestScenario checks the suggested scenario against its golden
// file and that it replays the measured offset: one node with the
// report's rewind settings, its clock off by the offset, a step
// correcting it on every node (and a leap when one is announced), every
// fault within the run.
func TestSuggestScenario(t *testing.T) {
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
			var s suggested
			if err := yaml.Unmarshal(y, &s); err != nil {
				t.Fatalf("the suggestion is not YAML: %v\n%s", err, y)
			}
			if len(s.Nodes) != 1 {
				t.Fatalf("%d nodes, want 1:\n%s", len(s.Nodes), y)
			}
			n := s.Nodes[0]
			if n.Policy != r.Limits.Policy.String() || duration(t, n.MaxWait) != r.Limits.MaxWait || duration(t, n.MaxLead) != r.Limits.MaxLead {
				t.Errorf("node %+v does not carry the limits %+v", n, r.Limits)
			}
			if off := duration(t, n.ClockOffset); off != -r.Offset {
				t.Errorf("clock_offset %v, want %v", off, -r.Offset)
			}
			if len(s.Faults) != len(tc.faults) {
				t.Fatalf("faults %+v, want kinds %v", s.Faults, tc.faults)
			}
			for i, f := range s.Faults {
				if faults.Kind(f.Kind) != tc.faults[i] || f.Nodes != "all" {
					t.Errorf("fault %d: %+v, want %s on all nodes", i, f, tc.faults[i])
				}
				if duration(t, f.At) >= duration(t, s.Duration) {
					t.Errorf("fault %d at %s does not start within the run (%s)", i, f.At, s.Duration)
				}
			}
			if by := duration(t, s.Faults[0].By); by != r.Offset {
				t.Errorf("step by %v, want the measured offset %v", by, r.Offset)
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
