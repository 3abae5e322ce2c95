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

// hist is a streaming histogram of positive durations in nanoseconds with
// fixed logarithmic buckets: bounded memory (about 30 KB once it has seen
// a value, nothing before), exact count and max, and quantiles to within
// 1/64 relative error, rounded up. It records positive values only; the
// caller knows the total count, and the values not recorded are zeros
// (see dist), so recording a zero costs nothing.
type hist struct {
	counts []uint64 // nil until a value arrives
	pos    uint64   // values recorded
	max    int64
	lo, hi int // bucket range holding values, when pos > 0
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

// add records v > 0, n times.
func (h *hist) add(v int64, n uint64) {
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	i := histIndex(v)
	if h.pos == 0 {
		h.lo, h.hi, h.max = i, i, v
	} else {
		h.lo, h.hi, h.max = min(h.lo, i), max(h.hi, i), max(h.max, v)
	}
	h.pos += n
	h.counts[i] += n
}

// merge adds o's values to h, in time proportional to o's bucket range.
func (h *hist) merge(o *hist) {
	if o.pos == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	if h.pos == 0 {
		h.lo, h.hi, h.max = o.lo, o.hi, o.max
	} else {
		h.lo, h.hi, h.max = min(h.lo, o.lo), max(h.hi, o.hi), max(h.max, o.max)
	}
	h.pos += o.pos
	for i := o.lo; i <= o.hi; i++ {
		h.counts[i] += o.counts[i]
	}
}

// reset empties h, keeping its buckets' memory; it costs time in
// proportion to the bucket range used.
func (h *hist) reset() {
	if h.pos > 0 {
		clear(h.counts[h.lo : h.hi+1])
	}
	h.pos, h.max = 0, 0
}

// clone returns an independent copy of h.
func (h *hist) clone() hist {
	c := *h
	if h.counts != nil {
		c.counts = append([]uint64(nil), h.counts...)
	}
	return c
}

// quantile returns, over total values of which those not recorded are
// zeros, the smallest bucket bound b such that at least q of the values
// are <= b, capped at the exact max.
func (h *hist) quantile(q float64, total uint64) int64 {
	total = max(total, h.pos)
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if float64(rank) < q*float64(total) {
		rank++
	}
	rank = max(rank, 1)
	c := total - h.pos
	if c >= rank {
		return 0
	}
	for i := h.lo; i <= h.hi; i++ {
		c += h.counts[i]
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

// dist summarises total values of which h recorded the positive ones.
func (h *hist) dist(total uint64) Dist {
	return Dist{Count: max(total, h.pos), Max: time.Duration(h.max),
		P50: time.Duration(h.quantile(0.50, total)), P99: time.Duration(h.quantile(0.99, total))}
}
