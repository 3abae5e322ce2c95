package generator

import (
	"context"
	"errors"
	"testing"
	"time"
)

type stubCheckpoint struct {
	mark    int64
	loadErr error
	saveErr error
	saves   int
}

func (m *stubCheckpoint) Load() (int64, error) { return m.mark, m.loadErr }
func (m *stubCheckpoint) Save(_ context.Context, mark int64) error {
	if m.saveErr != nil {
		return m.saveErr
	}
	m.mark = mark
	m.saves++
	return nil
}

func TestCheckpointsLoadsTheLargestAndSavesAll(t *testing.T) {
	a, b := &stubCheckpoint{mark: 10}, &stubCheckpoint{mark: 25}
	c := Checkpoints(a, b)
	if got, err := c.Load(); err != nil || got != 25 {
		t.Fatalf("Load = %d, %v; want 25, nil", got, err)
	}
	if err := c.Save(context.Background(), 40); err != nil {
		t.Fatal(err)
	}
	if a.mark != 40 || b.mark != 40 {
		t.Fatalf("marks after Save(40): %d, %d", a.mark, b.mark)
	}
	if one := Checkpoints(a); one != Checkpointer(a) {
		t.Fatal("Checkpoints with one argument should return it")
	}
}

func TestCheckpointsErrors(t *testing.T) {
	boom := errors.New("boom")
	a, b := &stubCheckpoint{mark: 10}, &stubCheckpoint{loadErr: boom}
	if _, err := Checkpoints(a, b).Load(); !errors.Is(err, boom) {
		t.Fatalf("Load error = %v, want boom", err)
	}
	a, b = &stubCheckpoint{saveErr: boom}, &stubCheckpoint{}
	if err := Checkpoints(a, b).Save(context.Background(), 5); !errors.Is(err, boom) {
		t.Fatalf("Save error = %v, want boom", err)
	}
	if b.saves != 0 {
		t.Fatal("Save went on past the first failure")
	}
}

// TestReserveWritesBeforeTheFirstCall: Reserve persists a mark ahead of
// the clock, so the first call does not write; a second Reserve below the
// renewal point writes nothing; a failed write is kept and Ready reports it.
func TestReserveWritesBeforeTheFirstCall(t *testing.T) {
	clk := newScriptClock(t0)
	cp := &stubCheckpoint{}
	g, err := New(Settings{Node: 1, Clock: clk, Checkpoint: cp, Reserve: 100 * time.Millisecond, Policy: PolicyRefuse})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cp.saves != 1 || cp.mark < t0.UnixMilli()+100 {
		t.Fatalf("after Reserve: %d saves, mark %d, clock %d ms", cp.saves, cp.mark, t0.UnixMilli())
	}
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(context.Background()); err != nil || cp.saves != 1 {
		t.Fatalf("second Reserve: %v, %d saves (want 1: the mark is still ahead)", err, cp.saves)
	}
	// Past half the reservation a write is due; make it fail.
	clk.Advance(60 * time.Millisecond)
	cp.saveErr = errors.New("disk full")
	if err := g.Reserve(context.Background()); err == nil {
		t.Fatalf("Reserve with a failing disk: %v", err)
	}
	clk.Advance(50 * time.Millisecond) // beyond the mark
	if err := g.Ready(); err == nil {
		t.Fatal("Ready after a failed write beyond the mark")
	}
	cp.saveErr = nil
	if err := g.Reserve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(); err != nil {
		t.Fatalf("Ready after a good write: %v", err)
	}
}

// TestReserveWithoutCheckpoint does nothing.
func TestReserveWithoutCheckpoint(t *testing.T) {
	g, err := New(Settings{Node: 1, Clock: newScriptClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReserveHeldByTheStoredMark: while the clock has not passed a stored
// mark no call can issue, so Reserve writes nothing (a later mark would
// only hold the next restart longer).
func TestReserveHeldByTheStoredMark(t *testing.T) {
	cp := &stubCheckpoint{mark: t0.Add(time.Hour).UnixMilli()}
	g, err := New(Settings{Node: 1, Clock: newScriptClock(t0), Checkpoint: cp, Reserve: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(context.Background()); err != nil || cp.saves != 0 || cp.mark != t0.Add(time.Hour).UnixMilli() {
		t.Fatalf("Reserve under a stored mark an hour ahead: %v, %d saves, mark %d", err, cp.saves, cp.mark)
	}
}
