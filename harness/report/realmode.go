package report

import (
	"github.com/snowchaos/snowchaos/harness"
)

// boundNote is how a column's legend says which bound real mode judged.
func boundNote(c harness.Check) string {
	if c.Expected {
		return "real mode: caught only when " + c.Bound + " (tightened by the calibrated tolerance)"
	}
	return "real mode: judged as " + c.Bound + " (widened by the calibrated tolerance)"
}

// columnNotes returns the legend note of each column whose bound real
// mode changed.
func columnNotes(sr *harness.ScenarioResult) map[string]string {
	out := map[string]string{}
	for _, r := range sr.Runs {
		for _, c := range r.Checks {
			if c.Bound != "" {
				out[colKey(c)] = boundNote(c)
			}
		}
	}
	return out
}
