package faults

import (
	"math"
	"math/bits"
	"time"
)

// mulDiv returns a*b/c truncated toward zero, computed exactly in 128 bits.
// a and b may be negative, c must be positive. A quotient beyond the int64
// range saturates at ±math.MaxInt64.
func mulDiv(a, b, c int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(absU(a), absU(b))
	var q uint64
	if hi >= uint64(c) {
		q = math.MaxInt64
	} else {
		q, _ = bits.Div64(hi, lo, uint64(c))
		if q > math.MaxInt64 {
			q = math.MaxInt64
		}
	}
	if neg {
		return -int64(q)
	}
	return int64(q)
}

// absU returns |x| as a uint64 (exact for math.MinInt64 too).
func absU(x int64) uint64 {
	if x < 0 {
		return uint64(-(x + 1)) + 1
	}
	return uint64(x)
}

// satAdd returns a+b saturated to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if a > 0 && b > 0 && s < 0 {
		return math.MaxInt64
	}
	if a < 0 && b < 0 && s >= 0 {
		return math.MinInt64
	}
	return s
}

// satSub returns a-b saturated to the int64 range.
func satSub(a, b int64) int64 {
	s := a - b
	if b < 0 && s < a {
		return math.MaxInt64
	}
	if b > 0 && s > a {
		return math.MinInt64
	}
	return s
}

// unixNano returns t as Unix ns, clamped to the int64 range (years 1678
// to 2262), where time.Time.UnixNano is undefined.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// minTime and maxTime are the instants unixNano represents exactly.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// ppb converts a rate in parts per million to integer parts per billion,
// rounded to nearest and clamped to [lo, hi]. NaN becomes 0 before clamping.
func ppb(ppm float64, lo, hi int64) int64 {
	if math.IsNaN(ppm) {
		ppm = 0
	}
	v := math.Round(ppm * 1000)
	if v < float64(lo) {
		return lo
	}
	if v > float64(hi) {
		return hi
	}
	return int64(v)
}

// billion is one second in nanoseconds and one in parts per billion.
const billion = 1_000_000_000
