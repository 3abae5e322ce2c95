package verify

import (
	"math"
	"time"
)

// tally is what the Verifier counts over a stretch of calls: calls by
// outcome, IDs, findings, and the wait, lead and lag distributions (lead
// and lag record positive values only: the other IDs count as zeros).
type tally struct {
	calls              [numOutcomes]uint64
	ids                uint64
	dups, order, restv uint64
	wait, lead, lag    hist
	maxLeadOwn         int64         // the largest lead over the issuer's own clock
	maxWait            time.Duration // the first call with the longest wait
	maxWaitBy          IssuerID
	maxWaitAt          int64
}

// total returns the number of calls.
func (t *tally) total() uint64 {
	var n uint64
	for _, c := range t.calls {
		n += c
	}
	return n
}

// callCounts returns the calls as a Calls.
func (t *tally) callCounts() Calls {
	return Calls{Total: t.total(), OK: t.calls[OutcomeOK], Refused: t.calls[OutcomeRefused],
		WaitExceeded: t.calls[OutcomeWaitExceeded], Errors: t.calls[OutcomeError]}
}

// merge adds o to t; o's stretch of calls comes after t's, so t keeps its
// longest wait on a tie.
func (t *tally) merge(o *tally) {
	for i, c := range o.calls {
		t.calls[i] += c
	}
	t.ids += o.ids
	t.dups += o.dups
	t.order += o.order
	t.restv += o.restv
	t.wait.merge(&o.wait)
	t.lead.merge(&o.lead)
	t.lag.merge(&o.lag)
	t.maxLeadOwn = max(t.maxLeadOwn, o.maxLeadOwn)
	if o.maxWait > t.maxWait {
		t.maxWait, t.maxWaitBy, t.maxWaitAt = o.maxWait, o.maxWaitBy, o.maxWaitAt
	}
}

// reset empties t, keeping its histograms' memory.
func (t *tally) reset() {
	w, l, g := t.wait, t.lead, t.lag
	w.reset()
	l.reset()
	g.reset()
	*t = tally{wait: w, lead: l, lag: g}
}

// clone returns an independent copy of t.
func (t *tally) clone() tally {
	c := *t
	c.wait, c.lead, c.lag = t.wait.clone(), t.lead.clone(), t.lag.clone()
	return c
}

func (t *tally) bytes() uint64 {
	return uint64(cap(t.wait.counts)+cap(t.lead.counts)+cap(t.lag.counts)) * 8
}

// Epochs. Every call lands in the tally of the current epoch, a stretch of
// calls whose RefStart falls in [epochLo, epochHi), a range over which the
// set of windows holding RefStart does not change. When a call falls
// outside it, or the windows change, the epoch's tally is folded into the
// run's and into each active window's, and a new epoch begins. A call
// therefore updates one tally however many windows there are, and the
// fold costs time in proportion to the histogram buckets the epoch used.

// checkEpoch makes the epoch hold reference time t, which the current
// one does not.
func (v *Verifier) checkEpoch(t int64) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	same, n := true, 0
	for i := range v.windows {
		w := &v.windows[i].Window
		in := w.contains(t)
		// Narrow [lo, hi) to the side of each boundary that t lies on.
		for _, b := range [2]int64{w.Start, w.End} {
			if b <= t {
				lo = max(lo, b)
			} else {
				hi = min(hi, b)
			}
		}
		if in {
			if n >= len(v.active) || v.active[n] != i {
				same = false
			}
			n++
		}
	}
	if !same || n != len(v.active) {
		v.foldEpoch()
		v.active = v.active[:0]
		for i := range v.windows {
			if v.windows[i].contains(t) {
				v.active = append(v.active, i)
			}
		}
	}
	v.epochLo, v.epochHi = lo, hi
}

// foldEpoch ends the current epoch: its tally goes into the run's and the
// active windows'.
func (v *Verifier) foldEpoch() {
	v.run.merge(&v.cur)
	for _, i := range v.active {
		v.windows[i].t.merge(&v.cur)
	}
	v.cur.reset()
}

// invalidateEpoch ends the current epoch and makes the next call
// recompute the active windows (after windows change).
func (v *Verifier) invalidateEpoch() {
	v.foldEpoch()
	v.active = v.active[:0]
	v.epochLo, v.epochHi = 1, 0
}

// runTally returns the whole run's tally so far, without ending the epoch.
func (v *Verifier) runTally() tally {
	t := v.run.clone()
	t.merge(&v.cur)
	return t
}

// windowTally returns window i's tally so far, without ending the epoch.
func (v *Verifier) windowTally(i int) tally {
	t := v.windows[i].t.clone()
	for _, a := range v.active {
		if a == i {
			t.merge(&v.cur)
		}
	}
	return t
}
