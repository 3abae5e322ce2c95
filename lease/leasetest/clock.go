package leasetest

import (
	"sort"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Clock is a manual generator.Clock for tests: time moves only when
// advanced, Sleep blocks until Advance passes its deadline, and Waiters
// reports how many goroutines are blocked, so a test steps time only once
// the code under test waits on it. Safe for concurrent use.
type Clock struct {
	mu struct {
		sync.Mutex
		wall, mono int64
		waiters    []*waiter
	}
}

type waiter struct {
	until int64
	done  chan struct{}
}

// NewClock returns a Clock reading start (wall) and 1s (mono).
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	c.mu.wall, c.mu.mono = start.UnixNano(), int64(time.Second)
	return c
}

// Now returns the current wall (Unix ns) and monotonic (ns) readings.
func (c *Clock) Now() (wall, mono int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.wall, c.mu.mono
}

// Sleep blocks until the clock has been advanced by d.
func (c *Clock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	w := &waiter{until: c.mu.mono + int64(d), done: make(chan struct{})}
	c.mu.waiters = append(c.mu.waiters, w)
	c.mu.Unlock()
	<-w.done
}

// Advance moves both readings forward by d and wakes the sleepers whose
// deadlines passed.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.wall += int64(d)
	c.mu.mono += int64(d)
	kept := c.mu.waiters[:0]
	for _, w := range c.mu.waiters {
		if w.until <= c.mu.mono {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	c.mu.waiters = kept
}

// StepWall moves only the wall reading by d (an NTP step, or the wall
// catching up after a pause that the monotonic clock did not see).
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	c.mu.wall += int64(d)
	c.mu.Unlock()
}

// Waiters returns how many goroutines are blocked in Sleep.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.waiters)
}

// NextDeadline returns how far the earliest sleeper's deadline lies ahead
// of now, and false when nobody sleeps.
func (c *Clock) NextDeadline() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.waiters) == 0 {
		return 0, false
	}
	ws := append([]*waiter(nil), c.mu.waiters...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].until < ws[j].until })
	return time.Duration(ws[0].until - c.mu.mono), true
}

// Offset returns a generator.Clock reading c with its wall shifted by off
// (a node whose clock is off by off); it sleeps on c.
func (c *Clock) Offset(off time.Duration) generator.Clock { return offsetClock{c, off} }

// offsetClock reads a Clock with its wall shifted by off.
type offsetClock struct {
	base *Clock
	off  time.Duration
}

func (c offsetClock) Now() (int64, int64) {
	w, m := c.base.Now()
	return w + int64(c.off), m
}

func (c offsetClock) Sleep(d time.Duration) { c.base.Sleep(d) }
