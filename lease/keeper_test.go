package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

const ttl = 9 * time.Second // renew every 3s; validity 9s*(1-0.1)-50ms = 8.05s

type rig struct {
	t      *testing.T
	clock  *leasetest.Clock
	mem    *lease.Memory
	k      *lease.Keeper
	events []lease.Event
}

func newRig(t *testing.T, mutate func(*lease.KeeperConfig)) *rig {
	t.Helper()
	r := &rig{t: t, clock: leasetest.NewClock(epoch)}
	r.mem = lease.NewMemory(r.clock)
	cfg := lease.KeeperConfig{
		Registry: r.mem,
		Holder:   "node-a",
		Range:    lease.Range{Min: 0, Max: 1},
		TTL:      ttl,
		Clock:    r.clock,
		OnChange: func(e lease.Event) { r.events = append(r.events, e) },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	k, err := lease.NewKeeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.k = k
	return r
}

func (r *rig) acquire() lease.Lease {
	r.t.Helper()
	l, err := r.k.Acquire(context.Background())
	if err != nil {
		r.t.Fatalf("Acquire: %v", err)
	}
	return l
}

func (r *rig) mono() int64 { _, m := r.clock.Now(); return m }

func (r *rig) check() error { return r.k.Check(r.mono()) }

func (r *rig) tick() time.Duration { return r.k.Tick(context.Background()) }

func reason(err error) (lease.FenceReason, bool) {
	var fe *lease.FenceError
	if !errors.As(err, &fe) || !errors.Is(err, generator.ErrFenced) {
		return 0, false
	}
	return fe.Reason, true
}

func wantReason(t *testing.T, err error, want lease.FenceReason) {
	t.Helper()
	got, ok := reason(err)
	if !ok || got != want {
		t.Fatalf("Check = %v, want a *FenceError %q wrapping generator.ErrFenced", err, want)
	}
}

func TestKeeperRenewsEveryThirdOfTTL(t *testing.T) {
	r := newRig(t, nil)
	wantReason(t, r.check(), lease.ReasonNotAcquired)
	l := r.acquire()
	if err := r.check(); err != nil {
		t.Fatalf("Check after acquire: %v", err)
	}
	if w := r.tick(); w != ttl/3 {
		t.Errorf("Tick right after acquiring asks to wait %v, want %v", w, ttl/3)
	}
	for i := 1; i <= 5; i++ {
		r.clock.Advance(ttl / 3)
		if w := r.tick(); w != ttl/3 {
			t.Errorf("renewal %d: next in %v, want %v", i, w, ttl/3)
		}
		if err := r.check(); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	st := r.k.Stats()
	if st.RenewOK != 5 || st.State != lease.StateHeld || st.Token != l.Token {
		t.Errorf("stats %+v: want 5 renewals, held, token %d", st, l.Token)
	}
}

func TestKeeperFencesAfterFailedRenewals(t *testing.T) {
	r := newRig(t, nil) // MaxFailures 3, retry every TTL/10
	l := r.acquire()
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl / 3)
	for i := 1; i <= 2; i++ {
		if w := r.tick(); w != ttl/10 {
			t.Errorf("failure %d: retry in %v, want %v", i, w, ttl/10)
		}
		if err := r.check(); err != nil {
			t.Fatalf("fence closed after %d failures (max 3): %v", i, err)
		}
		if s := r.k.State(); s != lease.StateRenewing {
			t.Errorf("state %v, want renewing", s)
		}
		r.clock.Advance(ttl / 10)
	}
	r.tick()
	err := r.check()
	wantReason(t, err, lease.ReasonRenewFailures)
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Errorf("fence error %v does not carry the store error", err)
	}
	if s := r.k.State(); s != lease.StateLost {
		t.Errorf("state %v, want lost", s)
	}
	// The store returns before expiry: the same lease reopens the fence.
	r.mem.SetAvailable(true)
	r.clock.Advance(ttl / 10)
	r.tick()
	if err := r.check(); err != nil {
		t.Fatalf("after the store returned: %v", err)
	}
	if got, _ := r.k.Lease(); got.Token != l.Token {
		t.Errorf("token %d, want the same lease %d", got.Token, l.Token)
	}
	var states []lease.State
	for _, e := range r.events {
		states = append(states, e.State)
	}
	want := []lease.State{lease.StateHeld, lease.StateRenewing, lease.StateLost, lease.StateHeld}
	if len(states) != len(want) {
		t.Fatalf("events %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("events %v, want %v", states, want)
		}
	}
}

