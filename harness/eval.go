package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/verify"
)

// evaluate decides every check of a target from the verifier's result and
// the faults' confirmation.
//
// A figure that breaks an invariant is a failure even when a fault could
// not be confirmed (a duplicate is a duplicate). A figure that keeps it is
// only a pass when every fault the check depends on (the one named by
// "during", or every fault for a whole-run check) was confirmed; otherwise
// it is unknown. For an expectation of a negative control it is the other
// way round: catching the target passes, not catching it is unknown when
// a fault went unconfirmed. A figure with nothing to measure (no requests
// in the window, no IDs for a lead) is unknown.
//
// A figure the run's kind of ID does not have (order for UUIDv4s and
// strings, lead and lag for IDs without an embedded time) is n/a, with
// the reason.
//
// The lease figures (refused starts, rebinds) come from figs, the run's
// own counts; the rest from the verifier.
//
// In real mode cal is the suite's calibration: timing and liveness
// bounds are judged widened by its tolerance (see widen; the check's
// Bound says how), safety bounds as written. Simulated mode passes nil.
// A check scoped to the other mode ("in simulated mode") is n/a.
func evaluate(s *scenario.Scenario, targetName string, mode scenario.Mode, vr verify.Result, faults []FaultResult, figs Figures, cal *Calibration) []Check {
	var out []Check
	for _, e := range s.ChecksFor(targetName) {
		c := Check{Expr: e.Text, Expected: e.Expected, Info: e.Informational, Line: e.Line}
		if e.Mode != "" && e.Mode != mode {
			c.Verdict, c.Observed, c.Reason = NA, "-", fmt.Sprintf("judged in %s mode only: the scenario says this figure depends on %s time's ordering", e.Mode, e.Mode)
			out = append(out, c)
			continue
		}
		if why := inapplicable(e.Metric, vr); why != "" {
			c.Verdict, c.Observed, c.Reason = NA, "-", why
			out = append(out, c)
			continue
		}
		v, ok, why := figure(s, e, vr)
		switch e.Metric {
		case scenario.MetricRefusedStarts:
			v, ok = float64(figs.RefusedStarts), true
		case scenario.MetricRebinds:
			v, ok = float64(figs.Rebinds), true
		case scenario.MetricLeaseOverruns:
			v, ok = float64(figs.LeaseOverruns), true
		}
		if !ok {
			c.Verdict, c.Observed, c.Reason = Unknown, "-", why
			out = append(out, c)
			continue
		}
		c.Observed = e.Format(v)
		judged, bound, noisy := widen(e, cal, window(s, e))
		c.Bound = bound
		holds := judged.Holds(v)
		if e.Metric == scenario.MetricLeaseOverruns && figs.LeaseOverrunsHeld > 0 {
			// The overruns that followed a held keeper may or may not be
			// the product's: the verdict stands only if it is the same
			// without them.
			if without := float64(figs.LeaseOverruns - figs.LeaseOverrunsHeld); judged.Holds(without) != holds {
				c.Verdict = Unknown
				c.Reason = fmt.Sprintf("%d of the %d overruns came within a TTL after the simulated host held the node's lease keeper back for %s while a call on it waited (a real process renews on a goroutine of its own): the simulation cannot judge them", figs.LeaseOverrunsHeld, figs.LeaseOverruns, figs.KeeperHeld)
				out = append(out, c)
				continue
			}
		}
		if noisy {
			d := decideNoisy(e, v, time.Duration(cal.Wanted), window(s, e))
			if d == Unknown {
				c.Verdict = Unknown
				c.Reason = fmt.Sprintf("real mode: the machine's timer jitter calls for a tolerance of %s (above %s), which could change this verdict", cal.Wanted, Duration(MaxTolerance))
				out = append(out, c)
				continue
			}
			holds = d == Pass
		}
		affected := map[string]bool{}
		for _, f := range s.Faults {
			affected[f.Name] = e.During == ""
		}
		for _, f := range s.FaultsNamed(e.During) {
			affected[f.Name] = true
		}
		var unconfirmed, artifacts []string
		for i, f := range s.Faults {
			if affected[f.Name] && i < len(faults) && !faults[i].Confirmed {
				unconfirmed = append(unconfirmed, f.Name)
			}
			if affected[f.Name] && i < len(faults) && faults[i].Artifact {
				artifacts = append(artifacts, f.Name)
			}
		}
		switch {
		case len(artifacts) > 0:
			c.Verdict = Unknown
			c.Reason = "the fault may have shown the node a clock the scenario did not ask for: " + strings.Join(artifacts, ", ")
		case holds && (len(unconfirmed) == 0 || e.Expected):
			c.Verdict = Pass
		case !holds && (len(unconfirmed) == 0 || !e.Expected):
			c.Verdict = Fail
		default:
			c.Verdict = Unknown
			c.Reason = "fault not confirmed: " + strings.Join(unconfirmed, ", ")
		}
		out = append(out, c)
	}
	return out
}

