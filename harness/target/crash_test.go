package target_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
)

// tickOf returns an ID's tick under layout l.
func tickOf(l generator.Layout, id generator.ID) int64 {
	return int64(id) >> (l.NodeBits + l.SeqBits)
}

// TestCrashPoints: a node armed at a point of its checkpoint's write
// crashes there: the requests in flight are served first (here, without
// waiting, nothing: the mark they need is not yet saved), the call never
// answers, and the disk keeps what was synced: the old mark before the
// write and before its sync, the new one after the sync. The next
// incarnation starts past the mark the disk kept.
func TestCrashPoints(t *testing.T) {
	ctx := context.Background()
	tg, _ := target.Lookup(target.InProcessName)
	cases := []struct {
		point string
		batch int
		// kept is the tick the disk's mark names after the crash,
		// relative to the tick of the call that crashed (t1).
		kept int64
		// served is how many IDs the request in flight got.
		served int
	}{
		{faults.PointBeforeWrite, 1, -1, 0},
		{faults.PointBeforeSync, 1, -1, 0},
		{faults.PointAfterSync, 1, 0, 0},
		// 1,500 IDs with a 1,024 sequence: the write for the second tick
		// comes mid-batch; the disk keeps the first tick's mark.
		{faults.PointMidBatch, 1500, 0, 0},
		// The call issued in t1 (its mark saved first); the request in
		// flight takes the next ID of t1 and is answered.
		{faults.PointNewTick, 1, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.point, func(t *testing.T) {
			v := faults.NewVirtual(start.Add(300*time.Microsecond), true)
			s := spec("a")
			s.Reserve = generator.NoReserve
			if c.batch > 1 {
				s.Layout = presetLayout(t, "41/12/10")
			}
			n, err := tg.Start(ctx, s, target.Env{Base: v})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			cp, ok := n.(target.CrashPointer)
			if !ok {
				t.Fatal("the in-process node is not a CrashPointer")
			}
			issue(t, n, 1)
			v.Advance(time.Millisecond)
			t1 := s.Layout.TickOf(start.Add(1300 * time.Microsecond).UnixNano())
			inFlight, served := 0, 0
			err = cp.ArmCrash(c.point, func() {
				inFlight++
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				k, _ := n.Issue(cctx, make([]generator.ID, 1))
				served += k
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.Issue(ctx, make([]generator.ID, c.batch))
			if !errors.Is(err, target.ErrCrashed) || got != 0 {
				t.Fatalf("the call that reached %s: %d IDs, %v; want 0, ErrCrashed", c.point, got, err)
			}
			if inFlight != 1 || served != c.served {
				t.Fatalf("in flight: called %d times, served %d IDs; want once, %d (no ID may pass the saved mark)", inFlight, served, c.served)
			}
			if !cp.Crashed() {
				t.Fatal("Crashed() false after the crash")
			}
			if _, err := n.Issue(ctx, make([]generator.ID, 1)); !errors.Is(err, target.ErrStopped) {
				t.Fatalf("a crashed node answered: %v", err)
			}
			if err := n.Stop(ctx, target.StopOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := n.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if cp.Crashed() {
				t.Fatal("Crashed() still true after a restart")
			}
			id := issue(t, n, 1)[0]
			if got, want := tickOf(s.Layout, id), t1+c.kept+1; got != want {
				t.Fatalf("first ID after the restart at tick %d, want %d (one past the kept mark)", got, want)
			}
		})
	}
}

// TestCrashPointNotReached: an armed point strikes only inside a call
// that reaches it (mid_batch: not in a single-ID call, nor in a batch's
// first write), and an unknown point or a reference generator is refused.
func TestCrashPointNotReached(t *testing.T) {
	ctx := context.Background()
	tg, _ := target.Lookup(target.InProcessName)
	v := faults.NewVirtual(start, true)
	s := spec("a")
	s.Reserve = generator.NoReserve
	n, err := tg.Start(ctx, s, target.Env{Base: v})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cp := n.(target.CrashPointer)
	if err := cp.ArmCrash("before_fsync", nil); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("unknown point: %v", err)
	}
	if err := cp.ArmCrash(faults.PointMidBatch, func() { t.Fatal("in flight called without a crash") }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		v.Advance(time.Millisecond)
		issue(t, n, 1)
		issue(t, n, 100) // one tick: no write after its first IDs
	}
	if cp.Crashed() {
		t.Fatal("mid_batch struck outside a batch's middle")
	}
	rt, _ := target.Lookup("bad-memory-only")
	rn, err := rt.Start(ctx, spec("r"), target.Env{Base: v})
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	if err := rn.(target.CrashPointer).ArmCrash(faults.PointBeforeWrite, nil); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("reference generator: %v", err)
	}
}

// presetLayout returns the named layout preset.
func presetLayout(t *testing.T, name string) generator.Layout {
	t.Helper()
	for _, l := range generator.Presets() {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no layout %s", name)
	return generator.Layout{}
}
