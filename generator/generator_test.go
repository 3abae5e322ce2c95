package generator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// t0 is a tick-aligned start time for scripted clocks.
var t0 = DefaultEpoch.Add(time.Hour)

func mustNew(t *testing.T, s Settings) *Generator {
	t.Helper()
	g, err := New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func mustNext(t *testing.T, g *Generator) ID {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}

func tickOf(id ID) int64 { return DefaultLayout().Decode(id).Tick }

// TestRewindPolicies is the history table for "the clock jumps back 3 ms":
// refuse errors, wait returns once the clock has caught up, logical
// continues with strictly larger IDs.
func TestRewindPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy Policy
		check  func(t *testing.T, c *scriptClock, g *Generator, o *recObserver, last ID)
	}{
		{PolicyRefuse, func(t *testing.T, c *scriptClock, g *Generator, o *recObserver, last ID) {
			id, err := g.Next()
			var re *RewindError
			if !errors.As(err, &re) || !errors.Is(err, ErrClockBackwards) || id != 0 {
				t.Fatalf("Next = %v, %v; want *RewindError wrapping ErrClockBackwards", id, err)
			}
			if re.By != 3*time.Millisecond || re.Policy != PolicyRefuse {
				t.Errorf("RewindError = %+v, want By 3ms, policy refuse", re)
			}
			if got := err.Error(); got != "generator: clock moved backwards by 3ms (policy refuse)" {
				t.Errorf("Error() = %q", got)
			}
			if n, _ := c.Slept(); n != 0 {
				t.Errorf("refuse slept %d times", n)
			}
			if err := g.Ready(); !errors.Is(err, ErrClockBackwards) {
				t.Errorf("Ready = %v, want ErrClockBackwards", err)
			}
			st := g.Stats()
			if st.RewindsRefused != 1 || st.Refusals != 1 || st.LastRewindBy != 3*time.Millisecond {
				t.Errorf("stats %+v", st)
			}
			if len(o.rewinds) != 1 || o.rewinds[0].Outcome != OutcomeRefused || len(o.refused) != 1 {
				t.Errorf("observer rewinds %+v refused %v", o.rewinds, o.refused)
			}
			c.Advance(3 * time.Millisecond)
			if err := g.Ready(); err != nil {
				t.Errorf("Ready after catching up = %v", err)
			}
			if id := mustNext(t, g); id <= last {
				t.Errorf("after catching up: %d <= %d", id, last)
			}
		}},
		{PolicyWait, func(t *testing.T, c *scriptClock, g *Generator, o *recObserver, last ID) {
			if err := g.Ready(); err != nil {
				t.Errorf("Ready = %v, want nil (the wait fits MaxWait)", err)
			}
			id := mustNext(t, g)
			if id <= last {
				t.Fatalf("%d <= %d", id, last)
			}
			if tickOf(id) != tickOf(last) {
				t.Errorf("tick %d, want the last tick %d reused", tickOf(id), tickOf(last))
			}
			if _, slept := c.Slept(); slept != 3*time.Millisecond {
				t.Errorf("slept %v, want 3ms", slept)
			}
			if st := g.Stats(); st.RewindsWaited != 1 || st.Refusals != 0 {
				t.Errorf("stats %+v", st)
			}
			if len(o.rewinds) != 1 || o.rewinds[0].Outcome != OutcomeWaited || o.rewinds[0].By != 3*time.Millisecond {
				t.Errorf("observer rewinds %+v", o.rewinds)
			}
			if len(o.waits) != 1 || o.waits[0] != WaitRewind || o.waited[0] != 3*time.Millisecond {
				t.Errorf("observer waits %v %v", o.waits, o.waited)
			}
		}},
		{PolicyLogical, func(t *testing.T, c *scriptClock, g *Generator, o *recObserver, last ID) {
			prev := last
			for i := 0; i < 10000; i++ {
				id := mustNext(t, g)
				if id <= prev {
					t.Fatalf("logical: %d <= %d", id, prev)
				}
				prev = id
			}
			// 10001 IDs from tick L on: L (rest), L+1, L+2 carried ahead.
			if got := tickOf(prev) - tickOf(last); got != 2 {
				t.Errorf("carried %d ticks, want 2", got)
			}
			st := g.Stats()
			if st.RewindsLogical != 1 || st.Lead != 5*time.Millisecond || st.MaxLead != 5*time.Millisecond {
				t.Errorf("stats %+v", st)
			}
			if len(o.rewinds) != 1 || o.rewinds[0].Outcome != OutcomeLogical {
				t.Errorf("observer rewinds %+v", o.rewinds)
			}
			if n, _ := c.Slept(); n != 0 {
				t.Errorf("logical slept %d times", n)
			}
			c.Advance(10 * time.Millisecond)
			id := mustNext(t, g)
			if id <= prev {
				t.Fatalf("after catching up: %d <= %d", id, prev)
			}
			if st := g.Stats(); st.Lead != 0 || st.MaxLead != 5*time.Millisecond {
				t.Errorf("after catching up: stats %+v", st)
			}
			if l := o.leads[len(o.leads)-1]; l != 0 {
				t.Errorf("last Lead hook %v, want 0", l)
			}
		}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			c := newScriptClock(t0)
			o := &recObserver{}
			g := mustNew(t, Settings{Clock: c, Policy: tc.policy, Node: 9, Observer: o})
			var last ID
			for range 100 {
				last = mustNext(t, g)
			}
			c.Step(-3 * time.Millisecond)
			tc.check(t, c, g, o, last)
		})
	}
}

