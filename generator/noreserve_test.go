package generator

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNoReserveMarkIsIssuingTick: with NoReserve every mark names the tick
// it was saved for, so a generator started on it in the same tick issues
// only from the next tick: the start fence's boundary, with no reserve
// to hide an off-by-one.
func TestNoReserveMarkIsIssuingTick(t *testing.T) {
	c := newScriptClock(t0.Add(300 * time.Microsecond))
	cp := &memCheckpoint{}
	l := DefaultLayout()
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, Reserve: NoReserve})
	if got := g.Settings().Reserve; got != NoReserve {
		t.Fatalf("Settings().Reserve = %v, want NoReserve", got)
	}
	var last ID
	for i := 0; i < 50; i++ {
		c.Advance(230 * time.Microsecond)
		last = mustNext(t, g)
		if ms := l.TimeOf(tickOf(last)).UnixMilli(); ms != cp.Mark() {
			t.Fatalf("ID at %d ms with the saved mark %d: want the mark to name the issuing tick", ms, cp.Mark())
		}
	}
	// A crash now: the next incarnation loads the mark of the last tick.
	g2 := mustNew(t, Settings{Clock: c, Checkpoint: cp, Reserve: NoReserve})
	id := mustNext(t, g2)
	if tickOf(id) != tickOf(last)+1 {
		t.Fatalf("after a restart in the mark's tick the first ID is at tick %d, want %d (one past the mark)", tickOf(id), tickOf(last)+1)
	}
}

// TestNoReserveBounds: NoReserve is the one negative Reserve accepted.
func TestNoReserveBounds(t *testing.T) {
	if _, err := New(Settings{Reserve: NoReserve - 1}); !errors.Is(err, ErrInvalidSettings) {
		t.Fatalf("Reserve %v: err %v, want ErrInvalidSettings", NoReserve-1, err)
	}
}

// TestNoIDPastUnsavedMarkDuringSave: while a mark is being saved (a Save in
// flight, as a crash might interrupt it), a concurrent call issues nothing
// past the mark already saved: a crash before the write lands loses
// nothing that was handed out.
func TestNoIDPastUnsavedMarkDuringSave(t *testing.T) {
	c := newScriptClock(t0.Add(300 * time.Microsecond))
	cp := &memCheckpoint{}
	l := DefaultLayout()
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, Reserve: NoReserve})
	mustNext(t, g)
	var during []ID
	cp.hook = func(int64) {
		// The mutex is held by Save; read the mark it still holds.
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a request that may not wait: the crash comes first
		var dst [4]ID
		n, _ := g.NextNContext(ctx, dst[:])
		during = append(during, dst[:n]...)
	}
	for i := 0; i < 20; i++ {
		c.Advance(time.Millisecond)
		saved := cp.Mark()
		mustNext(t, g)
		for _, id := range during {
			if ms := l.TimeOf(tickOf(id)).UnixMilli(); ms > saved {
				t.Fatalf("a call during the save of a new mark issued at %d ms, past the saved mark %d", ms, saved)
			}
		}
		during = during[:0]
	}
}

// TestNoReserveSlowWriteServes: with NoReserve a write that takes longer
// than a tick does not send its call round for another write of a later
// tick, again and again until its deadline: the call issues at the tick
// the mark was written for, one write late, and never past the mark.
func TestNoReserveSlowWriteServes(t *testing.T) {
	c := newScriptClock(t0.Add(300 * time.Microsecond))
	cp := &memCheckpoint{}
	l := DefaultLayout()
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, Reserve: NoReserve, MaxWait: 50 * time.Millisecond})
	cp.hook = func(int64) { c.Advance(3 * time.Millisecond) } // each write takes three ticks
	for i := 0; i < 20; i++ {
		c.Advance(time.Millisecond)
		before := cp.saves
		var id ID
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			id, err = g.Next()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d: no answer within 10 s of wall time (it waits for a write of every later tick)", i)
		}
		if err != nil {
			t.Fatalf("call %d with writes slower than a tick: %v", i, err)
		}
		if ms := l.TimeOf(tickOf(id)).UnixMilli(); ms > cp.Mark() {
			t.Fatalf("ID at %d ms past the saved mark %d", ms, cp.Mark())
		}
		if w := cp.saves - before; w > 1 {
			t.Fatalf("call %d wrote the mark %d times: want one write a call at most", i, w)
		}
	}
}
