package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/snowchaos/snowchaos/harness"
)

// Repeats writes what the same suite did over several repetitions (each
// with its seeds offset by its index): per scenario and target, how many
// repetitions gave each verdict (caught and escaped for a negative
// control), in how many a duplicate appeared, and the duplicates' least,
// median and largest count; then each unknown or failed repetition's
// first reason. It is the figure to quote for "caught in 19 of 20 runs".
func Repeats(w io.Writer, reps []*harness.Report) error {
	tw := &errWriter{w: w}
	type row struct {
		scenario, target string
		verdicts         map[string]int
		dups             []uint64
		reasons          []string
	}
	var rows []*row
	index := map[[2]string]*row{}
	for i, rep := range reps {
		for _, sr := range rep.Scenarios {
			for _, r := range sr.Runs {
				k := [2]string{sr.Name, r.Target}
				rw := index[k]
				if rw == nil {
					rw = &row{scenario: sr.Name, target: r.Target, verdicts: map[string]int{}}
					index[k] = rw
					rows = append(rows, rw)
				}
				rw.verdicts[runVerdict(r)]++
				rw.dups = append(rw.dups, r.Figures.Duplicates)
				if r.Verdict == harness.Unknown || r.Verdict == harness.Fail {
					rw.reasons = append(rw.reasons, fmt.Sprintf("repetition %d (seed %d): %s: %s", i+1, sr.Seed, runVerdict(r), firstReason(r)))
				}
			}
		}
	}
	scW, tgW := len("scenario"), len("target")
	for _, r := range rows {
		scW, tgW = max(scW, len(r.scenario)), max(tgW, len(r.target))
	}
	tw.printf("%d repetitions of the suite, seeds offset by 0 to %d:\n", len(reps), len(reps)-1)
	tw.printf("  %-*s  %-*s  %-28s  %s\n", scW, "scenario", tgW, "target", "verdicts", "repetitions with duplicates; duplicates min/median/max")
	for _, r := range rows {
		var vs []string
		for _, v := range []string{string(harness.Pass), harness.Caught, string(harness.Fail), harness.Escaped, string(harness.Unknown), string(harness.NA)} {
			if n := r.verdicts[v]; n > 0 {
				vs = append(vs, fmt.Sprintf("%s %d", v, n))
			}
		}
		sorted := slices.Clone(r.dups)
		slices.Sort(sorted)
		with := 0
		for _, d := range sorted {
			if d > 0 {
				with++
			}
		}
		tw.printf("  %-*s  %-*s  %-28s  %d of %d; %d/%d/%d\n", scW, r.scenario, tgW, r.target, strings.Join(vs, ", "), with, len(sorted), sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
	}
	for _, r := range rows {
		for _, why := range r.reasons {
			tw.printf("  %s / %s: %s\n", r.scenario, r.target, why)
		}
	}
	return tw.err
}

// firstReason is the first thing that explains a failed or unknown run.
func firstReason(r *harness.Result) string {
	if r.Error != "" {
		return firstLine(r.Error)
	}
	if len(r.Unknown) > 0 {
		return r.Unknown[0]
	}
	for _, f := range r.Faults {
		if !f.Confirmed {
			return fmt.Sprintf("fault %s not confirmed: %s", f.Name, strings.Join(f.Detail, "; "))
		}
	}
	for _, c := range r.Checks {
		if c.Info || c.Verdict == harness.Pass || c.Verdict == harness.NA {
			continue
		}
		s := c.Expr + " observed " + c.Observed
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		return s
	}
	return "no reason given"
}
