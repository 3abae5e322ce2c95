package generator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// boundCheckpoint records the time each Save's context had left when it
// was called and, when hang is set, blocks until that context ends, as a
// store that never answers would.
type boundCheckpoint struct {
	mark int64
	hang bool

	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (c *boundCheckpoint) Load() (int64, error) { return c.mark, nil }

func (c *boundCheckpoint) Save(ctx context.Context, mark int64) error {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	c.mu.Lock()
	c.left = append(c.left, left)
	c.mu.Unlock()
	if c.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *boundCheckpoint) budgets() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.left...)
}

// TestSaveBoundedByCallBudget: the generator hands Save what is left of
// the call's MaxWait (its deadline on the monotonic clock, less the start
// fence wait already spent), and a Save that never returns on its own
// fails the call with ErrCheckpoint instead of blocking it.
func TestSaveBoundedByCallBudget(t *testing.T) {
	const maxWait = 40 * time.Millisecond
	const fenceWait = 15 * time.Millisecond
	c := newScriptClock(t0)
	// The stored mark lies 15 ms ahead: the first call waits that out on
	// the script clock before it reserves.
	cp := &boundCheckpoint{mark: t0.Add(fenceWait).UnixMilli()}
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, MaxWait: maxWait})
	mustNext(t, g)
	left := cp.budgets()
	if len(left) != 1 {
		t.Fatalf("%d saves, want 1", len(left))
	}
	if left[0] < 0 || left[0] > maxWait-fenceWait {
		t.Fatalf("Save's context had %v left, want a deadline within the %v of MaxWait %v left after the %v start wait", left[0], maxWait-fenceWait, maxWait, fenceWait)
	}

	hung := &boundCheckpoint{hang: true}
	g = mustNew(t, Settings{Clock: newScriptClock(t0), Checkpoint: hung, MaxWait: maxWait})
	_, err := g.Next()
	if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a hanging checkpoint = %v, want ErrCheckpoint wrapping context.DeadlineExceeded", err)
	}
	if left := hung.budgets(); len(left) != 1 || left[0] < 0 || left[0] > maxWait {
		t.Fatalf("hanging Save's budgets %v, want one within MaxWait %v", left, maxWait)
	}
}

// TestCloseSaveBounded: Close's final Save gets a deadline of MaxWait,
// and a hanging store makes Close fail rather than block.
func TestCloseSaveBounded(t *testing.T) {
	const maxWait = 30 * time.Millisecond
	cp := &boundCheckpoint{}
	g := mustNew(t, Settings{Clock: newScriptClock(t0), Checkpoint: cp, MaxWait: maxWait})
	mustNext(t, g)
	cp.hang = true
	if err := g.Close(); !errors.Is(err, ErrCheckpoint) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a hanging checkpoint = %v, want ErrCheckpoint wrapping context.DeadlineExceeded", err)
	}
	left := cp.budgets()
	if len(left) != 2 || left[1] < 0 || left[1] > maxWait {
		t.Fatalf("budgets %v: want Close's Save bounded by MaxWait %v", left, maxWait)
	}
}

// TestFileCheckpointSaveHonoursContext: an ended context writes nothing,
// and a Save queued behind a write that does not finish returns by its
// deadline; once that write is done, Save works again.
func TestFileCheckpointSaveHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mark")
	cp := NewFileCheckpoint(path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cp.Save(ctx, 7); !errors.Is(err, ErrCheckpoint) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a cancelled context = %v, want ErrCheckpoint wrapping context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Save with a cancelled context wrote the file: %v", err)
	}

	cp.turn <- struct{}{} // a write under way that does not finish
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer tcancel()
	if err := cp.Save(tctx, 8); !errors.Is(err, ErrCheckpoint) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Save behind a stalled write = %v, want ErrCheckpoint wrapping context.DeadlineExceeded", err)
	}
	<-cp.turn
	if err := cp.Save(context.Background(), 9); err != nil {
		t.Fatal(err)
	}
	if m, err := cp.Load(); m != 9 || err != nil {
		t.Fatalf("Load = %d, %v; want 9", m, err)
	}
}
