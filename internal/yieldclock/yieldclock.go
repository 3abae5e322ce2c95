// Package yieldclock is the sleep the generator's system clock replaced:
// time.Sleep from 1 ms up, and below that a loop of runtime.Gosched until
// the time has passed, so that a call waiting for the next tick keeps its
// processor busy. A clock that reads the system clock and sleeps with
// Sleep is the same-run reference for the CPU a wait costs (the
// generator's BenchmarkNextNRealClock, bench/cmd/loadbench's batch phase),
// not a clock to run.
package yieldclock

import (
	"runtime"
	"time"
)

// Sleep returns after d: time.Sleep when d is 1 ms or more, otherwise
// runtime.Gosched in a loop until d has passed.
func Sleep(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
		runtime.Gosched()
	}
}