func TestWaitBeyondMaxWaitFailsAtOnce(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, MaxWait: 100 * time.Millisecond})
	mustNext(t, g)
	c.Step(-2 * time.Second)
	_, err := g.Next()
	var re *RewindError
	if !errors.As(err, &re) || !errors.Is(err, ErrWaitExceeded) || re.By != 2*time.Second {
		t.Fatalf("err = %v, want RewindError{By: 2s} wrapping ErrWaitExceeded", err)
	}
	if n, _ := c.Slept(); n != 0 {
		t.Errorf("slept %d times for a wait that could not fit", n)
	}
	if err := g.Ready(); !errors.Is(err, ErrWaitExceeded) {
		t.Errorf("Ready = %v", err)
	}
}

func TestLogicalLeadBound(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, Policy: PolicyLogical, MaxLead: 5 * time.Millisecond})
	var last ID
	// Frozen clock: the sequence carries into later ticks until the lead
	// would pass 5 ms.
	n := 0
	for {
		id, err := g.Next()
		if err != nil {
			if !errors.Is(err, ErrLeadExceeded) {
				t.Fatalf("err = %v, want ErrLeadExceeded", err)
			}
			break
		}
		if id <= last {
			t.Fatalf("%d <= %d", id, last)
		}
		last = id
		n++
	}
	if n != 6*4096 {
		t.Errorf("issued %d, want 6 ticks of 4096 (lead 0..5 ms)", n)
	}
	if err := g.Ready(); !errors.Is(err, ErrLeadExceeded) {
		t.Errorf("Ready = %v", err)
	}
	if st := g.Stats(); st.Exhaustions != 6 || st.MaxLead != 5*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	// A rewind bigger than the bound refuses at once.
	c.Advance(time.Second)
	mustNext(t, g)
	c.Step(-10 * time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrLeadExceeded) {
		t.Errorf("rewind past MaxLead: %v", err)
	}
	if st := g.Stats(); st.RewindsRefused != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestFrozenClock(t *testing.T) {
	for _, p := range []Policy{PolicyWait, PolicyRefuse} {
		t.Run(p.String(), func(t *testing.T) {
			c := newScriptClock(t0)
			c.Freeze(true)
			o := &recObserver{}
			g := mustNew(t, Settings{Clock: c, Policy: p, MaxWait: 20 * time.Millisecond, Observer: o})
			seen := map[ID]bool{}
			var err error
			for i := 0; i < 5000 && err == nil; i++ {
				var id ID
				id, err = g.Next()
				if err == nil {
					if seen[id] {
						t.Fatalf("duplicate %d", id)
					}
					seen[id] = true
				}
			}
			if len(seen) != 4096 {
				t.Errorf("issued %d in a frozen tick, want 4096", len(seen))
			}
			var re *RewindError
			if !errors.Is(err, ErrWaitExceeded) || errors.As(err, &re) {
				t.Fatalf("err = %v, want ErrWaitExceeded (not a rewind)", err)
			}
			if !strings.Contains(err.Error(), "exhausted") {
				t.Errorf("err %q does not say the sequence was exhausted", err)
			}
			if _, slept := c.Slept(); slept > 20*time.Millisecond {
				t.Errorf("slept %v, more than MaxWait", slept)
			}
			if st := g.Stats(); st.Exhaustions != 1 || st.Refusals != 1 || st.Issued != 4096 {
				t.Errorf("stats %+v", st)
			}
			if o.exhausted != 1 || len(o.waits) != 1 || o.waits[0] != WaitExhausted {
				t.Errorf("observer exhausted %d waits %v", o.exhausted, o.waits)
			}
			c.Freeze(false)
			id := mustNext(t, g)
			if seen[id] || tickOf(id) != t0TickPlus(1) {
				t.Errorf("after thaw: %d tick %d", id, tickOf(id))
			}
		})
	}
}

func t0TickPlus(n int64) int64 { return DefaultLayout().TickOf(t0.UnixNano()) + n }

