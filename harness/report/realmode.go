package report

import (
	"github.com/snowchaos/snowchaos/harness"
)

// columnNotes returns the legend note of each column whose bound real
// mode changed: the bound judged when every run judged the same one,
// else that each run's own tolerance widened it.
func columnNotes(sr *harness.ScenarioResult) map[string]string {
	bound := map[string]string{}
	same := map[string]bool{}
	expected := map[string]bool{}
	for _, r := range sr.Runs {
		for _, c := range r.Checks {
			if c.Bound == "" {
				continue
			}
			k := colKey(c)
			if b, ok := bound[k]; !ok {
				bound[k], same[k] = c.Bound, true
			} else if b != c.Bound {
				same[k] = false
			}
			expected[k] = c.Expected
		}
	}
	out := map[string]string{}
	for k, b := range bound {
		switch {
		case expected[k] && same[k]:
			out[k] = "real mode: caught only when " + b + ", tightened by the calibrated tolerance"
		case expected[k]:
			out[k] = "real mode: tightened by each run's calibrated tolerance"
		case same[k]:
			out[k] = "real mode: judged as " + b + ", widened by the calibrated tolerance"
		default:
			out[k] = "real mode: widened by each run's calibrated tolerance"
		}
	}
	return out
}