func TestKeeperFencesAtMarginBeforeStoreExpiry(t *testing.T) {
	r := newRig(t, func(c *lease.KeeperConfig) { c.MaxFailures = 1000 })
	l := r.acquire()
	validity := time.Duration(float64(ttl)*(1-lease.DefaultMarginRate)) - lease.DefaultMarginAbs
	r.mem.SetAvailable(false)
	r.clock.Advance(validity - 1)
	r.tick()
	if err := r.check(); err != nil {
		t.Fatalf("fence closed before its validity ran out: %v", err)
	}
	r.clock.Advance(1)
	wantReason(t, r.check(), lease.ReasonMarginReached)
	wall, _ := r.clock.Now()
	if !time.Unix(0, wall).Before(l.LeasedUntil) {
		t.Fatalf("fence closed at %v, not before the store's expiry %v", time.Unix(0, wall), l.LeasedUntil)
	}
	if gap := l.LeasedUntil.Sub(time.Unix(0, wall)); gap < time.Duration(float64(ttl)*lease.DefaultMarginRate) {
		t.Errorf("safety gap %v smaller than the rate margin", gap)
	}
	if s := r.k.State(); s != lease.StateLost {
		t.Errorf("state %v, want lost", s)
	}
}

// TestKeeperReacquiresAnotherWorker: the store expires the lease during an
// outage and another node takes the worker ID; when the store returns the
// Keeper gets a different worker ID and the generator must be rebuilt.
func TestKeeperReacquiresAnotherWorker(t *testing.T) {
	r := newRig(t, nil)
	first := r.acquire()
	if err := r.k.Save(context.Background(), first.LeasedUntil.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl + time.Second)
	r.tick()
	r.mem.SetAvailable(true)
	thief, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "node-b", Range: lease.Range{Min: 0, Max: 1}, TTL: time.Hour, Prefer: []int64{first.WorkerID}})
	if err != nil || thief.WorkerID != first.WorkerID {
		t.Fatalf("thief got %v, %v", thief, err)
	}
	r.clock.Advance(ttl / 10)
	r.tick()
	cur, ok := r.k.Lease()
	if !ok || cur.WorkerID == first.WorkerID {
		t.Fatalf("Keeper holds %v (%v), want another worker than %d", cur, ok, first.WorkerID)
	}
	wantReason(t, r.check(), lease.ReasonChanged)
	if _, err := r.k.Load(); err == nil {
		t.Errorf("Load for the old binding succeeded")
	}
	if err := r.k.Save(context.Background(), 1); err == nil {
		t.Errorf("Save for the old binding succeeded")
	}
	last := r.events[len(r.events)-1]
	if !last.Rebind || last.Lease.WorkerID != cur.WorkerID {
		t.Errorf("last event %+v, want Rebind on the new lease", last)
	}
	l, err := r.k.Rebind()
	if err != nil || l.WorkerID != cur.WorkerID {
		t.Fatalf("Rebind = %v, %v", l, err)
	}
	if err := r.check(); err != nil {
		t.Fatalf("after Rebind: %v", err)
	}
	if mark, err := r.k.Load(); err != nil || mark != 0 {
		t.Errorf("Load on a never-used worker = %d, %v; want 0", mark, err)
	}
	if st := r.k.Stats(); st.RenewLost != 1 || st.Acquisitions != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestKeeperReacquiresSameWorker: an outage longer than the TTL loses the
// lease, nobody takes the worker ID, and the Keeper gets it back under a
// new token. After Rebind the generator's last mark still guards the new
// generator on the same worker ID.
func TestKeeperReacquiresSameWorker(t *testing.T) {
	r := newRig(t, nil)
	first := r.acquire()
	wall, _ := r.clock.Now()
	mark := wall/1e6 + int64(2*ttl/time.Millisecond) // reserved far ahead, never renewed into the store
	if err := r.k.Save(context.Background(), mark); err != nil {
		t.Fatal(err)
	}
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl + time.Second)
	r.tick()
	r.mem.SetAvailable(true)
	r.clock.Advance(ttl / 10)
	r.tick()
	cur, ok := r.k.Lease()
	if !ok || cur.WorkerID != first.WorkerID || cur.Token == first.Token {
		t.Fatalf("Keeper holds %v (%v), want worker %d under a new token", cur, ok, first.WorkerID)
	}
	wantReason(t, r.check(), lease.ReasonChanged)
	if last := r.events[len(r.events)-1]; !last.Rebind {
		t.Errorf("last event %+v, want Rebind", last)
	}
	if _, err := r.k.Rebind(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.k.Load(); err != nil || got != mark {
		t.Errorf("Load after rebinding the same worker = %d, %v; want the old mark %d", got, err, mark)
	}
}

