package generator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// panicky is a Clock, Fence, Checkpointer and Observer (on a scriptClock
// and a memCheckpoint) whose every method can be armed to panic. Safe for
// concurrent use.
type panicky struct {
	*scriptClock
	cp memCheckpoint
	mu sync.Mutex
	// armed: op -> calls to let through before panicking.
	armed map[string]armed
	// fenceErr, if set, is what Fence.Check returns.
	fenceErr error
}

var (
	_ Clock        = (*panicky)(nil)
	_ Fence        = (*panicky)(nil)
	_ Checkpointer = (*panicky)(nil)
	_ Observer     = (*panicky)(nil)
)

func newPanicky() *panicky {
	return &panicky{scriptClock: newScriptClock(t0), armed: map[string]armed{}}
}

// armed says when an op panics: after more calls have passed, on every
// call from then on, or on one only.
type armed struct {
	after int
	once  bool
}

// arm makes op panic on every call after after more calls; disarm undoes
// every arm.
func (p *panicky) arm(op string, after int) { p.armWith(op, armed{after: after}) }

func (p *panicky) armWith(op string, a armed) {
	p.mu.Lock()
	p.armed[op] = a
	p.mu.Unlock()
}

func (p *panicky) disarm() {
	p.mu.Lock()
	clear(p.armed)
	p.mu.Unlock()
}

// errBoom is the value some panics carry, to check that an error value
// stays reachable through errors.Is.
var errBoom = errors.New("boom")

func (p *panicky) hit(op string) {
	p.mu.Lock()
	a, ok := p.armed[op]
	switch {
	case !ok:
	case a.after > 0:
		a.after--
		p.armed[op] = a
		ok = false
	case a.once:
		delete(p.armed, op)
	}
	p.mu.Unlock()
	if ok {
		if strings.HasPrefix(op, "Clock") {
			panic(fmt.Errorf("%s: %w", op, errBoom))
		}
		panic(op + " panicked")
	}
}

func (p *panicky) Now() (int64, int64) {
	p.hit("Clock.Now")
	return p.scriptClock.Now()
}

func (p *panicky) Sleep(d time.Duration) {
	p.hit("Clock.Sleep")
	p.scriptClock.Sleep(d)
}

func (p *panicky) Check(int64) error {
	p.hit("Fence.Check")
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fenceErr
}

func (p *panicky) Load() (int64, error) {
	p.hit("Checkpointer.Load")
	return p.cp.Load()
}

func (p *panicky) Save(ctx context.Context, markMs int64) error {
	p.hit("Checkpointer.Save")
	return p.cp.Save(ctx, markMs)
}

func (p *panicky) Rewind(context.Context, RewindEvent) { p.hit("Observer.Rewind") }
func (p *panicky) Wait(context.Context, WaitReason, int64, time.Duration) {
	p.hit("Observer.Wait")
}
func (p *panicky) Exhausted(context.Context)      { p.hit("Observer.Exhausted") }
func (p *panicky) Refused(context.Context, error) { p.hit("Observer.Refused") }
func (p *panicky) Lead(time.Duration)             { p.hit("Observer.Lead") }
func (p *panicky) Checkpoint(int64, error)        { p.hit("Observer.Checkpoint") }

// settings returns Settings using p for every dependency.
func (p *panicky) settings(policy Policy) Settings {
	return Settings{Clock: p, Fence: p, Checkpoint: p, Observer: p, Policy: policy, MaxWait: 50 * time.Millisecond}
}

// unlocked fails t unless g's lock is free and no checkpoint write is
// marked in flight.
func unlocked(t *testing.T, g *Generator) {
	t.Helper()
	if !g.mu.TryLock() {
		t.Fatal("the generator's lock is held after the call returned")
	}
	saving := g.mu.saving
	g.mu.Unlock()
	if saving {
		t.Fatal("a checkpoint write is still marked in flight")
	}
}

