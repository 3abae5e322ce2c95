//go:build !linux

package generator

import "time"

// timerSleep has no precise goroutine sleep to offer here: the system
// clock serves the wait with the runtime timer and a yield loop.
func timerSleep(time.Duration) bool { return false }
