package verify

import (
	"math/bits"
	"time"
)

// histSub is log2 of the sub-buckets per power of two: values are kept to
// within 1/64 (1.6%) of their size; values below 64 ns exactly.
const (
	histSub     = 6
	histSubSize = 1 << histSub
	histBuckets = (63-histSub+1)*histSubSize + histSubSize
)

// hist is a streaming histogram of non-negative durations in nanoseconds
// with fixed logarithmic buckets: bounded memory (about 30 KB once it has
// seen a non-zero value, nothing before), exact count and max, and
// quantiles to within 1/64 relative error, rounded up.
type hist struct {
	counts []uint64 // nil until a non-zero value arrives
	zeros  uint64
	n      uint64
	max    int64
}

// histIndex returns the bucket of v > 0.
func histIndex(v int64) int {
	u := uint64(v)
	if u < histSubSize {
		return int(u)
	}
	e := bits.Len64(u) - 1 // u >= 2^e, e >= histSub
	sub := (u >> (e - histSub)) & (histSubSize - 1)
	return (e-histSub+1)*histSubSize + int(sub)
}

// histUpper returns the largest value bucket i holds.
func histUpper(i int) int64 {
	if i < histSubSize {
		return int64(i)
	}
	e := i/histSubSize + histSub - 1
	sub := uint64(i % histSubSize)
	lo := uint64(1)<<e | sub<<(e-histSub)
	return int64(lo + uint64(1)<<(e-histSub) - 1)
}

// add records v, n times; negative values count as zero.
func (h *hist) add(v int64, n uint64) {
	h.n += n
	if v <= 0 {
		h.zeros += n
		return
	}
	if v > h.max {
		h.max = v
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	h.counts[histIndex(v)] += n
}

// quantile returns the smallest bucket bound b such that at least q of the
// values are <= b, capped at the exact max.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) {
		rank++
	}
	rank = max(rank, 1)
	if h.zeros >= rank {
		return 0
	}
	c := h.zeros
	for i, k := range h.counts {
		c += k
		if c >= rank {
			return min(histUpper(i), h.max)
		}
	}
	return h.max
}

// Dist summarises a distribution of durations.
type Dist struct {
	// Count is how many values were recorded.
	Count uint64
	// Max is the largest value, exact.
	Max time.Duration
	// P50 and P99 are quantiles, rounded up to within 1/64 (1.6%) of their
	// value and never above Max.
	P50, P99 time.Duration
}

func (h *hist) dist() Dist {
	return Dist{Count: h.n, Max: time.Duration(h.max), P50: time.Duration(h.quantile(0.50)), P99: time.Duration(h.quantile(0.99))}
}