// TestPanicInDependency: a dependency that panics where the generator
// holds its lock, has a write in flight or reports to the Observer makes
// the call fail with a *PanicError naming it; the lock is free afterwards
// and, the panic gone, the next call issues a larger ID.
func TestPanicInDependency(t *testing.T) {
	batch := make([]ID, 5000) // more than one tick: the slow path
	for _, tc := range []struct {
		name   string
		op     string
		after  int
		policy Policy
		// setup runs before arming; call is the call that meets the panic.
		setup func(p *panicky, g *Generator)
		call  func(g *Generator) error
		// also: sentinels the error wraps besides ErrPanic.
		also []error
		// closes: the call closes the generator.
		closes bool
	}{
		// The second clock reading, under the lock, between two ticks of
		// a batch.
		{name: "Now between ticks", op: "Clock.Now", after: 1, call: nextN(batch), also: []error{errBoom}},
		{name: "Sleep", op: "Clock.Sleep", call: nextN(batch), also: []error{errBoom}},
		// The fence checked again after a sleep.
		{name: "Check after a sleep", op: "Fence.Check", after: 1, call: nextN(batch)},
		{name: "Save", op: "Checkpointer.Save", call: next, also: []error{ErrCheckpoint}},
		{name: "Checkpoint", op: "Observer.Checkpoint", call: next, also: []error{ErrCheckpoint}},
		{name: "Exhausted", op: "Observer.Exhausted", call: nextN(batch)},
		{name: "Wait", op: "Observer.Wait", call: nextN(batch)},
		{name: "Rewind", op: "Observer.Rewind", setup: stepBack, call: next},
		{name: "Lead", op: "Observer.Lead", policy: PolicyLogical, setup: stepBack, call: next},
		{name: "Refused rewind", op: "Observer.Refused", policy: PolicyRefuse, setup: stepBack, call: next, also: []error{ErrClockBackwards}},
		{name: "Refused by the fence", op: "Observer.Refused", setup: func(p *panicky, _ *Generator) {
			p.mu.Lock()
			p.fenceErr = errLeaseLost
			p.mu.Unlock()
		}, call: next, also: []error{ErrFenced, errLeaseLost}},
		{name: "Ready Now", op: "Clock.Now", setup: firstID, call: (*Generator).Ready, also: []error{errBoom}},
		{name: "Ready Check", op: "Fence.Check", setup: firstID, call: (*Generator).Ready},
		{name: "Close Save", op: "Checkpointer.Save", setup: firstID, call: (*Generator).Close, also: []error{ErrCheckpoint}, closes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPanicky()
			g := mustNew(t, p.settings(tc.policy))
			if tc.setup != nil {
				tc.setup(p, g)
			}
			p.arm(tc.op, tc.after)
			err := tc.call(g)
			var pe *PanicError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPanic) || pe.Op != tc.op {
				t.Fatalf("err = %v, want a *PanicError from %s", err, tc.op)
			}
			if !strings.Contains(err.Error(), tc.op) || len(pe.Stack) == 0 {
				t.Errorf("err = %q, stack %d bytes: want the op named and a stack", err, len(pe.Stack))
			}
			for _, e := range tc.also {
				if !errors.Is(err, e) {
					t.Errorf("err = %v, want it to wrap %v too", err, e)
				}
			}
			unlocked(t, g)
			p.disarm()
			p.mu.Lock()
			p.fenceErr = nil
			p.mu.Unlock()
			p.Advance(10 * time.Millisecond) // past any rewind
			if tc.closes {
				return
			}
			last := g.Stats().LastTick
			id, err := g.Next()
			if err != nil {
				t.Fatalf("Next after the panic: %v", err)
			}
			if tickOf(id) < last {
				t.Errorf("Next after the panic went back: tick %d < %d", tickOf(id), last)
			}
			unlocked(t, g)
		})
	}
}

func next(g *Generator) error { _, err := g.Next(); return err }

func nextN(dst []ID) func(*Generator) error {
	return func(g *Generator) error {
		n, err := g.NextN(dst)
		if err == nil && n != len(dst) {
			return fmt.Errorf("NextN = %d without an error", n)
		}
		return err
	}
}

