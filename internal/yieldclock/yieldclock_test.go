package yieldclock

import (
	"testing"
	"time"
)

// TestSleep checks that Sleep lasts at least d on both of its paths.
func TestSleep(t *testing.T) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 900 * time.Microsecond, 2 * time.Millisecond} {
		start := time.Now()
		Sleep(d)
		if got := time.Since(start); got < d {
			t.Errorf("Sleep(%v) returned after %v", d, got)
		}
	}
}
