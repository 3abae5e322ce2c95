package yieldclock

import (
	"testing"
	"time"
)

// TestSleep checks that Sleep lasts at least d on both of its paths, and
// that Now's readings advance together.
func TestSleep(t *testing.T) {
	var c Clock
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 900 * time.Microsecond, 2 * time.Millisecond} {
		w0, m0 := c.Now()
		start := time.Now()
		c.Sleep(d)
		if got := time.Since(start); got < d {
			t.Errorf("Sleep(%v) returned after %v", d, got)
		}
		w1, m1 := c.Now()
		if m1-m0 < int64(d) {
			t.Errorf("Sleep(%v): mono advanced %d ns", d, m1-m0)
		}
		if w1 < w0 {
			t.Errorf("Sleep(%v): wall went from %d to %d", d, w0, w1)
		}
	}
}
