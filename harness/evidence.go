package harness

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// A verdict rests on what the judged process itself did. Three kinds of
// evidence decide whether a run can pass, beyond its invariants:
//
//   - Reach. A clock fault counts as applied to a node only on evidence
//     from the node's own process: its own clock reading (ClockControl.
//     Offset, the time request of an exec target), or, when it offers
//     none, the time its IDs carry after the fault (reachWatch). A probe
//     beside the process is a diagnostic in the report, never evidence.
//   - Incarnations. Every node, restart and clone that started must have
//     served IDs (incStats); one that did not leaves the run unknown,
//     whatever its other checks say.
//   - Protocol. A node whose answers broke its protocol (target.Witness)
//     leaves the run unknown, except for duplicates, which are IDs it
//     returned twice however it framed them.

// reachWatch is a clock fault on a node incarnation that offers no clock
// reading of its own: the fault counts as reached only if IDs the
// incarnation issues after it carry the faulted time, that is lie within
// the faulted clock's reading during their call and outside the unfaulted
// one's.
type reachWatch struct {
	fi          int
	slot        int
	incarnation int
	node        string
	// since is the reference time (Unix ns) from which calls count: the
	// fault's landing.
	since int64
	// before is the node's shadow offset just before the fault: where an
	// unfaulted clock would read.
	before time.Duration
	// why says why the node offered no reading; diag what the probe
	// beside it read.
	why, diag string
	// cross marks a watch on a fault the node's own clock reading
	// already showed: its IDs are checked against that reading, and IDs
	// that keep the unfaulted time contradict it.
	cross bool
	// lead is how far ahead of the fault's model the process's clock may
	// stand (a freeze is held ahead: extclock.State.Hold).
	lead time.Duration
	// ids counts the IDs checked after since; matched those that carry
	// the faulted time, plain those that carry the unfaulted time only.
	ids, matched, plain uint64
	// shift is the first matching ID's time minus the unfaulted clock's
	// reading (what the fault moved it by, as the ID shows it).
	shift time.Duration
}

// minContradiction is how many IDs carrying the unfaulted time, and none
// the faulted one, contradict a node's own clock reading of a fault.
const minContradiction = 10

// reachSlack is how far beyond its call's interval, read on the faulted
// or unfaulted clock, an ID's time may lie and still count as read from
// it: the model's publish latency, and a reading taken a little before
// the harness's own timestamp of the call.
const reachSlack = time.Millisecond

// watchReach registers a reach watch for fault fi on the slot's current
// incarnation, counting from now.
func (l *lifecycle) watchReach(fi int, sl *slot, before time.Duration, why, diag string, cross bool) {
	w := &reachWatch{fi: fi, slot: sl.idx, incarnation: sl.incarnation, node: sl.name,
		since: l.startNs + int64(l.d.now()), before: before, why: why, diag: diag, cross: cross}
	if l.s.Faults[fi].Kind == faults.KindFreeze {
		w.lead = extclock.MaxLead
	}
	if !cross {
		l.faults[fi].pending++
	}
	l.mu.Lock()
	l.mu.watches = append(l.mu.watches, w)
	l.mu.Unlock()
	l.nwatch.Add(1)
}

