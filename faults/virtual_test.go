package faults_test

import (
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// wait is how long a test waits, on the real clock, for goroutines that are
// certain to get there; it bounds a broken test, it is not a threshold.
const wait = 10 * time.Second

func TestVirtualNow(t *testing.T) {
	v := faults.NewVirtual(t0, false)
	if w, m := v.Now(); w != t0.UnixNano() || m != 0 {
		t.Fatalf("start: (%d, %d), want (%d, 0)", w, m, t0.UnixNano())
	}
	v.Advance(1500 * ms)
	v.Advance(0)
	v.Advance(-s) // ignored: virtual time never goes back
	if w, m := v.Now(); w != t0.Add(1500*ms).UnixNano() || m != int64(1500*ms) {
		t.Fatalf("after 1.5s: (%d, %d)", w, m)
	}
	if v.Elapsed() != 1500*ms || v.Auto() {
		t.Fatalf("Elapsed %v Auto %v", v.Elapsed(), v.Auto())
	}
	if w, _ := faults.NewVirtual(time.Time{}, false).Now(); w != 0 {
		t.Fatalf("zero start reads %d, want the Unix epoch", w)
	}
}

func TestVirtualAutoSleep(t *testing.T) {
	v := faults.NewVirtual(t0, true)
	v.Sleep(2 * s)
	v.Sleep(0)
	v.Sleep(-s)
	v.Sleep(ms)
	if v.Elapsed() != 2*s+ms || v.Waiters() != 0 || !v.Auto() {
		t.Fatalf("Elapsed %v Waiters %d", v.Elapsed(), v.Waiters())
	}
}

func TestVirtualWaiterOrder(t *testing.T) {
	v := faults.NewVirtual(t0, false)
	durs := []time.Duration{30 * ms, 10 * ms, 20 * ms}
	woke := make([]chan struct{}, len(durs))
	for i, d := range durs {
		woke[i] = make(chan struct{})
		go func() { v.Sleep(d); close(woke[i]) }()
	}
	if !v.BlockUntilWaiters(3, wait) {
		t.Fatalf("only %d waiters", v.Waiters())
	}
	awake := func(i int) bool {
		select {
		case <-woke[i]:
			return true
		case <-time.After(wait):
			return false
		}
	}
	asleep := func(i int) bool {
		select {
		case <-woke[i]:
			return false
		default:
			return true
		}
	}
	v.Advance(15 * ms) // passes only the 10ms deadline
	if v.Waiters() != 2 || !awake(1) || !asleep(0) || !asleep(2) {
		t.Fatalf("after 15ms: Waiters %d", v.Waiters())
	}
	if d, ok := v.AdvanceToNext(); !ok || d != 5*ms { // to 20ms
		t.Fatalf("AdvanceToNext = %v, %v; want 5ms", d, ok)
	}
	if v.Waiters() != 1 || !awake(2) || !asleep(0) {
		t.Fatalf("after 20ms: Waiters %d", v.Waiters())
	}
	v.Advance(10*ms - 1)
	if v.Waiters() != 1 || !asleep(0) {
		t.Fatal("woke 1ns before its deadline")
	}
	v.Advance(1)
	if v.Waiters() != 0 || !awake(0) {
		t.Fatalf("at 30ms: Waiters %d", v.Waiters())
	}
	if _, ok := v.AdvanceToNext(); ok {
		t.Fatal("AdvanceToNext with no sleepers moved time")
	}
}

func TestVirtualSleeperSeesDeadline(t *testing.T) {
	v := faults.NewVirtual(t0, false)
	got := make(chan int64)
	go func() {
		v.Sleep(5 * s)
		_, m := v.Now()
		got <- m
	}()
	if !v.BlockUntilWaiters(1, wait) {
		t.Fatal("sleeper never blocked")
	}
	v.Advance(7 * s)
	if m := <-got; m != int64(7*s) {
		t.Fatalf("woken sleeper read mono %v, want 7s", time.Duration(m))
	}
}

func TestBlockUntilWaitersTimeout(t *testing.T) {
	v := faults.NewVirtual(t0, false)
	if v.BlockUntilWaiters(1, 0) {
		t.Fatal("no sleepers, yet BlockUntilWaiters(1, 0) = true")
	}
	if v.BlockUntilWaiters(1, time.Millisecond) {
		t.Fatal("no sleepers, yet BlockUntilWaiters(1, 1ms) = true")
	}
	if !v.BlockUntilWaiters(0, 0) {
		t.Fatal("BlockUntilWaiters(0, 0) = false")
	}
	// A sleeper that arrives while we wait is seen.
	go v.Sleep(s)
	if !v.BlockUntilWaiters(1, wait) {
		t.Fatal("late sleeper not seen")
	}
	v.Advance(s)
}
