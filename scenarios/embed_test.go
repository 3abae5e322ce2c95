package scenarios_test

import (
	"io/fs"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/scenarios"
)

// TestEveryScenarioParses parses and validates every built-in scenario.
func TestEveryScenarioParses(t *testing.T) {
	files, err := fs.Glob(scenarios.FS, "*.yaml")
	if err != nil || len(files) < 14 {
		t.Fatalf("%d built-in scenarios (%v), want at least 14", len(files), err)
	}
	var suite []*scenario.Scenario
	for _, f := range files {
		b, err := fs.ReadFile(scenarios.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := scenario.Parse(f, b)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if s.Description == "" || len(s.Targets) < 4 {
			t.Errorf("%s: every built-in scenario says what it shows and runs the safe policies and the controls", f)
		}
		suite = append(suite, s)
	}
	if err := harness.Prepare(suite, harness.Options{}); err != nil {
		t.Fatal(err)
	}
}
