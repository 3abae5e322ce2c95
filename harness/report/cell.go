package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/snowchaos/snowchaos/harness"
)

// Cell is what one fault did to one generator, in the words of the exec
// fault table and of snowchaos check: "survived", or the findings ("N dup",
// "N order", "N restart", bold in Markdown) and the calls paid
// ("refused N", "down N", "error N", "no IDs"), then " (UNKNOWN)" for an
// unknown run. md marks the findings up as Markdown bold.
func Cell(r *harness.Result, md bool) string {
	f := r.Figures
	bold := func(s string) string {
		if md {
			return "**" + s + "**"
		}
		return s
	}
	var parts []string
	if f.Duplicates > 0 {
		parts = append(parts, bold(fmt.Sprintf("%d dup", f.Duplicates)))
	}
	if f.OrderViolations > 0 {
		parts = append(parts, bold(fmt.Sprintf("%d order", f.OrderViolations)))
	}
	if f.RestartViolations > 0 {
		parts = append(parts, bold(fmt.Sprintf("%d restart", f.RestartViolations)))
	}
	if f.IDs == 0 {
		parts = append(parts, "no IDs")
	}
	if f.Refused > 0 {
		parts = append(parts, fmt.Sprintf("refused %d", f.Refused))
	}
	if f.Down > 0 {
		parts = append(parts, fmt.Sprintf("down %d", f.Down))
	}
	if f.Refusals > f.Refused+f.Down {
		parts = append(parts, fmt.Sprintf("error %d", f.Refusals-f.Refused-f.Down))
	}
	s := strings.Join(parts, ", ")
	if s == "" {
		s = "survived"
	}
	if r.Verdict == harness.Unknown {
		s += " (UNKNOWN)"
	}
	return s
}

// CellWords returns a cell's verdict words without their counts ("dup,
// order, refused"): what must not change when a fault is run again.
func CellWords(r *harness.Result) string {
	var out []string
	for _, part := range strings.Split(Cell(r, false), ", ") {
		var w []string
		for _, f := range strings.Fields(part) {
			if _, err := strconv.Atoi(f); err != nil {
				w = append(w, f)
			}
		}
		out = append(out, strings.Join(w, " "))
	}
	return strings.Join(out, ", ")
}