func TestExhaustionWaitsForNextTick(t *testing.T) {
	c := newScriptClock(t0.Add(250 * time.Microsecond))
	g := mustNew(t, Settings{Clock: c})
	var last ID
	for i := 0; i <= 4096; i++ {
		id := mustNext(t, g)
		if id <= last {
			t.Fatalf("%d <= %d", id, last)
		}
		last = id
	}
	if tickOf(last) != t0TickPlus(1) {
		t.Errorf("4097th ID in tick %d, want %d", tickOf(last), t0TickPlus(1))
	}
	if _, slept := c.Slept(); slept != 750*time.Microsecond {
		t.Errorf("slept %v, want 750µs (to the next tick)", slept)
	}
}

// TestOneDeadline shows one deadline covers a rewind wait followed by an
// exhaustion wait in the same call.
// hookClock is a Clock that runs after() once each Sleep has advanced it.
type hookClock struct {
	*scriptClock
	after func()
}

func (c hookClock) Sleep(d time.Duration) {
	c.scriptClock.Sleep(d)
	c.after()
}

// TestWaitQueueOrder: a call that must wait for the next tick while calls
// queued before it want three ticks' worth of IDs sleeps until its turn,
// three ticks after the next, takes none of the IDs promised to them
// meanwhile, and is served in the tick it woke in.
func TestWaitQueueOrder(t *testing.T) {
	c := newScriptClock(t0.Add(250 * time.Microsecond))
	var g *Generator
	const phantom = 3 * 4096
	served := int64(0)
	var queued queuePlace // calls queued for three ticks' worth
	hc := hookClock{c, func() {
		// The queued calls are served 4,096 IDs per tick from tick 1 on.
		wall, _ := c.Now()
		due := min(max(DefaultLayout().TickOf(wall)-t0TickPlus(0), 0)*4096, phantom)
		g.mu.Lock()
		g.servedLocked(&queued, due-served)
		if due == phantom {
			g.leaveLocked(&queued)
		}
		served = due
		g.mu.Unlock()
	}}
	g = mustNew(t, Settings{Clock: hc})
	if n, err := g.NextN(make([]ID, 4096)); n != 4096 || err != nil {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	g.mu.Lock()
	g.enqueueLocked(&queued, phantom)
	g.mu.Unlock()
	id := mustNext(t, g)
	if _, slept := c.Slept(); slept != 3750*time.Microsecond {
		t.Errorf("slept %v, want 3.75ms (to the tick after the queued calls' three)", slept)
	}
	if tickOf(id) != t0TickPlus(4) {
		t.Errorf("ID in tick %d, want %d", tickOf(id), t0TickPlus(4))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.qLen != 0 || g.mu.qEnq != g.mu.qDone {
		t.Errorf("queue not empty after: %d calls, %d IDs asked, %d done", g.mu.qLen, g.mu.qEnq, g.mu.qDone)
	}
}

// TestWaitQueueNewCallsLeaveTheRest: with calls queued wanting 4,000 IDs
// (which, here, never come for them), a new call at the start of a tick
// takes only the 96 they leave, then queues behind them and takes the 96
// of each following tick.
func TestWaitQueueNewCallsLeaveTheRest(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c})
	mustNext(t, g) // tick 0, sequence 0
	c.Advance(time.Millisecond)
	g.mu.Lock()
	g.enqueueLocked(&queuePlace{}, 4000)
	g.mu.Unlock()
	dst := make([]ID, 200)
	if n, err := g.NextN(dst); n != 200 || err != nil {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	perTick := map[int64]int{}
	for _, id := range dst {
		perTick[tickOf(id)-t0TickPlus(0)]++
	}
	if want := map[int64]int{1: 96, 2: 96, 3: 8}; !maps.Equal(perTick, want) {
		t.Errorf("IDs per tick %v, want %v", perTick, want)
	}
	if _, slept := c.Slept(); slept != 2*time.Millisecond {
		t.Errorf("slept %v, want 2ms", slept)
	}
}

func TestOneDeadline(t *testing.T) {
	for _, tc := range []struct {
		maxWait time.Duration
		ok      bool
	}{{6 * time.Millisecond, true}, {5900 * time.Microsecond, false}} {
		t.Run(tc.maxWait.String(), func(t *testing.T) {
			c := newScriptClock(t0)
			g := mustNew(t, Settings{Clock: c, MaxWait: tc.maxWait})
			dst := make([]ID, 4096)
			if n, err := g.NextN(dst); n != 4096 || err != nil {
				t.Fatal(n, err)
			}
			c.Step(-5 * time.Millisecond)
			// 5 ms to get back to the last tick, whose sequence is used
			// up, then 1 ms more: 6 ms in all.
			id, err := g.Next()
			if tc.ok != (err == nil) {
				t.Fatalf("MaxWait %v: %v, %v", tc.maxWait, id, err)
			}
			if tc.ok && id <= dst[4095] {
				t.Errorf("%d <= %d", id, dst[4095])
			}
			if _, slept := c.Slept(); slept > tc.maxWait {
				t.Errorf("slept %v > MaxWait %v", slept, tc.maxWait)
			}
		})
	}
	// A clock that never catches up: the call sleeps at most MaxWait.
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, MaxWait: 30 * time.Millisecond})
	mustNext(t, g)
	c.Step(-time.Millisecond)
	c.Freeze(true)
	if _, err := g.Next(); !errors.Is(err, ErrWaitExceeded) {
		t.Fatalf("frozen after rewind: %v", err)
	}
	if _, slept := c.Slept(); slept > 30*time.Millisecond {
		t.Errorf("slept %v > MaxWait", slept)
	}
}