func TestKeeperHandoffGuard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
		skew    time.Duration
		want    int64
	}{
		{"guard", false, 20 * time.Millisecond, 5020},
		{"guard-no-skew", false, 0, 5000},
		{"disabled", true, 20 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(c *lease.KeeperConfig) { c.Range = lease.Range{Min: 4, Max: 4} })
			r.acquire()
			if err := r.k.Save(context.Background(), 4000); err != nil {
				t.Fatal(err)
			}
			r.clock.Advance(ttl / 3)
			r.tick() // the renewal writes 4000
			if err := r.k.Save(context.Background(), 5000); err != nil {
				t.Fatal(err)
			}
			if err := r.k.Release(context.Background()); err != nil { // writes 5000
				t.Fatal(err)
			}
			wantReason(t, r.check(), lease.ReasonReleased)
			next, err := lease.NewKeeper(lease.KeeperConfig{
				Registry: r.mem, Holder: "node-b", Range: lease.Range{Min: 4, Max: 4}, TTL: ttl, Clock: r.clock,
				SkewBudget: tc.skew, DisableHandoffGuard: tc.disable,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := next.Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			mark, err := next.Load()
			if err != nil || mark != tc.want {
				t.Errorf("Load = %d, %v; want %d", mark, err, tc.want)
			}
		})
	}
}

func TestKeeperHandoffWaitStat(t *testing.T) {
	r := newRig(t, func(c *lease.KeeperConfig) { c.Range = lease.Range{Min: 4, Max: 4}; c.SkewBudget = time.Second })
	wall, _ := r.clock.Now()
	// The previous holder's clock ran 2s ahead of ours.
	prev, _ := r.mem.Acquire(context.Background(), lease.Request{Holder: "old", Range: lease.Range{Min: 4, Max: 4}, TTL: time.Second})
	if err := r.mem.Release(context.Background(), prev, wall/1e6+2000); err != nil {
		t.Fatal(err)
	}
	r.acquire()
	mark, err := r.k.Load()
	if err != nil || mark != wall/1e6+3000 {
		t.Fatalf("Load = %d, %v", mark, err)
	}
	if st := r.k.Stats(); st.HandoffWaits != 1 || st.HandoffWait != 3*time.Second {
		t.Errorf("handoff stats %d %v, want 1 and 3s", st.HandoffWaits, st.HandoffWait)
	}
}

// TestKeeperPause models a VM pause: the monotonic clock did not see the
// pause, and the wall clock jumps ahead on resume. The first clock reading
// after resume closes the fence; a fresh renewal decides.
func TestKeeperPause(t *testing.T) {
	t.Run("shorter-than-ttl", func(t *testing.T) {
		r := newRig(t, nil)
		l := r.acquire()
		gclock := r.k.Clock()
		r.clock.StepWall(time.Second) // beyond the threshold (0.475s), within the TTL
		_, mono := gclock.Now()
		wantReason(t, r.k.Check(mono), lease.ReasonClockJump)
		if w := r.tick(); w != ttl/3 {
			t.Errorf("re-validation: next in %v", w)
		}
		if err := r.check(); err != nil {
			t.Fatalf("after re-validation: %v", err)
		}
		if cur, _ := r.k.Lease(); cur.Token != l.Token {
			t.Errorf("token changed %d -> %d", l.Token, cur.Token)
		}
		if st := r.k.Stats(); st.ClockJumps != 1 {
			t.Errorf("clock jumps %d, want 1", st.ClockJumps)
		}
		// A jump below the threshold costs nothing.
		r.clock.StepWall(100 * time.Millisecond)
		if _, mono := gclock.Now(); r.k.Check(mono) != nil {
			t.Errorf("small step closed the fence: %v", r.k.Check(mono))
		}
	})
	t.Run("longer-than-ttl", func(t *testing.T) {
		r := newRig(t, nil)
		first := r.acquire()
		r.clock.StepWall(2 * ttl) // the store expired the lease meanwhile
		thief, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "node-b", Range: lease.Range{Min: 0, Max: 1}, TTL: time.Hour, Prefer: []int64{first.WorkerID}})
		if err != nil || thief.WorkerID != first.WorkerID {
			t.Fatalf("thief: %v %v", thief, err)
		}
		_, mono := r.k.Clock().Now()
		if r.k.Check(mono) == nil {
			t.Fatal("fence open after a pause longer than the TTL")
		}
		r.tick()
		wantReason(t, r.check(), lease.ReasonChanged)
		if cur, _ := r.k.Lease(); cur.WorkerID == first.WorkerID {
			t.Errorf("Keeper still on the stolen worker %d", cur.WorkerID)
		}
	})
}

