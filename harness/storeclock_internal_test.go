package harness

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/lease"
)

// TestLeaseWatchStoreClock: the watch follows the store's grants by the
// store's own clock: a store clock running fast ends a lease early by
// true time, a step ahead ends it at once, a release ends it, and only
// the holder the store granted it to is covered.
func TestLeaseWatchStoreClock(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)
	base := faults.NewVirtual(start, false)
	store := faults.New(base)
	mem := lease.NewMemory(store)
	w := newLeaseWatch(mem, store)
	now := func() int64 { wall, _ := store.Now(); return wall }

	l, err := w.Acquire(ctx, lease.Request{Holder: "pod-a", Range: lease.Range{Min: 1, Max: 1}, TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !w.holds("pod-a", 1, now()) || w.holds("pod-b", 1, now()) || w.holds("pod-a", 2, now()) {
		t.Fatal("fresh lease: wrong holder, worker or expiry")
	}
	// 8% fast: the 3 s lease ends after 3/1.08 = 2.78 s of true time.
	store.Drift(80_000)
	base.Advance(2770 * time.Millisecond)
	if !w.holds("pod-a", 1, now()) {
		t.Fatalf("lease ended early: store offset %v", store.Offset())
	}
	base.Advance(20 * time.Millisecond)
	if w.holds("pod-a", 1, now()) {
		t.Fatalf("lease still held 2.79 s into a 3 s lease on a store 8%% fast (offset %v)", store.Offset())
	}
	// Renewing a lapsed lease fails and changes nothing; a new one is watched.
	if _, err := w.Renew(ctx, l, 0); err == nil {
		t.Fatal("renewed a lapsed lease")
	}
	if l, err = w.Acquire(ctx, lease.Request{Holder: "pod-a", Range: lease.Range{Min: 1, Max: 1}, TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	base.Advance(time.Second)
	if l, err = w.Renew(ctx, l, 0); err != nil || !w.holds("pod-a", 1, now()+int64(2900*time.Millisecond)) {
		t.Fatalf("renewal not followed: %v", err)
	}
	// A step ahead past the expiry ends it at once.
	store.Step(4 * time.Second)
	if w.holds("pod-a", 1, now()) {
		t.Fatal("lease held after the store clock stepped past its end")
	}
	store.Revert()
	if !w.holds("pod-a", 1, now()) {
		t.Fatal("lease not held after the store clock stepped back")
	}
	if err := w.Release(ctx, l, 0); err != nil || w.holds("pod-a", 1, now()) {
		t.Fatalf("released lease still held: %v", err)
	}
}

// TestStoreLinkHangs: a hanging link (or a hanging store) fails its calls
// as unavailable, without reaching the store, until it stops hanging.
func TestStoreLinkHangs(t *testing.T) {
	ctx := context.Background()
	mem := lease.NewMemory(faults.NewVirtual(time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC), false))
	var whole atomic.Bool
	link := &storeLink{Registry: mem, whole: &whole}
	req := lease.Request{Holder: "a", Range: lease.Range{Min: 0, Max: 0}, TTL: time.Second}
	link.hang.Store(true)
	if _, err := link.Acquire(ctx, req); err == nil || !link.hanging() {
		t.Fatalf("hanging link answered: %v", err)
	}
	if ls, _ := mem.List(ctx); len(ls) != 0 {
		t.Fatalf("a hung call reached the store: %v", ls)
	}
	link.hang.Store(false)
	whole.Store(true)
	if _, err := link.Acquire(ctx, req); err == nil {
		t.Fatal("hanging store answered")
	}
	whole.Store(false)
	if _, err := link.Acquire(ctx, req); err != nil || link.hanging() {
		t.Fatalf("link still hangs: %v", err)
	}
}