func TestContextStopsWait(t *testing.T) {
	c := newScriptClock(t0)
	c.Freeze(true)
	o := &recObserver{}
	g := mustNew(t, Settings{Clock: c, Observer: o})
	mustNext(t, g)
	c.Step(-time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.NextContext(ctx)
	if !errors.Is(err, ErrWaitExceeded) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrWaitExceeded and context.Canceled", err)
	}
	dst := make([]ID, 3)
	if n, err := g.NextNContext(ctx, dst); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("NextNContext = %d, %v", n, err)
	}
}

func TestNextN(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, Node: 1})
	var last ID
	total := 0
	for _, n := range []int{1, 7, 4096, 5000, 12288, 3, 100000} {
		dst := make([]ID, n)
		got, err := g.NextN(dst)
		if err != nil || got != n {
			t.Fatalf("NextN(%d) = %d, %v", n, got, err)
		}
		for _, id := range dst {
			if id <= last {
				t.Fatalf("NextN(%d): %d <= %d", n, id, last)
			}
			last = id
		}
		total += n
		c.Advance(300 * time.Microsecond)
	}
	if st := g.Stats(); st.Issued != uint64(total) {
		t.Errorf("Issued %d, want %d", st.Issued, total)
	}
	if n, err := g.NextN(nil); n != 0 || err != nil {
		t.Errorf("NextN(nil) = %d, %v", n, err)
	}

	// A frozen clock: the batch fills the tick, then fails; the IDs
	// written are valid.
	c.Freeze(true)
	c.Advance(time.Millisecond)
	dst := make([]ID, 5000)
	n, err := g.NextN(dst)
	if n != 4096 || !errors.Is(err, ErrWaitExceeded) {
		t.Fatalf("frozen NextN = %d, %v", n, err)
	}
	for _, id := range dst[:n] {
		if id <= last {
			t.Fatalf("%d <= %d", id, last)
		}
		last = id
	}
}

func TestCoarseTick(t *testing.T) {
	l, err := LayoutByName("39/16/8@10ms")
	if err != nil {
		t.Fatal(err)
	}
	c := newScriptClock(t0.Add(3 * time.Millisecond))
	g := mustNew(t, Settings{Clock: c, Layout: l, Node: 40000})
	var last ID
	for i := 0; i < 3000; i++ {
		if i%50 == 0 {
			c.Advance(time.Millisecond)
		}
		id := mustNext(t, g)
		if id <= last {
			t.Fatalf("%d <= %d", id, last)
		}
		last = id
		p := l.Decode(id)
		if p.Node != 40000 {
			t.Fatalf("node %d", p.Node)
		}
		wall, _ := c.Now()
		if p.Time.UnixNano() > wall || wall-p.Time.UnixNano() >= int64(10*time.Millisecond) {
			t.Fatalf("embedded time %v, wall %v", p.Time, time.Unix(0, wall))
		}
	}
	// 256 IDs per 10 ms tick: 3000 IDs need at least 11 ticks.
	if st := g.Stats(); st.Exhaustions == 0 {
		t.Errorf("no exhaustion with 8 sequence bits: %+v", st)
	}
	c.Step(-15 * time.Millisecond)
	if id := mustNext(t, g); id <= last {
		t.Errorf("after rewind: %d <= %d", id, last)
	}
}

func TestLifetime(t *testing.T) {
	l := Layout{TimeBits: 20, NodeBits: 21, SeqBits: 22}
	end := DefaultEpoch.Add(time.Duration(1<<20) * time.Millisecond)
	c := newScriptClock(end.Add(-time.Millisecond))
	g := mustNew(t, Settings{Clock: c, Layout: l})
	mustNext(t, g)
	c.Advance(time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrLifetime) {
		t.Fatalf("past the lifetime: %v", err)
	}
	if err := g.Ready(); !errors.Is(err, ErrLifetime) {
		t.Errorf("Ready = %v", err)
	}
	if _, err := New(Settings{Clock: c, Layout: l}); !errors.Is(err, ErrLifetime) || !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("New past the lifetime: %v", err)
	}
}

