package generator

import (
	"runtime"
	"sync/atomic"
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
// Its Sleep returns typically well under a microsecond after d without
// spinning through the wait: the runtime timer (time.Sleep, which on Linux
// wakes up to about 1.1 ms late) serves all but the last 1.5 ms; on Linux
// a thread sleep (nanosleep, which blocks the calling OS thread) then
// serves the rest up to just before the end, aiming short by the 90th
// percentile of the lateness it has observed (65-90 µs measured on this
// project's VM, of which the kernel's default timer slack is 50 µs); only
// that last stretch is spent yielding the processor in a loop. Elsewhere
// the last 1.5 ms is yielded, at the price of up to that much CPU per
// sleep.
func SystemClock() Clock { return systemClock{} }

// monoOrigin anchors the system clock's monotonic readings.
var monoOrigin = time.Now()

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
	// Bounds of the thread sleep's lateness estimate, and its step.
	minThreadLate  = 10 * time.Microsecond
	maxThreadLate  = 300 * time.Microsecond
	threadLateStep = 2 * time.Microsecond
	// minThreadSleep is the shortest thread sleep worth taking.
	minThreadSleep = 20 * time.Microsecond
)

// threadLate estimates the 90th percentile of how late a thread sleep
// wakes (ns), within its bounds: each sleep later than the estimate moves
// it up 9 steps, each other sleep down one, so it settles where 1 sleep in
// 10 is later.
var threadLate atomic.Int64

func init() { threadLate.Store(int64(100 * time.Microsecond)) }

// Sleep sleeps on the runtime timer, then the thread, then yields, each
// until the next one can finish the wait in time; see SystemClock.
func (systemClock) Sleep(d time.Duration) {
	if d <= 0 {
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
		late := time.Duration(threadLate.Load())
		if haveThreadSleep && left >= late+minThreadSleep {
			ask := left - late
			t := time.Now()
			threadSleep(ask)
			observeThreadLate(time.Since(t) - ask)
			continue
		}
		runtime.Gosched()
	}
}

// observeThreadLate folds one thread sleep's lateness into threadLate.
func observeThreadLate(late time.Duration) {
	est := time.Duration(threadLate.Load())
	if late > est {
		est += 9 * threadLateStep
	} else {
		est -= threadLateStep
	}
	threadLate.Store(int64(min(max(est, minThreadLate), maxThreadLate)))
}