// inapplicable returns why metric m has no meaning for the kind of ID
// the run checked, or "" when it has.
func inapplicable(m scenario.Metric, vr verify.Result) string {
	switch {
	case (m == scenario.MetricOrder || m == scenario.MetricRestart) && !vr.Ordered:
		return fmt.Sprintf("%s IDs have no order a generator promises", vr.Kind)
	case (m == scenario.MetricLead || m == scenario.MetricLeadOwn || m == scenario.MetricLag) && !vr.Timed:
		return fmt.Sprintf("%s IDs embed no time", vr.Kind)
	}
	return ""
}

// figure returns the observed value of the expression's metric, over the
// whole run or its windows.
func figure(s *scenario.Scenario, e scenario.Expr, vr verify.Result) (float64, bool, string) {
	if e.During == "" {
		return wholeRun(e, vr)
	}
	names := map[string]bool{}
	for _, f := range s.FaultsNamed(e.During) {
		names[f.Name] = true
	}
	var ws []verify.WindowResult
	for _, w := range vr.Windows {
		if names[w.Name] {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return 0, false, fmt.Sprintf("no window %q", e.During)
	}
	var acc float64
	first := true
	for _, w := range ws {
		v, ok, why := windowFigure(e, w)
		if !ok {
			return 0, false, why
		}
		switch {
		case first:
			acc = v
		case e.Metric == scenario.MetricAvailability:
			acc = min(acc, v) // the worst window
		case e.Unit() == scenario.UnitCount:
			acc += v
		default:
			acc = max(acc, v)
		}
		first = false
	}
	return acc, true, ""
}

func stat(d verify.Dist, st scenario.Stat) float64 {
	switch st {
	case scenario.StatP99:
		return float64(d.P99)
	case scenario.StatP50:
		return float64(d.P50)
	}
	return float64(d.Max)
}

func wholeRun(e scenario.Expr, vr verify.Result) (float64, bool, string) {
	switch e.Metric {
	case scenario.MetricDuplicates:
		return float64(vr.Duplicates), true, ""
	case scenario.MetricOrder:
		return float64(vr.OrderViolations), true, ""
	case scenario.MetricRestart:
		return float64(vr.RestartViolations), true, ""
	case scenario.MetricIDs:
		return float64(vr.IDs), true, ""
	case scenario.MetricRefusals:
		return float64(vr.Calls.Total - vr.Calls.OK), true, ""
	case scenario.MetricAvailability:
		if vr.Calls.Total == 0 {
			return 0, false, "no requests"
		}
		return vr.Calls.Availability(), true, ""
	case scenario.MetricGap:
		var g time.Duration
		for _, is := range vr.Issuers {
			g = max(g, is.LongestGap)
		}
		return float64(g), true, ""
	case scenario.MetricLead:
		if vr.Lead.Count == 0 {
			return 0, false, "no IDs issued"
		}
		return stat(vr.Lead, e.Stat), true, ""
	case scenario.MetricLeadOwn:
		if vr.Lead.Count == 0 {
			return 0, false, "no IDs issued"
		}
		return float64(vr.MaxLeadOwn), true, ""
	case scenario.MetricLag:
		if vr.Lag.Count == 0 {
			return 0, false, "no IDs issued"
		}
		return stat(vr.Lag, e.Stat), true, ""
	case scenario.MetricWait:
		if vr.Wait.Count == 0 {
			return 0, false, "no requests"
		}
		return stat(vr.Wait, e.Stat), true, ""
	}
	return 0, false, "unknown metric " + string(e.Metric)
}

func windowFigure(e scenario.Expr, w verify.WindowResult) (float64, bool, string) {
	none := fmt.Sprintf("no requests during %s", w.Name)
	switch e.Metric {
	case scenario.MetricDuplicates:
		return float64(w.Duplicates), true, ""
	case scenario.MetricIDs:
		return float64(w.Lead.Count), true, ""
	case scenario.MetricRefusals:
		return float64(w.Calls.Total - w.Calls.OK), true, ""
	case scenario.MetricAvailability:
		if w.Calls.Total == 0 {
			return 0, false, none
		}
		return w.Calls.Availability(), true, ""
	case scenario.MetricGap:
		if w.Calls.Total == 0 {
			return 0, false, none
		}
		return float64(w.LongestIssuerGap), true, ""
	case scenario.MetricLead:
		if w.Lead.Count == 0 {
			return 0, false, fmt.Sprintf("no IDs issued during %s", w.Name)
		}
		return stat(w.Lead, e.Stat), true, ""
	case scenario.MetricLeadOwn:
		if w.Lead.Count == 0 {
			return 0, false, fmt.Sprintf("no IDs issued during %s", w.Name)
		}
		return float64(w.MaxLeadOwn), true, ""
	case scenario.MetricLag:
		if w.Lag.Count == 0 {
			return 0, false, fmt.Sprintf("no IDs issued during %s", w.Name)
		}
		return stat(w.Lag, e.Stat), true, ""
	case scenario.MetricWait:
		if w.Wait.Count == 0 {
			return 0, false, none
		}
		return stat(w.Wait, e.Stat), true, ""
	}
	return 0, false, fmt.Sprintf("%s is not measured per window", e.Metric)
}
