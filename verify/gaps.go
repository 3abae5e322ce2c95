package verify

import (
	"math"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// buckets is the set of gap buckets (reference time / GapResolution) in
// which some call succeeded: a compressed bitmap plus the run of
// consecutive buckets being extended, so that steady successes cost no
// bitmap work. Buckets arriving out of order are still recorded exactly.
type buckets struct {
	bm     *roaring64.Bitmap
	lo, hi int64 // pending run [lo, hi], when has
	has    bool
}

// bucketKey maps a signed bucket to an order-preserving unsigned key.
func bucketKey(k int64) uint64 { return uint64(k) ^ 1<<63 }

// add records a success in bucket k; the usual case, k in or just past
// the pending run, is inlined.
func (b *buckets) add(k int64) {
	if b.has && k >= b.lo && k <= b.hi {
		return
	}
	b.addSlow(k)
}

func (b *buckets) addSlow(k int64) {
	if b.has {
		if k >= b.lo && k <= b.hi {
			return
		}
		if k == b.hi+1 && k > b.hi {
			b.hi = k
			return
		}
		b.flush()
	}
	b.lo, b.hi, b.has = k, k, true
}

// flush moves the pending run into the bitmap.
func (b *buckets) flush() {
	if !b.has {
		return
	}
	if b.bm == nil {
		b.bm = roaring64.New()
	}
	b.bm.AddRange(bucketKey(b.lo), bucketKey(b.hi)) // end exclusive, so add hi alone
	b.bm.Add(bucketKey(b.hi))
	b.has = false
}

// union returns the buckets in which any of bs had a success, in time
// proportional to their bitmaps.
func union(bs []*buckets) buckets {
	u := buckets{bm: roaring64.New()}
	for _, b := range bs {
		b.flush()
		if b.bm != nil {
			u.bm.Or(b.bm)
		}
	}
	return u
}

func (b *buckets) bytes() uint64 {
	if b.bm == nil {
		return 0
	}
	return b.bm.GetSizeInBytes()
}

// longestGap returns the longest stretch of buckets without a success in
// [from, to] (reference ns), times the bucket width res: from the start
// to the first success, between successes, and from the last success to
// the end.
func (b *buckets) longestGap(from, to, res int64) time.Duration {
	if from > to {
		return 0
	}
	b.flush()
	bf, bt := floorDiv(from, res), floorDiv(to, res)
	prev, gap := bf, int64(0)
	if b.bm != nil {
		it := b.bm.Iterator()
		it.AdvanceIfNeeded(bucketKey(bf))
		for it.HasNext() {
			k := int64(it.Next() ^ 1<<63)
			if k > bt {
				break
			}
			gap = max(gap, k-prev)
			prev = k
		}
	}
	gap = max(gap, bt-prev)
	if gap > math.MaxInt64/res {
		return math.MaxInt64
	}
	return time.Duration(gap * res)
}