func firstID(_ *panicky, g *Generator) {
	if _, err := g.Next(); err != nil {
		panic(err)
	}
}

func stepBack(p *panicky, g *Generator) {
	firstID(p, g)
	p.Step(-3 * time.Millisecond)
}

// TestPanicOnFastPath: on the fast path nothing is held, so a panic in
// Clock.Now or Fence.Check reaches the caller unchanged, and the next call
// works.
func TestPanicOnFastPath(t *testing.T) {
	for _, op := range []string{"Clock.Now", "Fence.Check"} {
		t.Run(op, func(t *testing.T) {
			p := newPanicky()
			g := mustNew(t, p.settings(PolicyWait))
			first := mustNext(t, g)
			p.arm(op, 0)
			func() {
				defer func() {
					if r := recover(); r == nil {
						t.Errorf("Next did not panic")
					}
				}()
				_, _ = g.Next()
			}()
			unlocked(t, g)
			p.disarm()
			if id := mustNext(t, g); id <= first {
				t.Errorf("%d <= %d", id, first)
			}
		})
	}
}

// TestPanicInLoad: New fails with an error wrapping ErrCheckpoint and
// ErrPanic.
func TestPanicInLoad(t *testing.T) {
	p := newPanicky()
	p.arm("Checkpointer.Load", 0)
	_, err := New(p.settings(PolicyWait))
	if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, ErrPanic) {
		t.Fatalf("New = %v", err)
	}
	p.arm("Clock.Now", 0)
	if _, err := New(Settings{Clock: p}); !errors.Is(err, ErrPanic) || !errors.Is(err, errBoom) {
		t.Fatalf("New with a panicking clock = %v", err)
	}
}

// TestPanicWhileOthersWait: a Save that panics while other calls wait for
// it (the mark they need is being written) releases them: none hangs, and
// each gets an ID or a documented error.
func TestPanicWhileOthersWait(t *testing.T) {
	p := newPanicky()
	s := p.settings(PolicyWait)
	s.MaxWait = time.Hour
	g := mustNew(t, s)
	release := make(chan struct{})
	entered := make(chan struct{})
	var once atomic.Bool
	p.cp.mu.Lock()
	p.cp.hook = func(int64) {
		if once.CompareAndSwap(false, true) {
			close(entered)
			<-release
			panic("Save panicked while others waited")
		}
	}
	p.cp.mu.Unlock()
	done := make(chan error, 5)
	go func() { done <- next(g) }()
	<-entered
	for range 4 {
		go func() { done <- next(g) }()
	}
	close(release)
	deadline := time.After(time.Minute)
	for range 5 {
		select {
		case err := <-done:
			if err != nil && !documented(err) {
				t.Errorf("undocumented error %v", err)
			}
		case <-deadline:
			t.Fatal("a call hung after Save panicked")
		}
	}
	unlocked(t, g)
	mustNext(t, g)
}

