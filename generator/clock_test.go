package generator

import (
	"context"
	"sync"
	"testing"
	"time"
)

// scriptClock is a scripted test clock: time moves only when the test
// moves it or when a caller sleeps (Sleep advances both readings by d and
// returns at once, like a simulation). Safe for concurrent use.
type scriptClock struct {
	mu     sync.Mutex
	wall   int64
	mono   int64
	frozen bool // Sleep advances mono only: the wall clock stands still
	sleeps int
	slept  time.Duration
}

var _ Clock = (*scriptClock)(nil)

func newScriptClock(start time.Time) *scriptClock {
	return &scriptClock{wall: start.UnixNano(), mono: 1e9}
}

func (c *scriptClock) Now() (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall, c.mono
}

func (c *scriptClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps++
	c.slept += d
	c.mono += int64(d)
	if !c.frozen {
		c.wall += int64(d)
	}
}

// Step moves the wall clock by d (negative: back); mono does not move.
func (c *scriptClock) Step(d time.Duration) {
	c.mu.Lock()
	c.wall += int64(d)
	c.mu.Unlock()
}

// Advance moves both readings forward by d.
func (c *scriptClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.wall += int64(d)
	c.mono += int64(d)
	c.mu.Unlock()
}

func (c *scriptClock) Freeze(on bool) {
	c.mu.Lock()
	c.frozen = on
	c.mu.Unlock()
}

func (c *scriptClock) Slept() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps, c.slept
}

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

func (nopObserver) Rewind(context.Context, RewindEvent)                    {}
func (nopObserver) Wait(context.Context, WaitReason, int64, time.Duration) {}
func (nopObserver) Exhausted(context.Context)                              {}
func (nopObserver) Refused(context.Context, error)                         {}
func (nopObserver) Lead(time.Duration)                                     {}
func (nopObserver) Checkpoint(int64, error)                                {}

// recObserver records every Observer call. Safe for concurrent use.
type recObserver struct {
	mu          sync.Mutex
	rewinds     []RewindEvent
	waits       []WaitReason
	waited      []time.Duration
	exhausted   int
	refused     []error
	leads       []time.Duration
	checkpoints []int64
	cpErrs      []error
}

func (o *recObserver) Rewind(_ context.Context, e RewindEvent) {
	o.mu.Lock()
	o.rewinds = append(o.rewinds, e)
	o.mu.Unlock()
}

func (o *recObserver) Wait(_ context.Context, r WaitReason, _ int64, d time.Duration) {
	o.mu.Lock()
	o.waits = append(o.waits, r)
	o.waited = append(o.waited, d)
	o.mu.Unlock()
}

func (o *recObserver) Exhausted(context.Context) {
	o.mu.Lock()
	o.exhausted++
	o.mu.Unlock()
}

func (o *recObserver) Refused(_ context.Context, err error) {
	o.mu.Lock()
	o.refused = append(o.refused, err)
	o.mu.Unlock()
}

func (o *recObserver) Lead(d time.Duration) {
	o.mu.Lock()
	o.leads = append(o.leads, d)
	o.mu.Unlock()
}

func (o *recObserver) Checkpoint(markMs int64, err error) {
	o.mu.Lock()
	o.checkpoints = append(o.checkpoints, markMs)
	o.cpErrs = append(o.cpErrs, err)
	o.mu.Unlock()
}

// calls returns how many Observer calls were recorded.
func (o *recObserver) calls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.rewinds) + len(o.waits) + o.exhausted + len(o.refused) + len(o.leads) + len(o.checkpoints)
}

func TestSystemClock(t *testing.T) {
	c := SystemClock()
	w1, m1 := c.Now()
	for _, d := range []time.Duration{-time.Second, 0, 1, 200 * time.Microsecond, 2 * time.Millisecond} {
		_, before := c.Now()
		c.Sleep(d)
		_, after := c.Now()
		if time.Duration(after-before) < d {
			t.Errorf("Sleep(%v) returned after %v", d, time.Duration(after-before))
		}
	}
	w2, m2 := c.Now()
	if m2 <= m1 || w2 < w1-int64(time.Second) {
		t.Errorf("readings went backwards: wall %d -> %d, mono %d -> %d", w1, w2, m1, m2)
	}
}
