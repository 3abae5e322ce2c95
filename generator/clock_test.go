package generator

import (
	"sync"
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
