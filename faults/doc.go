// Package faults breaks clocks the ways real clocks break, for testing
// Snowflake-style ID generators.
//
// Clock wraps any generator.Clock and injects wall-clock faults: NTP steps,
// freezes, leap-second insertion, leap smears, slews, drift, VM pauses and
// read jitter. Each fault is an exact, deterministic function of the base
// clock's monotonic time, its effect is confirmed by Offset and MonoOffset,
// and Revert removes it. As on real kernels, only a VM pause disturbs the
// monotonic reading.
//
// What Offset (wall minus base wall) and MonoOffset (mono minus base mono)
// read after e of base time since the fault call, for each fault alone:
//
//	fault            Offset during                     Offset after        MonoOffset
//	Step(d)          d at once                         d                   0
//	Freeze(d)        -e (the wall stands still)        as without it       0
//	Leap(at)         0 until the wall reaches at       -1s                 0
//	Smear(d, w)      trunc(d·e/w)                      d (from e = w)      0
//	Slew(d, ppm)     ±min(|d|, trunc(e·ppm/1e6))       d                   0
//	Drift(ppm)       trunc(e·ppm/1e6), unbounded       (no end)            0
//	Pause(d)         -e                                as without it       -e during, -d after
//	Revert()         0                                 0                   0
//
// Specs is the fault vocabulary: every kind, what it acts on (KindsOf is
// the capability list), the interfaces that take it and its parameters
// with their bounds. Fault is the one shape of a fault's parameters, for
// a scenario file, the admin API (its JSON form) and every target alike;
// Build checks parameters against the table, and ApplyTo injects a clock
// fault into a Clock.
//
// Virtual is a base clock whose time moves only when advanced: in auto mode
// sleeping advances it (single-threaded simulation, a day of leap smear in
// milliseconds), in manual mode sleepers block until a test advances time,
// and the test can wait until they are blocked.
//
// Typical use:
//
//	base := faults.NewVirtual(time.Date(2016, 12, 31, 23, 59, 0, 0, time.UTC), true)
//	clk := faults.New(base)
//	clk.Leap(time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC))
//	// hand clk to a generator; the wall repeats 23:59:59 at midnight.
package faults
