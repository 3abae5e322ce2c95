package generator

import (
	"context"
	"time"
)

// reserveBudget bounds Reserve's write when ctx has no earlier deadline.
const reserveBudget = time.Minute

// Reserve persists a mark reserved ahead of the clock's current tick when
// the next call would otherwise have to write one first (after New, and
// once issuing has passed half of the reservation), so that the calls
// after it do not spend their MaxWait on the disk. A node calls it before
// it reports ready. While a stored mark still holds the generator (the
// clock has not passed it) it writes nothing. It writes within ctx (and at most a minute), issues
// nothing, and only ever raises the mark; without a Checkpointer it does
// nothing. A failed write is returned and also kept, as after a failed
// call: Ready reports it until a later write succeeds.
func (g *Generator) Reserve(ctx context.Context) error {
	if g.cp == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock() // every dependency call below recovers its panic
	if g.mu.closed {
		return ErrClosed
	}
	if g.mu.saving {
		return nil // a call is writing the mark now
	}
	wall, _, err := clockNow(g.clock)
	if err != nil {
		return err
	}
	if wall < g.epochNs {
		return ErrBeforeEpoch
	}
	wt := (wall - g.epochNs) / g.tickNs
	if g.mu.fresh && wt <= g.mu.startTick {
		// Held by the stored mark until the clock passes it: no call
		// issues before then, and a mark written now would only hold a
		// later restart longer.
		return nil
	}
	s := g.state.Load()
	t := max(wt, int64((s&^slowBit)>>g.timeShift))
	if t <= g.mu.renewAt || t > g.maxTick {
		return nil
	}
	g.renewLocked(ctx, t, int64(reserveBudget))
	return g.mu.saveErr
}
