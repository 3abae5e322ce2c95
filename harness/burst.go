package harness

import (
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
)

// A fault burst (load.fault_burst, real mode) keeps calls in flight across
// each clock fault's instant: from FaultBurst before to FaultBurst after
// it, the clients of the fault's nodes send back to back. A step back of
// a few milliseconds replays only those milliseconds: at a paced rate a
// run may send nothing into some of them, before or after the step, and
// miss the repeat a generator without a regression check makes; sending
// back to back puts calls into every one of them.

// burstSpan is one window of back-to-back sending.
type burstSpan struct {
	from, to time.Duration
}

// burstSpans returns the burst windows of each declared node (by slot
// index, in node order), and of the whole run for total-load clients.
func burstSpans(s *scenario.Scenario) [][]burstSpan {
	out := make([][]burstSpan, len(s.Nodes))
	w := s.Load.FaultBurst
	if w <= 0 {
		return out
	}
	for _, f := range s.Faults {
		if !f.Kind.Clock() {
			continue
		}
		at := f.At
		for _, name := range f.Nodes {
			for i, n := range s.Nodes {
				if n.Name == name {
					out[i] = append(out[i], burstSpan{from: at - w, to: at + w})
				}
			}
		}
	}
	return out
}

// burstNext returns when a client of slot si (-1: a total-load client)
// whose call ended at now, and whose pace says next, sends again: at once
// inside a burst window, at the start of one that opens before next, else
// next.
func (r *run) burstNext(si int, now, next time.Duration) time.Duration {
	if next < 0 || r.s.Load.FaultBurst <= 0 || r.simulated() {
		return next
	}
	best := next
	try := func(sp burstSpan) {
		switch {
		case now >= sp.from && now < sp.to:
			best = min(best, now)
		case sp.from > now && sp.from < best:
			best = sp.from
		}
	}
	for i, spans := range r.bursts {
		if si >= 0 && i != si {
			continue
		}
		for _, sp := range spans {
			try(sp)
		}
	}
	return best
}
