// Package report renders a harness.Report: a terminal matrix, JSON, JUnit
// XML, and a self-contained HTML page with an SVG timeline per scenario.
// Every renderer is deterministic: the same report gives the same bytes.
package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/verify"
)

// Terminal writes the matrix of scenario x target: per scenario a legend
// of its checks, then one row per target with its verdict, key figures
// (IDs, duplicates, longest wait, largest lead, availability) and the
// verdict of each check. A negative control's verdict and expectations
// read caught or escaped. A check a target does not have shows "-"; an
// informational check (an invariant shown for a negative control) shows
// in parentheses. A target that cannot take the scenario (opted in to
// n/a) shows "n/a" and the reason. Runs whose nodes leased worker IDs get
// a line of lease figures: renewals, fence closures, rebinds, refused
// starts and, for a store outage, the availability and longest gap in its
// window. Under the matrices a legend says how to read them; failed and
// unknown checks are listed again with the observed figure and the
// scenario file and line.
func Terminal(w io.Writer, rep *harness.Report) error {
	tw := &errWriter{w: w}
	for _, sr := range rep.Scenarios {
		terminalScenario(tw, sr)
	}
	if len(rep.Scenarios) > 0 {
		tw.printf("how to read the matrix:\n")
		for _, l := range legend {
			tw.printf("  %-8s %s\n", l[0], l[1])
		}
		tw.printf("\n")
	}
	terminalSummary(tw, rep)
	return tw.err
}

// legend explains the matrix: Terminal prints it under the matrices, HTML
// above them. Each entry is a term and its meaning.
var legend = [][2]string{
	{"[n]", "the scenario's checks, listed above its table; a cell is that check's verdict for the row's target"},
	{"-", "the target does not have that check"},
	{"(fail)", "informational: an invariant shown for a negative control, not counted in its verdict"},
	{"caught", "a negative control did what the scenario expects of it and the harness caught it (its duplicates are the finding)"},
	{"escaped", "the harness did not catch a negative control: the run fails"},
	{"n/a", "the target cannot take the scenario (the reason is shown), or the run's kind of ID has no such figure (the order of UUIDv4s, the lead of strings): neither pass nor fail"},
	{"dups", "IDs issued more than once; avail: the share of requests answered with IDs"},
}

// runVerdict is the verdict shown for a run: caught or escaped for a
// negative control.
func runVerdict(r *harness.Result) string {
	if v := r.ControlVerdict(); v != "" {
		return v
	}
	return string(r.Verdict)
}

