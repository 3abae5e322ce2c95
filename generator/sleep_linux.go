package generator

import (
	"syscall"
	"time"
)

// haveThreadSleep: this platform has a sleep that blocks the calling
// thread with microsecond precision.
const haveThreadSleep = true

// threadSleep blocks the calling OS thread for about d (nanosleep). A
// signal may end it early; the caller measures what it slept.
func threadSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
