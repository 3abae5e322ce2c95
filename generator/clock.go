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
// (Go's time.Time carries the kernel's monotonic reading). Reading it costs
// one time.Now (tens of nanoseconds).
//
// Its Sleep, on Linux, parks the calling goroutine on a kernel timer
// (timerfd) in the runtime's network poller: no thread blocks, nothing
// spins, and the wait ends when the kernel's high-resolution timer fires,
// with no timer slack, so it returns after d by the scheduler's wake-up
// latency (BenchmarkSleepLate reports it against time.Sleep's). Elsewhere,
// or when no timer file can be opened, the runtime timer serves all but
// the last 1.5 ms (time.Sleep may wake up to about 1.1 ms late) and the
// rest is spent yielding the processor in a loop.
func SystemClock() Clock { return systemClock{} }

// monoOrigin anchors the system clock's monotonic readings.
var monoOrigin = time.Now()

// monoNow reads the system clock's monotonic reading alone (ns since
// monoOrigin), as Now's mono.
func monoNow() int64 { return int64(time.Since(monoOrigin)) }

type systemClock struct{}

// Now reads time.Now once.
func (systemClock) Now() (wall, mono int64) {
	t := time.Now()
	return t.UnixNano(), int64(t.Sub(monoOrigin))
}

const (
	// timerLate bounds how late the runtime timer wakes: on Linux the
	// runtime's poller waits in whole milliseconds, a wait under 1 ms
	// rounded up to 1 ms, so time.Sleep(d) returns up to about 1.1 ms
	// after d.
	timerLate = 1500 * time.Microsecond
	// minTimerSleep is the shortest time.Sleep worth taking: below it the
	// wake-up costs more than it saves.
	minTimerSleep = 500 * time.Microsecond
)

// Sleep sleeps on a timer file, or else on the runtime timer and then
// yields; see SystemClock.
func (systemClock) Sleep(d time.Duration) {
	if d <= 0 || timerSleep(d) {
		return
	}
	start := time.Now()
	for {
		left := d - time.Since(start)
		if left <= 0 {
			return
		}
		if left >= timerLate+minTimerSleep {
			time.Sleep(left - timerLate)
			continue
		}
		runtime.Gosched()
	}
}