func TestKeeperRunLoop(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := r.k.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the loop to sleep", func() bool { return r.clock.Waiters() == 1 })
	for i := 1; i <= 3; i++ {
		r.clock.Advance(ttl / 3)
		waitUntil(t, "a renewal", func() bool { return r.k.Stats().RenewOK == uint64(i) && r.clock.Waiters() == 1 })
	}
	if err := r.k.Save(context.Background(), 777); err != nil {
		t.Fatal(err)
	}
	if err := r.k.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantReason(t, r.check(), lease.ReasonReleased)
	if s := r.k.State(); s != lease.StateReleased {
		t.Errorf("state %v", s)
	}
	ls, _ := r.mem.List(context.Background())
	if len(ls) != 1 || ls[0].WorkerID != l.WorkerID || ls[0].LastIssuedMs != 777 {
		t.Errorf("store after release: %+v", ls)
	}
	if w := r.tick(); w >= 0 {
		t.Errorf("Tick after Release = %v, want negative", w)
	}
	r.clock.Advance(ttl) // frees the orphaned sleeper
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKeeperAllTaken(t *testing.T) {
	r := newRig(t, func(c *lease.KeeperConfig) { c.Range = lease.Range{Min: 7, Max: 7} })
	if _, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "other", Range: lease.Range{Min: 7, Max: 7}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_, err := r.k.Acquire(context.Background())
	var ate *lease.AllTakenError
	if !errors.As(err, &ate) || len(ate.Holders) != 1 || ate.Holders[0].Holder != "other" {
		t.Fatalf("Acquire = %v, want an *AllTakenError naming other", err)
	}
	wantReason(t, r.check(), lease.ReasonNotAcquired)
}

func TestNewKeeperConfig(t *testing.T) {
	mem := lease.NewMemory(nil)
	for _, cfg := range []lease.KeeperConfig{
		{},
		{Registry: mem, TTL: 100 * time.Millisecond}, // the 50ms margin leaves no room
		{Registry: mem, MarginRate: 0.6},
		{Registry: mem, Range: lease.Range{Min: 5, Max: 2}},
		{Registry: mem, SkewBudget: -1},
		{Registry: mem, PeerClockMaxSkew: lease.MaxPeerClockSkew + 1},
	} {
		if _, err := lease.NewKeeper(cfg); !errors.Is(err, lease.ErrInvalidConfig) {
			t.Errorf("NewKeeper(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	k, err := lease.NewKeeper(lease.KeeperConfig{Registry: mem})
	if err != nil {
		t.Fatal(err)
	}
	c := k.Config()
	if c.TTL != lease.DefaultTTL || c.Range != lease.NodeRange(10) || c.Holder == "" || c.MaxFailures != lease.DefaultMaxFailures ||
		c.PeerClockMaxSkew != lease.DefaultPeerClockMaxSkew {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestDefaultHolder(t *testing.T) {
	t.Setenv("POD_NAME", "pod-7")
	t.Setenv("HOSTNAME", "host-1")
	if h := lease.DefaultHolder(); h != "pod-7" {
		t.Errorf("DefaultHolder = %q, want the pod name", h)
	}
	t.Setenv("POD_NAME", "")
	if h := lease.DefaultHolder(); h != "host-1" {
		t.Errorf("DefaultHolder = %q, want $HOSTNAME", h)
	}
}

func BenchmarkKeeperCheck(b *testing.B) {
	c := leasetest.NewClock(epoch)
	k, err := lease.NewKeeper(lease.KeeperConfig{Registry: lease.NewMemory(c), Holder: "bench", Clock: c})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Acquire(context.Background()); err != nil {
		b.Fatal(err)
	}
	_, mono := c.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if k.Check(mono) != nil {
				b.Fatal("fenced")
			}
		}
	})
}

// TestKeeperTryAcquire makes one attempt: an unreachable store fails it at
// once (nothing sleeps on the clock), and a later attempt succeeds.
func TestKeeperTryAcquire(t *testing.T) {
	r := newRig(t, nil)
	r.mem.SetAvailable(false)
	if _, err := r.k.TryAcquire(context.Background()); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire with the store down = %v, want ErrUnavailable", err)
	}
	if n := r.clock.Waiters(); n != 0 {
		t.Fatalf("%d sleepers", n)
	}
	wantReason(t, r.check(), lease.ReasonNotAcquired)
	r.mem.SetAvailable(true)
	l, err := r.k.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.check(); err != nil {
		t.Fatalf("after TryAcquire: %v", err)
	}
	if again, err := r.k.TryAcquire(context.Background()); err != nil || again.Token != l.Token {
		t.Fatalf("second TryAcquire = %v, %v; want the held lease", again, err)
	}
	if st := r.k.Stats(); st.Acquisitions != 1 || st.AcquireErrors != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestKeeperOpenUntil follows a lease through renewals, failed renewals,
// an outage that loses it, a rebind and the release, and checks at every
// step that the word a generator took when it was built (OpenUntil) never
// vouches for a reading that Check would refuse: the fast path skips Check
// below the word.
func TestKeeperOpenUntil(t *testing.T) {
	r := newRig(t, nil)
	if w := r.k.OpenUntil(); w != nil {
		t.Fatalf("a word before any lease: %d", w.Load())
	}
	vouch := func(step string, w *atomic.Int64) {
		t.Helper()
		m := r.mono()
		for _, x := range []int64{m, m + int64(ttl/10), w.Load() - 1} {
			if x >= m && x < w.Load() {
				if err := r.k.Check(x); err != nil {
					t.Errorf("%s: the word (%d) vouches for reading %d, which Check refuses: %v", step, w.Load(), x, err)
				}
			}
		}
	}
	r.acquire()
	w := r.k.OpenUntil()
	if w == nil || w.Load() <= r.mono() {
		t.Fatalf("after Acquire: word %v, want the validity end ahead of %d", w, r.mono())
	}
	vouch("acquired", w)
	for i := range 4 {
		r.clock.Advance(ttl / 3)
		r.tick()
		vouch(fmt.Sprintf("renewal %d", i), w)
	}
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl / 3)
	for i := range 3 { // MaxFailures 3, a retry every TTL/10
		r.tick()
		vouch(fmt.Sprintf("failed renewal %d", i), w)
		r.clock.Advance(ttl / 10)
	}
	if w.Load() != math.MinInt64 {
		t.Errorf("fenced after failed renewals, the word is %d, want closed", w.Load())
	}
	r.mem.SetAvailable(true)
	r.clock.Advance(ttl / 10)
	r.tick()
	vouch("store back", w)
	if w.Load() <= r.mono() {
		t.Errorf("the same lease renewed, the word %d did not reopen past %d", w.Load(), r.mono())
	}
	// An outage past the TTL: the lease is lost, another is acquired.
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl + time.Second)
	r.tick()
	r.mem.SetAvailable(true)
	if _, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "node-b", Range: lease.Range{Min: 0, Max: 1}, TTL: time.Hour, Prefer: []int64{0, 1}}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(ttl / 10)
	r.tick()
	vouch("lost and reacquired", w)
	if w.Load() != math.MinInt64 {
		t.Errorf("the old lease's word is %d after its loss, want closed", w.Load())
	}
	wantReason(t, r.check(), lease.ReasonChanged)
	if _, err := r.k.Rebind(); err != nil {
		t.Fatal(err)
	}
	w2 := r.k.OpenUntil()
	if w2 == nil || w2 == w || w2.Load() <= r.mono() {
		t.Fatalf("after Rebind: word %v, want the new lease's, ahead of %d", w2, r.mono())
	}
	vouch("rebound (old generator's word)", w)
	vouch("rebound", w2)
	if err := r.k.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	vouch("released", w2)
	if w2.Load() != math.MinInt64 {
		t.Errorf("after Release the word is %d, want closed", w2.Load())
	}
}
