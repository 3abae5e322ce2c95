// Package yieldclock is a generator.Clock that waits the way the
// generator's system clock did before issue 15: time.Sleep from 1 ms up,
// and below that a loop of runtime.Gosched until the time has passed, so
// that a call waiting for the next tick keeps its processor busy. It is
// the same-run reference for the CPU a wait costs (the generator's
// BenchmarkNextNRealClock, loadbench's batch phase), not a clock to run.
package yieldclock

import (
	"runtime"
	"time"
)

// Clock reads the system clock and sleeps by yielding. The zero value is
// ready to use.
type Clock struct{}

// origin anchors the monotonic readings.
var origin = time.Now()

// Now reads time.Now once: wall as Unix ns, mono as ns since origin.
func (Clock) Now() (wall, mono int64) {
	t := time.Now()
	return t.UnixNano(), int64(t.Sub(origin))
}

// Sleep returns after d: time.Sleep when d is 1 ms or more, otherwise
// runtime.Gosched in a loop until d has passed.
func (Clock) Sleep(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
		runtime.Gosched()
	}
}