func TestBeforeEpoch(t *testing.T) {
	c := newScriptClock(DefaultEpoch.Add(time.Millisecond))
	g := mustNew(t, Settings{Clock: c})
	mustNext(t, g)
	c.Step(-time.Hour)
	if _, err := g.Next(); !errors.Is(err, ErrBeforeEpoch) {
		t.Fatalf("err = %v", err)
	}
	// A fresh generator can use tick 0.
	c2 := newScriptClock(DefaultEpoch)
	g2 := mustNew(t, Settings{Clock: c2})
	if id := mustNext(t, g2); id != 0 {
		t.Errorf("first ID at the epoch = %d, want 0", id)
	}
}

func TestNewErrors(t *testing.T) {
	c := newScriptClock(t0)
	for _, tc := range []struct {
		name string
		s    Settings
		want error
		text string
	}{
		{"bits", Settings{Layout: Layout{TimeBits: 41, NodeBits: 10, SeqBits: 13}}, ErrInvalidLayout, "41+10+13 = 64"},
		{"node high", Settings{Node: 1024}, ErrNodeRange, "Node = 1024"},
		{"node negative", Settings{Node: -1}, ErrNodeRange, "Node = -1"},
		{"policy", Settings{Policy: 7}, ErrInvalidPolicy, "7"},
		{"max wait", Settings{MaxWait: -1}, ErrInvalidSettings, "MaxWait = -1ns"},
		{"max lead", Settings{MaxLead: -time.Second}, ErrInvalidSettings, "MaxLead = -1s"},
		{"reserve", Settings{Reserve: -time.Second}, ErrInvalidSettings, "Reserve = -1s"},
		{"future epoch", Settings{Layout: Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, Epoch: t0.Add(time.Hour)}}, ErrInvalidLayout, "in the future"},
		{"checkpoint", Settings{Checkpoint: &memCheckpoint{mark: -5}}, ErrCheckpoint, "-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Clock = c
			_, err := New(tc.s)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want %v naming %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	g := mustNew(t, Settings{})
	s := g.Settings()
	if s.Layout.Name != "41/10/12" || !s.Layout.Epoch.Equal(DefaultEpoch) || s.Layout.Tick != time.Millisecond ||
		s.MaxWait != time.Second || s.MaxLead != time.Second || s.Reserve != time.Second || s.Clock == nil || s.Policy != PolicyWait {
		t.Errorf("defaults %+v", s)
	}
	// The real clock works.
	a, b := mustNext(t, g), mustNext(t, g)
	if b <= a {
		t.Errorf("%d <= %d", b, a)
	}
}

// failFence is a Fence that fails when closed is set and counts checks.
type failFence struct {
	mu     sync.Mutex
	closed bool
	checks int
}

var errLeaseLost = errors.New("lease lost")

func (f *failFence) Check(int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if f.closed {
		return errLeaseLost
	}
	return nil
}

func TestFence(t *testing.T) {
	c := newScriptClock(t0)
	f := &failFence{}
	o := &recObserver{}
	g := mustNew(t, Settings{Clock: c, Fence: f, Observer: o})
	for range 10 {
		mustNext(t, g)
	}
	if f.checks != 10 {
		t.Errorf("fence checked %d times for 10 calls", f.checks)
	}
	f.closed = true
	_, err := g.Next()
	if !errors.Is(err, ErrFenced) || !errors.Is(err, errLeaseLost) {
		t.Fatalf("err = %v", err)
	}
	if _, err := g.NextN(make([]ID, 4)); !errors.Is(err, ErrFenced) {
		t.Fatalf("NextN err = %v", err)
	}
	if err := g.Ready(); !errors.Is(err, ErrFenced) {
		t.Errorf("Ready = %v", err)
	}
	if st := g.Stats(); st.Refusals != 2 || len(o.refused) != 2 || st.Issued != 10 {
		t.Errorf("refusals %d, observed %d, issued %d (want 2, 2, 10)", st.Refusals, len(o.refused), st.Issued)
	}
}

func TestFenceClosesDuringWait(t *testing.T) {
	c := newScriptClock(t0)
	n := 0
	g := mustNew(t, Settings{Clock: c, Fence: fenceFunc(func(int64) error {
		n++
		if n > 2 {
			return ErrFenced
		}
		return nil
	})})
	mustNext(t, g)
	c.Step(-3 * time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrFenced) {
		t.Fatalf("err = %v, want ErrFenced after the wait's first step", err)
	}
}

// wordFence is a failFence with a word (FenceWord).
type wordFence struct {
	failFence
	word atomic.Int64
}

func (f *wordFence) OpenUntil() *atomic.Int64 { return &f.word }

// TestFenceWord checks the fast path's use of a fence's word: below it no
// Check, at or above it Check decides, and a closed word (the fence
// lowers it before refusing) sends every call to Check.
func TestFenceWord(t *testing.T) {
	c := newScriptClock(t0)
	_, mono := c.Now()
	f := &wordFence{}
	f.word.Store(mono + int64(10*time.Millisecond))
	g := mustNew(t, Settings{Clock: c, Fence: f})
	for range 10 {
		mustNext(t, g)
	}
	if f.checks != 0 {
		t.Errorf("fence checked %d times below its word", f.checks)
	}
	c.Advance(10 * time.Millisecond) // at the word
	mustNext(t, g)
	if f.checks != 1 {
		t.Errorf("fence checked %d times at its word, want 1", f.checks)
	}
	f.word.Store(math.MinInt64)
	f.closed = true
	if _, err := g.Next(); !errors.Is(err, ErrFenced) || !errors.Is(err, errLeaseLost) {
		t.Fatalf("closed word: err = %v, want the fence's refusal", err)
	}
	if st := g.Stats(); st.Issued != 11 || st.Refusals != 1 {
		t.Errorf("issued %d, refusals %d (want 11, 1)", st.Issued, st.Refusals)
	}
	// A FenceWord without a word yet: Check on every call.
	nf := &wordFence{}
	if w := fenceWordOf(nilWordFence{nf}); w.Load() != math.MinInt64 {
		t.Errorf("a nil word: %d, want closed", w.Load())
	}
	if w := fenceWordOf(nil); w.Load() != math.MaxInt64 {
		t.Errorf("no fence: %d, want open", w.Load())
	}
}

// nilWordFence is a FenceWord that has no word.
type nilWordFence struct{ *wordFence }

func (nilWordFence) OpenUntil() *atomic.Int64 { return nil }

type fenceFunc func(int64) error

func (f fenceFunc) Check(mono int64) error { return f(mono) }

func TestClose(t *testing.T) {
	c := newScriptClock(t0)
	cp := &memCheckpoint{}
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp})
	last := mustNext(t, g)
	if cp.Mark() < t0.Add(time.Second).UnixMilli() {
		t.Errorf("reserved mark %d, want >= now+1s", cp.Mark())
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := cp.Mark(), DefaultLayout().TimeOf(tickOf(last)).UnixMilli(); got != want {
		t.Errorf("final mark %d, want %d (the last issued tick)", got, want)
	}
	if _, err := g.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	if _, err := g.NextN(make([]ID, 2)); !errors.Is(err, ErrClosed) {
		t.Errorf("NextN after Close: %v", err)
	}
	if err := g.Ready(); !errors.Is(err, ErrClosed) {
		t.Errorf("Ready after Close: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRestart: a restarted generator never repeats an ID, whether it
// restarts in the same millisecond, after a clean Close, after a crash, or
// after the clock stepped back.
func TestRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    Policy
		close     bool
		step      time.Duration
		maxLead   time.Duration
		wantErr   error
		wantStart bool
	}{
		{"wait/crash/same ms", PolicyWait, false, 0, 0, nil, true},
		{"wait/close/same ms", PolicyWait, true, 0, 0, nil, true},
		{"wait/close/rewind 50ms", PolicyWait, true, -50 * time.Millisecond, 0, nil, true},
		{"wait/crash/rewind 500ms", PolicyWait, false, -500 * time.Millisecond, 0, ErrWaitExceeded, true},
		{"refuse/close/same ms", PolicyRefuse, true, 0, 0, ErrClockBackwards, true},
		{"refuse/close/later", PolicyRefuse, true, 5 * time.Millisecond, 0, nil, false},
		{"logical/crash/same ms", PolicyLogical, false, 0, 0, ErrLeadExceeded, true},
		{"logical/crash/same ms/lead 2s", PolicyLogical, false, 0, 2 * time.Second, nil, true},
		{"logical/close/rewind 50ms", PolicyLogical, true, -50 * time.Millisecond, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newScriptClock(t0.Add(400 * time.Microsecond))
			cp := &memCheckpoint{}
			s := Settings{Clock: c, Checkpoint: cp, Policy: tc.policy, MaxLead: tc.maxLead, MaxWait: 1100 * time.Millisecond, Reserve: 1000 * time.Millisecond}
			g1 := mustNew(t, s)
			dst := make([]ID, 1000)
			if _, err := g1.NextN(dst); err != nil {
				t.Fatal(err)
			}
			last := dst[len(dst)-1]
			if tc.close {
				if err := g1.Close(); err != nil {
					t.Fatal(err)
				}
			}
			c.Step(tc.step)
			o := &recObserver{}
			s.Observer = o
			g2 := mustNew(t, s)
			id, err := g2.Next()
			if tc.wantErr != nil {
				var re *RewindError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &re) {
					t.Fatalf("err = %v, want RewindError wrapping %v", err, tc.wantErr)
				}
				if rerr := g2.Ready(); rerr == nil {
					t.Errorf("Ready = nil while refusing")
				}
			} else {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if id <= last {
					t.Fatalf("restart repeated or went back: %d <= %d", id, last)
				}
			}
			if tc.wantStart && (len(o.rewinds) != 1 || !o.rewinds[0].Start) {
				t.Errorf("rewinds %+v, want one with Start", o.rewinds)
			}
			if !tc.wantStart && len(o.rewinds) != 0 {
				t.Errorf("rewinds %+v, want none", o.rewinds)
			}
		})
	}
}