// observeReach checks a call's IDs against the watches on its node
// incarnation. lo and hi are the node's shadow offsets at the call's start
// and end (in either order).
func (r *run) observeReach(c *view, arrive, end time.Duration, ids *idBuf, lo, hi time.Duration) {
	if ids.len() == 0 || !r.kind.Timed() {
		return
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	start, stop := r.startNs+int64(arrive), r.startNs+int64(end)
	layout := c.sl.spec.Layout.Normalize()
	tick := int64(layout.Tick)
	if r.kind != verify.KindSnowflake {
		tick = int64(time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.mu.watches {
		if w.slot != c.sl.idx || w.incarnation != c.incarnation || start < w.since {
			continue
		}
		for _, i := range [2]int{0, ids.len() - 1} {
			e, ok := ids.timeAt(i, layout)
			if !ok {
				continue
			}
			w.ids++
			faulted := e > start+int64(lo)-tick-int64(reachSlack) && e <= stop+int64(hi)+int64(reachSlack+w.lead)
			plain := e > start+int64(w.before)-tick-int64(reachSlack) && e <= stop+int64(w.before)+int64(reachSlack)
			switch {
			case faulted && !plain:
				if w.matched == 0 {
					w.shift = time.Duration(e - (start + int64(w.before)))
				}
				w.matched++
			case plain && !faulted:
				w.plain++
			}
			if ids.len() == 1 {
				break
			}
		}
	}
}

// settleReach decides every reach watch once the run's calls are all in:
// a watch with an ID that carries the faulted time confirms its fault on
// that node; one without leaves the fault unconfirmed, saying what the
// node's IDs showed instead.
func (l *run) settleReach() {
	l.mu.Lock()
	watches := l.mu.watches
	l.mu.Unlock()
	for _, w := range watches {
		fr := &l.faults[w.fi]
		if w.cross {
			if w.matched == 0 && w.plain >= minContradiction {
				l.unconfirmed(w.fi, fmt.Sprintf("%s: its clock reading showed the fault, but %d of the %d IDs checked after it carry the unfaulted time and none the faulted one: its IDs do not come from the clock it reports (it may stamp them from a monotonic clock, which a wall-clock fault does not move, or read the wall clock by a path the fault does not reach), so the run cannot show the fault reached them",
					w.node, w.plain, w.ids))
			}
			continue
		}
		fr.pending--
		if w.matched > 0 {
			l.detail(w.fi, fmt.Sprintf("%s: reached: %d of the %d IDs checked after the fault carry the faulted time (the first %s from the unfaulted clock); the process offers no clock reading of its own (%s)",
				w.node, w.matched, w.ids, FormatShift(w.shift), w.why))
			if fr.pending == 0 && !fr.failed {
				fr.Confirmed = true
			}
			continue
		}
		var saw string
		switch {
		case !l.kind.Timed():
			saw = fmt.Sprintf("its %s IDs embed no time", l.kind)
		case w.ids == 0:
			saw = "it issued no ID after the fault"
		case w.plain > 0:
			saw = fmt.Sprintf("%d of the %d IDs checked after the fault carry the unfaulted time: the process may not read its clock through the route that carries the fault", w.plain, w.ids)
		default:
			saw = fmt.Sprintf("none of the %d IDs checked after the fault carries the faulted time", w.ids)
		}
		msg := fmt.Sprintf("%s: no evidence the fault reached the process: it offers no clock reading of its own (%s) and %s", w.node, w.why, saw)
		if w.diag != "" {
			msg += "; diagnostic, not evidence: " + w.diag
		}
		l.unconfirmed(w.fi, msg)
	}
}

// FormatShift renders a signed clock shift: "-50ms", "+1s".
func FormatShift(d time.Duration) string {
	if d >= 0 {
		return "+" + Duration(d).String()
	}
	return Duration(d).String()
}

// incStats is what the harness knows of one node incarnation besides its
// calls: when it was started and ready, and when it first and last
// returned IDs.
type incStats struct {
	// name and incarnation identify it.
	name        string
	incarnation int
	// started says a start succeeded (the harness sent it requests);
	// startedAt and readyAt are offsets from the run's start.
	started            bool
	startedAt, readyAt time.Duration
	// firstID and lastID bound the calls that returned IDs (reference
	// Unix ns; 0: none).
	firstID, lastID int64
}

// noteIDs records that issuer's call [start, end] returned IDs; called
// under r.mu.
func (r *run) noteIDsLocked(issuer verify.IssuerID, start, end int64) {
	if int(issuer) >= len(r.mu.inc) {
		return
	}
	st := &r.mu.inc[issuer]
	if st.firstID == 0 {
		st.firstID = start
	}
	st.lastID = end
}

// noteStartLocked records the start of the slot's current incarnation,
// registered as issuer; called under r.mu.
func (r *run) noteStartLocked(issuer verify.IssuerID, sl *slot) {
	for int(issuer) >= len(r.mu.inc) {
		r.mu.inc = append(r.mu.inc, incStats{})
	}
	st := &r.mu.inc[issuer]
	st.name, st.incarnation = sl.name, sl.incarnation
	st.started, st.startedAt, st.readyAt = !sl.pending, sl.startedAt, sl.readyAt
}

// ViolationResult is a protocol violation, for reports.
type ViolationResult struct {
	// Node and Incarnation name the issuer; Process and PID the process.
	Node        string `json:"node"`
	Incarnation int    `json:"incarnation"`
	PID         int    `json:"pid"`
	// Detail says what was wrong.
	Detail string `json:"detail"`
}

// maxViolationResults bounds the violations a result lists.
const maxViolationResults = 20

// collectViolations reads the violations node n recorded since the last
// collection and attributes them to the slot's incarnation inc.
func (r *run) collectViolations(n target.Node, name string, inc int) {
	wn, ok := n.(target.Witness)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.seenViolations == nil {
		r.mu.seenViolations = map[target.Node]int{}
	}
	vs := wn.Violations(r.mu.seenViolations[n])
	r.mu.seenViolations[n] += len(vs)
	for _, v := range vs {
		r.mu.violated++
		if len(r.mu.violations) < maxViolationResults {
			r.mu.violations = append(r.mu.violations, ViolationResult{Node: name, Incarnation: inc, PID: v.PID, Detail: v.Detail})
		}
	}
}

// protocolError reports whether err is a protocol violation.
func protocolError(err error) bool { return errors.Is(err, target.ErrProtocol) }

// judgeEvidence applies the evidence rules to a finished result: a
// protocol violation turns every check but a duplicate's failure unknown;
// an incarnation that started and never served leaves the run unknown.
// inc holds the run's incarnation stats by node and incarnation.
func judgeEvidence(res *Result, violated int, violations []ViolationResult) {
	if violated > 0 {
		res.Protocol = violations
		res.Figures.ProtocolViolations = violated
		v := violations[0]
		why := fmt.Sprintf("protocol violation (%d in all): %s#%d (pid %d): %s", violated, v.Node, v.Incarnation, v.PID, v.Detail)
		res.Unknown = append(res.Unknown, why)
		for i := range res.Checks {
			c := &res.Checks[i]
			if c.Verdict == NA || (c.Verdict == Fail && isDuplicates(c.Expr) && !c.Expected) {
				continue
			}
			if c.Verdict == Pass || c.Verdict == Fail {
				c.Verdict, c.Reason = Unknown, "the node broke its protocol, so its answers cannot be judged: "+why
			}
		}
	}
	for _, nr := range res.Nodes {
		if nr.Started && nr.IDs == 0 {
			what := "node " + nr.Name
			if nr.Incarnation > 0 {
				what = fmt.Sprintf("node %s incarnation %d", nr.Name, nr.Incarnation)
			}
			res.Unknown = append(res.Unknown, fmt.Sprintf("%s (started at %s, ready after %s) never served: %d requests, 0 IDs", what, nr.StartedAt, nr.ReadyAfter, nr.Requests))
		}
	}
}

// isDuplicates reports whether a check expression judges duplicates.
func isDuplicates(expr string) bool {
	return strings.HasPrefix(strings.TrimSpace(expr), "duplicates")
}

// maxCallErrors bounds the distinct error texts a run keeps.
const maxCallErrors = 8

// noteErrorLocked counts a failed call's error by its text (first line,
// clipped); called under r.mu.
func (r *run) noteErrorLocked(err error) {
	text := err.Error()
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if r.mu.callErrors == nil {
		r.mu.callErrors = map[string]uint64{}
	}
	if _, ok := r.mu.callErrors[text]; !ok && len(r.mu.callErrors) >= maxCallErrors {
		r.mu.otherErrors++
		return
	}
	r.mu.callErrors[text]++
}

// callErrors lists the counted error texts, most frequent first, and the
// rest as one entry.
func callErrors(m map[string]uint64, other uint64) []CallError {
	out := make([]CallError, 0, len(m)+1)
	for t, n := range m {
		out = append(out, CallError{Text: t, Count: n})
	}
	slices.SortFunc(out, func(a, b CallError) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(a.Text, b.Text)
	})
	if other > 0 {
		out = append(out, CallError{Text: fmt.Sprintf("(other errors, past the first %d texts)", maxCallErrors), Count: other})
	}
	return out
}
