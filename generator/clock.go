package generator

import (
	"runtime"
	"time"
)

// Clock is the generator's only source of time. Implementations must be
// safe for concurrent use.
//
// Now returns two readings taken together: wall is the wall clock as Unix
// nanoseconds (it goes into IDs and every clock fault acts on it), and mono
// is a monotonic reading in nanoseconds from an arbitrary origin (it only
// bounds waiting; an NTP step or a frozen wall clock does not move it).
//
// Sleep pauses the caller for d of monotonic time. A virtual clock may serve
// it by advancing its own time instead of blocking the process. Sleep must
// return after at most d of real time when d is bounded.
type Clock interface {
	Now() (wall, mono int64)
	Sleep(d time.Duration)
}

// SystemClock returns the process's real clock: time.Now for both readings
// (Go's time.Time carries the kernel's monotonic reading) and time.Sleep.
// Sleeps shorter than a millisecond, which time.Sleep stretches to a
// millisecond or more on Linux, instead yield the processor in a loop until
// d has passed: precise, at the price of up to 1 ms of CPU. Reading the
// clock costs one time.Now (tens of nanoseconds).
func SystemClock() Clock { return systemClock{} }

// monoOrigin anchors the system clock's monotonic readings.
var monoOrigin = time.Now()

type systemClock struct{}

// Now reads time.Now once.
func (systemClock) Now() (wall, mono int64) {
	t := time.Now()
	return t.UnixNano(), int64(t.Sub(monoOrigin))
}

// spinBelow is the longest sleep served by yielding instead of time.Sleep.
const spinBelow = time.Millisecond

// Sleep uses time.Sleep for d >= 1ms and yields in a loop below that.
func (systemClock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= spinBelow {
		time.Sleep(d)
		return
	}
	start := time.Now()
	for time.Since(start) < d {
		runtime.Gosched()
	}
}