// TestMarkPersistedBeforeIssue: no ID's tick ever passes the mark that was
// durably saved before it was issued.
func TestMarkPersistedBeforeIssue(t *testing.T) {
	c := newScriptClock(t0)
	cp := &memCheckpoint{}
	l := DefaultLayout()
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, Reserve: 100 * time.Millisecond})
	for i := 0; i < 20000; i++ {
		c.Advance(37 * time.Microsecond)
		id := mustNext(t, g)
		if ms := l.TimeOf(tickOf(id)).UnixMilli(); ms > cp.Mark() {
			t.Fatalf("ID at %d ms issued past the saved mark %d", ms, cp.Mark())
		}
	}
	// 20000 * 37 µs = 740 ms at a renewal every ~50 ms.
	if cp.saves < 10 || cp.saves > 20 {
		t.Errorf("%d saves for 740 ms with Reserve 100ms", cp.saves)
	}
	if st := g.Stats(); st.MarkMs != cp.Mark() || st.CheckpointWrites != uint64(cp.saves) {
		t.Errorf("stats %+v, saves %d", st, cp.saves)
	}
}

func TestCheckpointError(t *testing.T) {
	c := newScriptClock(t0)
	boom := errors.New("disk full")
	cp := &memCheckpoint{err: boom}
	o := &recObserver{}
	g := mustNew(t, Settings{Clock: c, Checkpoint: cp, Observer: o})
	_, err := g.Next()
	if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := g.Ready(); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("Ready = %v", err)
	}
	if st := g.Stats(); st.CheckpointErrors != 1 || st.Refusals != 1 || st.Issued != 0 {
		t.Errorf("stats %+v", st)
	}
	if len(o.cpErrs) != 1 || !errors.Is(o.cpErrs[0], boom) {
		t.Errorf("observer checkpoints %v", o.cpErrs)
	}
	cp.mu.Lock()
	cp.err = nil
	cp.mu.Unlock()
	mustNext(t, g)
	if err := g.Ready(); err != nil {
		t.Errorf("Ready after recovery = %v", err)
	}
}

func TestFileCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mark")
	cp := NewFileCheckpoint(path)
	if cp.Path() != path {
		t.Errorf("Path = %q", cp.Path())
	}
	if m, err := cp.Load(); m != 0 || err != nil {
		t.Fatalf("Load of a missing file = %d, %v", m, err)
	}
	for _, m := range []int64{1, 1735693200123, math.MaxInt64 / int64(time.Millisecond)} {
		if err := cp.Save(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		if got, err := cp.Load(); got != m || err != nil {
			t.Fatalf("Load = %d, %v, want %d", got, err, m)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the mark", len(entries))
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Load(); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), `"garbage"`) {
		t.Errorf("Load of garbage = %v", err)
	}
	if err := NewFileCheckpoint(filepath.Join(dir, "missing", "mark")).Save(context.Background(), 5); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("Save into a missing directory = %v", err)
	}

	// A generator restarted on the same file in the same millisecond
	// never repeats.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c := newScriptClock(t0)
	g1 := mustNew(t, Settings{Clock: c, Checkpoint: cp, MaxWait: 2 * time.Second})
	a := mustNext(t, g1)
	g2 := mustNew(t, Settings{Clock: c, Checkpoint: cp, MaxWait: 2 * time.Second})
	b := mustNext(t, g2)
	if b <= a {
		t.Fatalf("restart on file: %d <= %d", b, a)
	}
}

func TestObserverQuietOnFastPath(t *testing.T) {
	c := newScriptClock(t0)
	o := &recObserver{}
	g := mustNew(t, Settings{Clock: c, Observer: o})
	for i := 0; i < 4000; i++ {
		mustNext(t, g)
		if i%1000 == 999 {
			c.Advance(time.Millisecond)
		}
	}
	if n := o.calls(); n != 0 {
		t.Errorf("observer called %d times without a rare event", n)
	}
}