// checkVerdict is the verdict shown for a check: caught or escaped for a
// negative control's expectation.
func checkVerdict(c harness.Check) string {
	if v := c.ControlVerdict(); v != "" {
		return v
	}
	return string(c.Verdict)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// columns returns the distinct checks of a scenario's runs, in order of
// first appearance: invariants first, then targets' own and expectations.
func columns(sr *harness.ScenarioResult) []string {
	var cols []string
	seen := map[string]bool{}
	add := func(c harness.Check) {
		k := colKey(c)
		if !seen[k] {
			seen[k] = true
			cols = append(cols, k)
		}
	}
	for _, r := range sr.Runs {
		for _, c := range r.Checks {
			if !c.Expected {
				add(c)
			}
		}
	}
	for _, r := range sr.Runs {
		for _, c := range r.Checks {
			if c.Expected {
				add(c)
			}
		}
	}
	return cols
}

func colKey(c harness.Check) string {
	if c.Expected {
		return c.Expr + " (expected)"
	}
	return c.Expr
}

func terminalScenario(w *errWriter, sr *harness.ScenarioResult) {
	w.printf("== %s  [%s]  %s, seed %d, %s\n", sr.Name, strings.ToUpper(string(sr.Verdict)), harness.Duration(sr.Duration).String(), sr.Seed, sr.File)
	if len(sr.Faults) > 0 {
		var fs []string
		for _, f := range sr.Faults {
			fs = append(fs, fmt.Sprintf("%s@%s(%s)", f.Name, f.At, strings.Join(f.Nodes, ",")))
		}
		w.printf("   faults: %s\n", strings.Join(fs, " "))
	}
	cols := columns(sr)
	notes := columnNotes(sr)
	for i, c := range cols {
		if n := notes[c]; n != "" {
			w.printf("   [%d] %s  (%s)\n", i+1, c, n)
			continue
		}
		w.printf("   [%d] %s\n", i+1, c)
	}
	nameW := len("target")
	for _, r := range sr.Runs {
		nameW = max(nameW, len(r.Target))
	}
	w.printf("   %-*s  %-7s  %9s  %6s  %9s  %9s  %7s ", nameW, "target", "verdict", "ids", "dups", "max wait", "max lead", "avail")
	for i := range cols {
		w.printf(" %8s", "["+strconv.Itoa(i+1)+"]")
	}
	w.printf("\n")
	for _, r := range sr.Runs {
		f := r.Figures
		if r.Verdict == harness.NA {
			w.printf("   %-*s  %-7s  %9s  %6s  %9s  %9s  %7s ", nameW, r.Target, r.Verdict, "-", "-", "-", "-", "-")
			for range cols {
				w.printf(" %8s", "-")
			}
			w.printf("\n   %-*s  n/a: %s\n", nameW, "", r.NotApplicable)
			continue
		}
		w.printf("   %-*s  %-7s  %9d  %6d  %9s  %9s  %7.4f ", nameW, r.Target, runVerdict(r), f.IDs, f.Duplicates, f.MaxWait, maxLead(r), f.Availability)
		cells := map[string]string{}
		for _, c := range r.Checks {
			v := checkVerdict(c)
			if c.Info {
				v = "(" + v + ")"
			}
			cells[colKey(c)] = v
		}
		for _, c := range cols {
			v, ok := cells[c]
			if !ok {
				v = "-"
			}
			w.printf(" %8s", v)
		}
		w.printf("\n")
		if note := kindNote(r); note != "" {
			w.printf("   %-*s  %s\n", nameW, "", note)
		}
		if r.Error != "" {
			w.printf("   %-*s  error: %s\n", nameW, "", firstLine(r.Error))
		}
		for _, why := range r.Unknown {
			w.printf("   %-*s  unknown: %s\n", nameW, "", why)
		}
		if showIncarnations(r) {
			for _, line := range incarnationLines(r) {
				w.printf("   %-*s  %s\n", nameW, "", line)
			}
		}
		if r.Real != nil && (r.Real.Raised || r.Real.TooNoisy) {
			w.printf("   %-*s  real mode: %s\n", nameW, "", r.Real)
		}
	}
	terminalLeases(w, sr, nameW)
	storePaths(w, sr, nameW)
	for _, r := range sr.Runs {
		for _, f := range r.Faults {
			if !f.Confirmed {
				w.printf("   ! %s: fault %s not confirmed: %s\n", r.Target, f.Name, strings.Join(f.Detail, "; "))
			}
		}
	}
	w.printf("\n")
}

// maxLeaseLines bounds the refused starts and rebinds listed per run.
const maxLeaseLines = 6

// terminalLeases writes a line of lease figures per run that leased, and
// the refused starts and rebinds of the first such run (of later runs
// only when they differ).
func terminalLeases(w *errWriter, sr *harness.ScenarioResult, nameW int) {
	var first *harness.Result
	for _, r := range sr.Runs {
		l := r.Lease
		if l == nil {
			continue
		}
		w.printf("   %-*s  %s\n", nameW, r.Target, leaseLine(sr, r))
		if first != nil && slices.Equal(first.Lease.Refused, l.Refused) && slices.Equal(first.Lease.Rebound, l.Rebound) {
			continue
		}
		if first == nil {
			first = r
		}
		for _, list := range []struct {
			what  string
			lines []string
		}{{"refused", l.Refused}, {"rebound", l.Rebound}} {
			for i, line := range list.lines {
				if i == maxLeaseLines {
					w.printf("   %-*s    %s: (and %d more)\n", nameW, "", list.what, len(list.lines)-maxLeaseLines)
					break
				}
				w.printf("   %-*s    %s: %s\n", nameW, "", list.what, line)
			}
		}
	}
}

// leaseLine is a run's line of lease figures: "lease: acquired 3,
// renewals 12 ok/0 failed/0 lost, ..." and its store outage windows. A
// figure the run could not read (its nodes are processes keeping their
// own leases) is n/a.
func leaseLine(sr *harness.ScenarioResult, r *harness.Result) string {
	l := r.Lease
	if l.CountersNA {
		return fmt.Sprintf("lease: acquired n/a, renewals n/a, fenced n/a, rebinds n/a, refused starts %d, handoff waits n/a "+
			"(the nodes keep their leases in processes the harness does not read)%s", len(l.Refused), outages(sr, r))
	}
	return fmt.Sprintf("lease: acquired %d, renewals %d ok/%d failed/%d lost, fenced %d, rebinds %d, refused starts %d, handoff waits %d%s",
		l.Acquisitions, l.RenewOK, l.RenewFailed, l.RenewLost, l.Fenced, l.Rebinds, len(l.Refused), l.HandoffWaits, outages(sr, r))
}

// storePaths writes, for every run whose target cut the lease store off
// itself, how each store fault was made: the kernel path the target
// reports (nftables rules in a namespace, or a link taken down), as the
// JSON's fault detail says it.
func storePaths(w *errWriter, sr *harness.ScenarioResult, nameW int) {
	for _, r := range sr.Runs {
		for _, f := range r.Faults {
			if f.Kind != string(faults.KindStoreOutage) || !f.Confirmed {
				continue
			}
			for _, d := range f.Detail {
				if strings.Contains(d, " via ") {
					w.printf("   %-*s  %s: %s\n", nameW, r.Target, f.Name, d)
				}
			}
		}
	}
}

// outages returns ", outage <name>: availability A, gap G" for every store
// outage window of the run.
func outages(sr *harness.ScenarioResult, r *harness.Result) string {
	var b strings.Builder
	for _, f := range sr.Faults {
		if f.Kind != string(faults.KindStoreOutage) {
			continue
		}
		for _, win := range r.Windows {
			if win.Name == f.Name {
				fmt.Fprintf(&b, "; %s window %s-%s: availability %.4f, longest gap %s", win.Name, win.Start, win.End, win.Availability, win.LongestGap)
			}
		}
	}
	return b.String()
}

// maxLead is the run's largest embedded-time lead, or "n/a" for a kind of
// ID that embeds no time.
func maxLead(r *harness.Result) string {
	if !r.Kind().Timed() {
		return "n/a"
	}
	return r.Figures.MaxLead.String()
}

// kindNote says, for a run whose IDs are not Snowflakes, their kind and
// which invariants apply to it; "" for Snowflakes.
func kindNote(r *harness.Result) string {
	switch k := r.Kind(); {
	case k == verify.KindSnowflake:
		return ""
	case k.Ordered() && k.Timed():
		return k.String() + " IDs: duplicates, order, restarts, lead and lag checked (48-bit Unix ms time)"
	default:
		return k.String() + " IDs: duplicates checked; order, restarts, lead and lag n/a (the kind has no order and no embedded time)"
	}
}

// showIncarnations reports whether a run's text row lists its node
// incarnations: in real mode (starts take time there), or when one of
// them started and never served.
func showIncarnations(r *harness.Result) bool {
	if r.Real != nil {
		return true
	}
	for _, n := range r.Nodes {
		if n.Started && n.IDs == 0 {
			return true
		}
	}
	return false
}

// incarnationLines describes each node incarnation of a run: when it was
// started and ready, its requests and IDs, and when it first and last
// returned IDs.
func incarnationLines(r *harness.Result) []string {
	var out []string
	for _, n := range r.Nodes {
		s := fmt.Sprintf("%s#%d (worker %d)", n.Name, n.Incarnation, n.Worker)
		if !n.Started {
			out = append(out, fmt.Sprintf("%s: its start failed or was refused at %s: %d requests found it down", s, n.StartedAt, n.Requests))
			continue
		}
		s += fmt.Sprintf(": started at %s, ready after %s: %d requests, %d IDs", n.StartedAt, n.ReadyAfter, n.Requests, n.IDs)
		switch {
		case n.FirstID != nil:
			s += fmt.Sprintf(" from %s to %s", *n.FirstID, *n.LastID)
		case n.IDs == 0:
			s += " (never served)"
		}
		if n.Availability != nil {
			s += fmt.Sprintf(", availability %.4f", *n.Availability)
		}
		out = append(out, s)
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func terminalSummary(w *errWriter, rep *harness.Report) {
	var problems []string
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			for _, c := range r.Checks {
				if c.Info || c.Verdict == harness.Pass || c.Verdict == harness.NA {
					continue
				}
				what := c.Expr
				if c.Expected {
					what = "expected " + c.Expr + " (the harness did not catch it)"
				}
				line := fmt.Sprintf("%s:%d: %s / %s: %s: %s, observed %s", sr.File, c.Line, sr.Name, r.Target, strings.ToUpper(checkVerdict(c)), what, c.Observed)
				if c.Bound != "" {
					line += ", judged as " + c.Bound
				}
				if c.Reason != "" {
					line += " (" + c.Reason + ")"
				}
				problems = append(problems, line)
			}
			if r.Error != "" {
				problems = append(problems, fmt.Sprintf("%s: %s / %s: %s", sr.File, sr.Name, r.Target, firstLine(r.Error)))
			}
			for _, why := range r.Unknown {
				problems = append(problems, fmt.Sprintf("%s: %s / %s: UNKNOWN: %s", sr.File, sr.Name, r.Target, why))
			}
			if len(r.Duplicates) > 0 && !r.Control {
				d := r.Duplicates[0]
				problems = append(problems, fmt.Sprintf("%s / %s: first duplicate %s issued by %s at %s and by %s at %s", sr.Name, r.Target, d.ID, d.First, d.FirstAt, d.Second, d.SecondAt))
			}
		}
	}
	if len(problems) > 0 {
		w.printf("problems:\n")
		for _, p := range problems {
			w.printf("  %s\n", p)
		}
		w.printf("\n")
	}
	if c := rep.Calibration; c != nil {
		w.printf("%s\n", c)
	}
	s := rep.Summary
	w.printf("%d scenarios, %d runs: %d passed", len(rep.Scenarios), s.Runs, s.Passed)
	if caught := countCaught(rep); caught > 0 {
		w.printf(" (%d of them negative controls caught)", caught)
	}
	w.printf(", %d failed, %d unknown", s.Failed, s.Unknown)
	if s.NotApplicable > 0 {
		w.printf(", %d n/a", s.NotApplicable)
	}
	if s.Skipped > 0 {
		w.printf(", %d skipped", s.Skipped)
	}
	if rep.Stopped {
		w.printf(" (stopped at the first failure: --fail-fast)")
	}
	w.printf("; verdict %s (exit %d)\n", strings.ToUpper(string(rep.Verdict)), rep.ExitCode())
}

// countCaught counts the negative controls the harness caught.
func countCaught(rep *harness.Report) int {
	n := 0
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			if r.ControlVerdict() == harness.Caught {
				n++
			}
		}
	}
	return n
}
