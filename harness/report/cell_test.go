package report

import (
	"testing"

	"github.com/snowchaos/snowchaos/harness"
)

// TestCellWords: the words a repeated table compares keep the findings and
// the generator's own refusals, and leave out the calls a restart costs.
func TestCellWords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       harness.Figures
		verdict harness.Verdict
		cell    string
		words   string
	}{
		{"clean", harness.Figures{IDs: 10}, harness.Pass, "survived", "survived"},
		{"restart paid", harness.Figures{IDs: 10, Refusals: 7, Down: 6}, harness.Pass, "down 6, error 1", "survived"},
		{"dup and order", harness.Figures{IDs: 10, Duplicates: 3, OrderViolations: 2, Refusals: 4, Down: 4}, harness.Fail, "3 dup, 2 order, down 4", "dup, order"},
		{"refused", harness.Figures{IDs: 10, Refusals: 98, Refused: 98}, harness.Pass, "refused 98", "refused"},
		{"unknown", harness.Figures{IDs: 10, RestartViolations: 5, Refusals: 2, Down: 2}, harness.Unknown, "5 restart, down 2 (UNKNOWN)", "restart, UNKNOWN"},
		{"nothing", harness.Figures{}, harness.Unknown, "no IDs (UNKNOWN)", "no IDs, UNKNOWN"},
	} {
		r := &harness.Result{Figures: tc.f, Verdict: tc.verdict}
		if got := Cell(r, false); got != tc.cell {
			t.Errorf("%s: Cell = %q, want %q", tc.name, got, tc.cell)
		}
		if got := CellWords(r); got != tc.words {
			t.Errorf("%s: CellWords = %q, want %q", tc.name, got, tc.words)
		}
	}
}
