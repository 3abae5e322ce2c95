//go:build !linux

package generator

import "time"

// haveThreadSleep: no precise thread sleep here; the system clock yields
// through the last stretch of a wait instead.
const haveThreadSleep = false

// threadSleep is never called where haveThreadSleep is false.
func threadSleep(time.Duration) {}
