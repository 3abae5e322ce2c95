package verify

import (
	"testing"
	"unsafe"
)

// TestIssuerLayout keeps what a call of one Snowflake ID touches in the
// issuer's first four cache lines (see issuer): the fields' offsets, and
// the size class that keeps the object line-aligned.
func TestIssuerLayout(t *testing.T) {
	var is issuer
	end := func(off, size uintptr) uintptr { return off + size }
	last := max(
		end(unsafe.Offsetof(is.maxID), 8),
		end(unsafe.Offsetof(is.succ), unsafe.Sizeof(is.succ)),
		end(unsafe.Offsetof(is.hasCur), 1),
		end(unsafe.Offsetof(is.cur), unsafe.Sizeof(is.cur)),
		end(unsafe.Offsetof(is.set)+unsafe.Offsetof(is.set.pend), unsafe.Sizeof(is.set.pend)),
		end(unsafe.Offsetof(is.set)+unsafe.Offsetof(is.set.top), 8),
	)
	if last > 256 {
		t.Errorf("the per-call fields end at byte %d, past the fourth cache line", last)
	}
	if unsafe.Offsetof(is.set)+unsafe.Offsetof(is.set.npend) >= 256 {
		t.Errorf("npend at %d", unsafe.Offsetof(is.set)+unsafe.Offsetof(is.set.npend))
	}
	// Go's size classes from 512 to 1024 bytes step by 64 or more: an
	// issuer's size rounded up lands on a multiple of 64, so every object
	// of its class starts on a line.
	if sz := unsafe.Sizeof(is); sz < 512 || sz > 1024 {
		t.Errorf("issuer is %d bytes: check its size class is a multiple of 64", sz)
	}
}
