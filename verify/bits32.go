package verify

import (
	"math/bits"
	"slices"
	"unsafe"
)

// bits32 is an exact set of uint32 values stored as a roaring bitmap is:
// the high 16 bits select a container of the low 16 bits, which is a
// sorted array while it holds at most arrayMax values, then either sorted
// runs (when few) or a bitmap of 1,024 words. It is built for the Set's
// pattern: values almost always arrive above the maximum, and such an
// append costs an append to the last container, with no allocation per
// value beyond a slice's doubling.
type bits32 struct {
	keys []uint16
	ctrs []*ctr
	last *ctr // the last container, where appends go
}

// ctr is one container. Exactly one representation is in use: bm when
// non-nil, else runs when isRuns (vals holds start, last pairs), else the
// sorted array vals.
type ctr struct {
	vals   []uint16
	bm     []uint64
	isRuns bool
	n      int32 // cardinality
	// first is vals' first backing array, allocated with the container:
	// one ID per tick fills a container's 64 ticks without a reallocation
	// (it would otherwise take four: 8, 16, 32 and 64 values).
	first [firstCap]uint16
}

// newCtr returns a container holding x alone.
func newCtr(x uint16) *ctr {
	c := &ctr{n: 1}
	c.first[0] = x
	c.vals = c.first[:1]
	return c
}

const (
	// arrayMax is the largest array container: beyond it an array would
	// outweigh a bitmap (4,096 values, 8 KiB).
	arrayMax = 4096
	// runsMax is the most runs a run container holds (as big as a bitmap).
	runsMax = 2048
	// firstCap is the array a container starts with: the values of one ID
	// per tick for the 64 ticks a container spans (see Set).
	firstCap = 64
	bmWords  = 1024
)

// max returns the largest value; the set must not be empty.
func (b *bits32) max() uint32 {
	k := len(b.keys) - 1
	return uint32(b.keys[k])<<16 | uint32(b.ctrs[k].max())
}

func (b *bits32) empty() bool { return len(b.keys) == 0 }

// appendMax adds x, which must be above every value in the set.
func (b *bits32) appendMax(x uint32) {
	hi, lo := uint16(x>>16), uint16(x)
	if b.last != nil && b.keys[len(b.keys)-1] == hi {
		b.last.appendMax(lo)
		return
	}
	c := newCtr(lo)
	b.keys = append(b.keys, hi)
	b.ctrs = append(b.ctrs, c)
	b.last = c
}

// appendRun adds xs, ascending and above every value in the set; values
// of the last container's key that fit its array go in one append.
func (b *bits32) appendRun(xs []uint32) {
	for len(xs) > 0 {
		hi := uint16(xs[0] >> 16)
		if b.last == nil || b.keys[len(b.keys)-1] != hi {
			b.appendMax(xs[0])
			xs = xs[1:]
			continue
		}
		i := 1
		for i < len(xs) && uint16(xs[i]>>16) == hi {
			i++
		}
		if c := b.last; c.bm == nil && !c.isRuns && len(c.vals)+i <= arrayMax {
			for _, x := range xs[:i] {
				c.vals = append(c.vals, uint16(x))
			}
			c.n += int32(i)
		} else {
			for _, x := range xs[:i] {
				c.appendMax(uint16(x))
			}
		}
		xs = xs[i:]
	}
}

// find returns the index of container hi, or where it belongs.
func (b *bits32) find(hi uint16) (int, bool) {
	if k := len(b.keys) - 1; k >= 0 && b.keys[k] == hi { // the usual case
		return k, true
	}
	return slices.BinarySearch(b.keys, hi)
}

// contains reports whether x is in the set.
func (b *bits32) contains(x uint32) bool {
	i, ok := b.find(uint16(x >> 16))
	return ok && b.ctrs[i].contains(uint16(x))
}

// add inserts x anywhere and reports whether it was absent.
func (b *bits32) add(x uint32) bool {
	hi, lo := uint16(x>>16), uint16(x)
	i, ok := b.find(hi)
	if !ok {
		b.keys = slices.Insert(b.keys, i, hi)
		b.ctrs = slices.Insert(b.ctrs, i, newCtr(lo))
		b.last = b.ctrs[len(b.ctrs)-1]
		return true
	}
	return b.ctrs[i].add(lo)
}

