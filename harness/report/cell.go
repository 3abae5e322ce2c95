package report

import (
	"fmt"
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
// order", "refused", "survived", with ", UNKNOWN" for an unknown run):
// what must not change when a fault is run again. The calls sent while the
// harness restarted a process ("down") and the calls that failed otherwise
// ("error") are left out: how many there are, and whether there are any,
// depends on how long a start takes on a loaded machine, not on what the
// generator did.
func CellWords(r *harness.Result) string {
	f := r.Figures
	var out []string
	for _, w := range []struct {
		on   bool
		word string
	}{
		{f.Duplicates > 0, "dup"},
		{f.OrderViolations > 0, "order"},
		{f.RestartViolations > 0, "restart"},
		{f.IDs == 0, "no IDs"},
		{f.Refused > 0, "refused"},
	} {
		if w.on {
			out = append(out, w.word)
		}
	}
	if len(out) == 0 {
		out = append(out, "survived")
	}
	if r.Verdict == harness.Unknown {
		out = append(out, "UNKNOWN")
	}
	return strings.Join(out, ", ")
}