// TestPanicConcurrent: 2-8 goroutines issue while every dependency panics
// at random (one call, or every call for a while) and the clock steps back
// and forth. No call hangs, every error
// is documented, no ID repeats, each goroutine's IDs increase, and once
// the panics stop the generator issues again.
func TestPanicConcurrent(t *testing.T) {
	ops := []string{"Clock.Now", "Clock.Sleep", "Fence.Check", "Checkpointer.Save", "Observer.Rewind", "Observer.Wait", "Observer.Exhausted", "Observer.Refused", "Observer.Lead", "Observer.Checkpoint"}
	seeds := propSeeds()
	seeds = append(seeds[:min(len(seeds)-1, 4)], seeds[len(seeds)-1])
	for _, seed := range seeds {
		for _, policy := range []Policy{PolicyWait, PolicyRefuse, PolicyLogical} {
			r := rand.New(rand.NewPCG(seed, uint64(policy)))
			p := newPanicky()
			s := p.settings(policy)
			// 16 IDs per tick: batches span ticks, so the calls that hold
			// the lock (clock readings between ticks, exhaustion waits)
			// are frequent.
			s.Layout = Layout{TimeBits: 41, NodeBits: 18, SeqBits: 4}
			s.Reserve = 5 * time.Millisecond
			s.MaxLead = 20 * time.Millisecond
			g := mustNew(t, s)
			workers := 2 + r.IntN(7)
			const calls = 1500
			out := make([][]ID, workers)
			var done atomic.Int64
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dst := make([]ID, 64)
					for i := range calls {
						ids, err := callRecovered(g, dst[:1+(i*7)%len(dst)], i%3 == 0)
						out[w] = append(out[w], ids...)
						if err != nil && !documented(err) {
							errs <- fmt.Errorf("worker %d: undocumented error %v", w, err)
							return
						}
						done.Add(1)
					}
				}()
			}
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			// Inject a fault every 5 calls or so until the workers finish.
			limit := time.After(time.Minute)
		inject:
			for at := int64(5); ; runtime.Gosched() {
				select {
				case <-finished:
					break inject
				case err := <-errs:
					t.Fatal(err)
				case <-limit:
					t.Fatalf("seed %d %v: workers hung (%d of %d calls done)", seed, policy, done.Load(), workers*calls)
				default:
				}
				if done.Load() < at {
					continue
				}
				at += 5
				switch k := r.IntN(10); {
				case k < 2:
					// The clock is read most often, under the lock too.
					p.armWith("Clock.Now", armed{after: r.IntN(10), once: true})
				case k < 4:
					p.armWith(ops[r.IntN(len(ops))], armed{after: r.IntN(20), once: r.IntN(4) > 0})
				case k < 5:
					p.disarm()
				case k < 6:
					p.Step(-time.Duration(r.Int64N(int64(3 * time.Millisecond))))
				default:
					p.Advance(time.Duration(r.Int64N(int64(200 * time.Microsecond))))
				}
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			unlocked(t, g)
			seen := map[ID]int{}
			for w, ids := range out {
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("seed %d %v: worker %d: %d after %d", seed, policy, w, id, ids[i-1])
					}
					if v, dup := seen[id]; dup {
						t.Fatalf("seed %d %v: %d issued to workers %d and %d", seed, policy, id, v, w)
					}
					seen[id] = w
				}
			}
			p.disarm()
			p.Advance(time.Second)
			if _, err := g.Next(); err != nil {
				t.Fatalf("seed %d %v: Next after the panics stopped: %v", seed, policy, err)
			}
		}
	}
}

// callRecovered calls NextN (batch) or Next, turning a panic that reaches
// the caller (only the fast path lets one through) into an error wrapping
// ErrPanic.
func callRecovered(g *Generator, dst []ID, batch bool) (ids []ID, err error) {
	defer func() {
		if r := recover(); r != nil {
			ids, err = nil, fmt.Errorf("%w: reached the caller: %v", ErrPanic, r)
		}
	}()
	if batch {
		n, err := g.NextN(dst)
		return dst[:n], err
	}
	id, err := g.Next()
	if err != nil {
		return nil, err
	}
	return []ID{id}, nil
}

// panickyContext is a context whose Err panics.
type panickyContext struct{ context.Context }

func (panickyContext) Err() error { panic("Err panicked") }

// TestPanicInContext: a context that panics when a waiting call checks it
// fails the call like a panicking dependency, and the lock is free.
func TestPanicInContext(t *testing.T) {
	p := newPanicky()
	g := mustNew(t, p.settings(PolicyWait))
	stepBack(p, g) // the next call waits, checking its context first
	done, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := g.NextContext(panickyContext{done})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Op != "context" {
		t.Fatalf("err = %v, want a *PanicError from the context", err)
	}
	unlocked(t, g)
	if _, err := g.NextContext(done); err != nil {
		t.Fatalf("NextContext after the panic: %v", err)
	}
}