// bytes returns the memory the set holds, within a few percent: payload
// capacity, keys and pointers, and each container (its header and first
// array, one allocation).
func (b *bits32) bytes() uint64 {
	n := uint64(cap(b.keys))*2 + uint64(cap(b.ctrs))*8 + uint64(len(b.ctrs))*uint64(unsafe.Sizeof(ctr{}))
	for _, c := range b.ctrs {
		if unsafe.SliceData(c.vals) != &c.first[0] { // first is counted with the container
			n += uint64(cap(c.vals)) * 2
		}
		n += uint64(cap(c.bm)) * 8
	}
	return n
}

func (c *ctr) max() uint16 {
	switch {
	case c.bm != nil:
		for i := bmWords - 1; ; i-- {
			if w := c.bm[i]; w != 0 {
				return uint16(i*64 + 63 - bits.LeadingZeros64(w))
			}
		}
	case c.isRuns:
		return c.vals[len(c.vals)-1]
	}
	return c.vals[len(c.vals)-1]
}

// appendMax adds x, above every value in c.
func (c *ctr) appendMax(x uint16) {
	c.n++
	switch {
	case c.bm != nil:
		c.bm[x>>6] |= 1 << (x & 63)
	case c.isRuns:
		if k := len(c.vals) - 1; c.vals[k]+1 == x {
			c.vals[k] = x
			return
		}
		if len(c.vals)/2 >= runsMax {
			c.n--
			c.toBitmap()
			c.appendMax(x)
			return
		}
		c.vals = append(c.vals, x, x)
	default:
		if len(c.vals) < arrayMax {
			c.vals = append(c.vals, x)
			return
		}
		c.n--
		c.compact()
		c.appendMax(x)
	}
}

// compact turns a full array into runs (when they are few) or a bitmap.
func (c *ctr) compact() {
	runs := 1
	for i := 1; i < len(c.vals); i++ {
		if c.vals[i] != c.vals[i-1]+1 {
			runs++
		}
	}
	if runs > runsMax/2 {
		c.toBitmap()
		return
	}
	r := make([]uint16, 0, 2*runs+2)
	for i, v := range c.vals {
		if i > 0 && v == r[len(r)-1]+1 {
			r[len(r)-1] = v
			continue
		}
		r = append(r, v, v)
	}
	c.vals, c.isRuns = r, true
}

// toBitmap turns c into a bitmap container.
func (c *ctr) toBitmap() {
	bm := make([]uint64, bmWords)
	if c.isRuns {
		for i := 0; i < len(c.vals); i += 2 {
			for v := uint32(c.vals[i]); v <= uint32(c.vals[i+1]); v++ {
				bm[v>>6] |= 1 << (v & 63)
			}
		}
	} else {
		for _, v := range c.vals {
			bm[v>>6] |= 1 << (v & 63)
		}
	}
	c.bm, c.vals, c.isRuns = bm, nil, false
}

func (c *ctr) contains(x uint16) bool {
	switch {
	case c.bm != nil:
		return c.bm[x>>6]&(1<<(x&63)) != 0
	case c.isRuns:
		// The first run whose last value is >= x.
		i := runSearch(c.vals, x)
		return i < len(c.vals)/2 && c.vals[2*i] <= x
	}
	_, ok := slices.BinarySearch(c.vals, x)
	return ok
}

// runSearch returns the index of the first run whose last value is >= x.
func runSearch(r []uint16, x uint16) int {
	lo, hi := 0, len(r)/2
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r[2*m+1] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add inserts x anywhere in c and reports whether it was absent.
func (c *ctr) add(x uint16) bool {
	if c.contains(x) {
		return false
	}
	if x > c.max() {
		c.appendMax(x)
		return true
	}
	switch {
	case c.bm != nil:
		c.bm[x>>6] |= 1 << (x & 63)
	case c.isRuns:
		// Inserting into runs is rare (an out-of-order ID): use a bitmap.
		c.toBitmap()
		c.bm[x>>6] |= 1 << (x & 63)
	default:
		if len(c.vals) >= arrayMax {
			c.toBitmap()
			c.bm[x>>6] |= 1 << (x & 63)
			break
		}
		i, _ := slices.BinarySearch(c.vals, x)
		c.vals = slices.Insert(c.vals, i, x)
	}
	c.n++
	return true
}