func TestNoAllocs(t *testing.T) {
	g := mustNew(t, Settings{Clock: newCounterClock(12), Checkpoint: &memCheckpoint{}, Fence: openFence{}, Observer: nopObserver{}})
	mustNext(t, g)
	if a := testing.AllocsPerRun(10000, func() { g.Next() }); a != 0 {
		t.Errorf("Next allocates %v per call", a)
	}
	ctx := context.Background()
	if a := testing.AllocsPerRun(10000, func() { g.NextContext(ctx) }); a != 0 {
		t.Errorf("NextContext allocates %v per call", a)
	}
	dst := make([]ID, 64)
	if a := testing.AllocsPerRun(1000, func() { g.NextN(dst) }); a != 0 {
		t.Errorf("NextN allocates %v per call", a)
	}
	// The slow path (exhaustion on a frozen... counter clock) does not
	// allocate either.
	g2 := mustNew(t, Settings{Clock: newCounterClock(20)})
	if a := testing.AllocsPerRun(10000, func() { g2.Next() }); a != 0 {
		t.Errorf("Next with exhaustion waits allocates %v per call", a)
	}
}

// TestConcurrent: many goroutines on one generator, with the clock
// stepping back and forth: every ID is unique and each goroutine's IDs
// increase.
func TestConcurrent(t *testing.T) {
	for _, p := range []Policy{PolicyWait, PolicyRefuse, PolicyLogical} {
		t.Run(p.String(), func(t *testing.T) {
			c := newScriptClock(t0)
			g := mustNew(t, Settings{Clock: c, Policy: p, Checkpoint: &memCheckpoint{}, Reserve: 10 * time.Millisecond, MaxLead: 50 * time.Millisecond})
			const workers, calls = 4, 3000
			out := make([][]ID, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dst := make([]ID, 7)
					for i := range calls {
						if w%2 == 0 {
							if id, err := g.Next(); err == nil {
								out[w] = append(out[w], id)
							}
						} else if n, _ := g.NextN(dst); n > 0 {
							out[w] = append(out[w], dst[:n]...)
						}
						if w == 0 && i%100 == 0 {
							c.Step(time.Duration(i%300-100) * 10 * time.Microsecond)
						}
						c.Advance(time.Microsecond)
					}
				}()
			}
			wg.Wait()
			seen := map[ID]int{}
			total := 0
			for w, ids := range out {
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("worker %d: %d <= %d", w, id, ids[i-1])
					}
					if v, dup := seen[id]; dup {
						t.Fatalf("duplicate %d from workers %d and %d", id, v, w)
					}
					seen[id] = w
				}
				total += len(ids)
			}
			if st := g.Stats(); st.Issued != uint64(total) {
				t.Errorf("Issued %d, collected %d", st.Issued, total)
			}
			if total == 0 {
				t.Error("nothing issued")
			}
		})
	}
}

func TestReadyFresh(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, Policy: PolicyRefuse})
	if err := g.Ready(); err != nil {
		t.Errorf("fresh Ready = %v", err)
	}
	mustNext(t, g)
	if err := g.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

func TestStatsIssuedAcrossPaths(t *testing.T) {
	c := newScriptClock(t0)
	g := mustNew(t, Settings{Clock: c, Policy: PolicyLogical})
	want := 0
	dst := make([]ID, 1500)
	for i := range 50 {
		switch i % 3 {
		case 0:
			mustNext(t, g)
			want++
		case 1:
			n, err := g.NextN(dst)
			if err != nil {
				t.Fatal(err)
			}
			want += n
		case 2:
			c.Step(time.Duration(i%5-2) * time.Millisecond)
		}
		if got := g.Stats().Issued; got != uint64(want) {
			t.Fatalf("step %d: Issued %d, want %d", i, got, want)
		}
	}
	if st := g.Stats(); st.LastTick == 0 {
		t.Errorf("LastTick %d", st.LastTick)
	}
}

func ExampleGenerator() {
	g, err := New(Settings{Node: 42})
	if err != nil {
		panic(err)
	}
	id, err := g.Next()
	if err != nil {
		panic(err)
	}
	p := g.Settings().Layout.Decode(id)
	fmt.Println(p.Node, id > 0)
	// Output: 42 true
}

// TestNoSpuriousRewind: with a clock that never goes back, no call is
// ever refused, even when slow-path calls (exhausted ticks) race fast-path
// calls that move the state to a later tick.
func TestNoSpuriousRewind(t *testing.T) {
	c := newAtomicCounterClock(13) // a tick every 8192 readings: ticks run out
	g := mustNew(t, Settings{Clock: c, Policy: PolicyRefuse, MaxWait: time.Hour})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]ID, 3)
			for i := range 20000 {
				var err error
				if i%5 == 0 {
					_, err = g.NextN(dst)
				} else {
					_, err = g.Next()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("monotonic clock, refuse policy: %v", err)
	}
	if st := g.Stats(); st.RewindsRefused != 0 || st.Exhaustions == 0 {
		t.Errorf("stats %+v", st)
	}
}
