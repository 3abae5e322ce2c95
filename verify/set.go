package verify

import (
	"math"
	"unsafe"

	"github.com/snowchaos/snowchaos/generator"
)

// Set is an exact, streaming set of IDs: Add never reports a fresh ID as
// a duplicate or a duplicate as fresh, for any 64-bit value, including
// IDs from a different layout than the Set's.
//
// An ID above every ID added so far (the usual case: IDs grow) is known
// fresh at once and waits in a small buffer inside the Set, so the common
// Add touches one cache line; the buffer is drained into the bitmaps below
// every pendCap IDs and before any other lookup.
//
// Internally an ID's bits are reordered, a bijection, to (node, high
// sequence bits, time, low 10 sequence bits), so that the IDs of one node
// lie close together whether it issues one ID per tick (consecutive ticks
// share a 16-bit container) or thousands (each tick fills runs), and the
// keys are stored in compressed bitmaps laid out as roaring bitmaps are
// (bits32), one 32-bit bitmap per node, high sequence bits and span of
// time. A small direct-mapped table remembers the bitmap each node last
// used and how far it has got; a key above that point (the usual case: a
// node's IDs grow) is appended without a lookup.
//
// Costs: about 3 bytes per ID when each node issues one ID per tick (many
// nodes interleaved); at a node's sequence limit, under half a byte per ID
// once the burst lasts 16 ticks and far under one bit per ID after 64;
// tens of nanoseconds per Add; see the package benchmarks. A Set is not
// safe for concurrent use.
type Set struct {
	// top is the largest ID added (MinInt64 when none); pend holds the last
	// npend IDs added, each above every ID added before it, not yet in
	// the bitmaps; n counts the IDs in the bitmaps.
	top   generator.ID
	pend  [pendCap]generator.ID
	npend uint8
	n     uint64

	// permute is false when the layout's fields do not cover 63 bits; the
	// key is then the ID itself (still exact, only less compact).
	permute bool
	// Field positions in the ID: sequence at 0, node at seqBits, time at
	// seqNode; the sequence splits into low seqLo bits and the rest.
	seqBits, seqNode, seqLo uint
	seqMask, nodeMsk, loMsk uint64
	// Positions in the key: low sequence at 0, time at seqLo, high
	// sequence at hiPos, node at nodePos.
	hiPos, nodePos uint
	// Slot selection: x = hi >> slotShift is (node, high sequence) when the
	// time bits reach into hi; slot = (x>>rowBits + (x&rowMask)*61) & mask.
	slotShift, rowBits uint
	rowMask            uint32

	slots []slot
	dir   map[uint32]*bits32
}

// slot caches the bitmap one node (one value of hi) is writing to.
type slot struct {
	bm  *bits32 // nil: empty slot
	max int64   // largest low half in bm; -1 when empty
	hi  uint32  // high half of the keys this slot serves
}

const (
	// pendCap is how many fresh IDs wait in the Set before they are keyed:
	// seven, so that top and pend fill a cache line with what precedes
	// them in the Verifier's issuer.
	pendCap = 7
	// minSlots and maxSlots bound the direct-mapped table; it grows by
	// four each time two nodes collide in it, so a Set that only ever sees
	// one node stays small.
	minSlots = 4
	maxSlots = 1024
	// maxSeqLo is how many low sequence bits sit below the time field in
	// the key: a 16-bit container holds 64 ticks of 1,024 sequence
	// numbers, so one ID per tick fills it 64 deep, and a saturated node
	// fills 4 rows (for 12 sequence bits) completely in 64 ticks.
	maxSeqLo = 10
)

// NewSet returns an empty Set keyed for the layout l (the zero Layout means
// generator.DefaultLayout()). A layout whose fields do not sum to 63 bits
// still gives an exact Set, keyed by the raw ID.
func NewSet(l generator.Layout) *Set {
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	s := &Set{}
	s.init(l)
	return s
}

// init makes s an empty Set keyed for l (not zero).
func (s *Set) init(l generator.Layout) {
	s.top = math.MinInt64
	s.dir, s.slots = make(map[uint32]*bits32), make([]slot, minSlots)
	if l.TimeBits+l.NodeBits+l.SeqBits == 63 && l.TimeBits <= 63 && l.NodeBits <= 63 && l.SeqBits <= 63 {
		s.permute = true
		s.seqBits = l.SeqBits
		s.seqNode = l.SeqBits + l.NodeBits
		s.seqLo = min(l.SeqBits, maxSeqLo)
		s.seqMask = 1<<l.SeqBits - 1
		s.nodeMsk = 1<<l.NodeBits - 1
		s.loMsk = 1<<s.seqLo - 1
		s.hiPos = s.seqLo + l.TimeBits
		s.nodePos = l.TimeBits + l.SeqBits
		if s.hiPos >= 32 {
			s.slotShift = s.hiPos - 32
			s.rowBits = l.SeqBits - s.seqLo
			s.rowMask = 1<<s.rowBits - 1
		}
	}
	for i := range s.slots {
		s.slots[i].max = -1
	}
}

// key maps an ID to its storage key, a bijection on 64-bit values: the
// sign bit stays, and the low 63 bits are reordered from (time, node,
// seqHi, seqLo) to (node, seqHi, time, seqLo).
func (s *Set) key(id generator.ID) uint64 {
	u := uint64(id)
	if !s.permute {
		return u
	}
	sign := u & (1 << 63)
	v := u &^ (1 << 63)
	tick := v >> s.seqNode
	node := (v >> s.seqBits) & s.nodeMsk
	seq := v & s.seqMask
	return sign | node<<s.nodePos | (seq>>s.seqLo)<<s.hiPos | tick<<s.seqLo | seq&s.loMsk
}

// slotOf returns the table slot for the bitmap keyed hi: a function of hi
// alone, spreading nodes (and their sequence rows) across the table.
func (s *Set) slotOf(hi uint32) *slot {
	x := hi >> s.slotShift
	return &s.slots[int(x>>s.rowBits+(x&s.rowMask)*61)&(len(s.slots)-1)]
}

// Add inserts id and reports whether it was absent (fresh); false means id
// was added before: a duplicate.
func (s *Set) Add(id generator.ID) (fresh bool) {
	if s.tryAppend(id) {
		return true
	}
	return s.addSlow(id)
}

// tryAppend adds id if it is above everything added and the pending
// buffer has room, and reports whether it did: the common Add, inlined.
func (s *Set) tryAppend(id generator.ID) bool {
	if id > s.top && s.npend < pendCap {
		s.pend[s.npend] = id
		s.npend++
		s.top = id
		return true
	}
	return false
}

func (s *Set) addSlow(id generator.ID) bool {
	s.drain()
	if id > s.top || s.n == 0 {
		s.pend[0], s.npend = id, 1
		s.top = id
		return true
	}
	if s.add(id) {
		s.n++
		return true
	}
	return false
}

// drain keys the pending IDs into the bitmaps. They are fresh (each was
// above everything before it), and consecutive ones usually share a
// bitmap, which is then looked up once and appended to in one run.
func (s *Set) drain() {
	var sl *slot
	var run [pendCap]uint32 // keys' low halves above sl's maximum, ascending
	nr := 0
	for _, id := range s.pend[:s.npend] {
		k := s.key(id)
		hi, lo := uint32(k>>32), uint32(k)
		if sl == nil || sl.hi != hi {
			if nr > 0 {
				sl.bm.appendRun(run[:nr])
				nr = 0
			}
			if sl = s.slotOf(hi); sl.bm == nil || sl.hi != hi {
				sl = s.load(hi)
			}
		}
		if int64(lo) > sl.max {
			sl.max = int64(lo)
			run[nr] = lo
			nr++
			continue
		}
		if nr > 0 {
			sl.bm.appendRun(run[:nr])
			nr = 0
		}
		sl.bm.add(lo)
	}
	if nr > 0 {
		sl.bm.appendRun(run[:nr])
	}
	s.n += uint64(s.npend)
	s.npend = 0
}

// add inserts id into the bitmaps and reports whether it was absent.
func (s *Set) add(id generator.ID) bool {
	k := s.key(id)
	hi, lo := uint32(k>>32), uint32(k)
	sl := s.slotOf(hi)
	if sl.bm == nil || sl.hi != hi {
		sl = s.load(hi)
	}
	if int64(lo) > sl.max {
		// Above everything this bitmap holds: fresh without looking.
		sl.max = int64(lo)
		sl.bm.appendMax(lo)
		return true
	}
	return sl.bm.add(lo)
}

// Contains reports whether id is in the set. It may move pending IDs into
// the bitmaps, so it is no more concurrency-safe than Add.
func (s *Set) Contains(id generator.ID) bool {
	if id > s.top || s.Len() == 0 {
		return false // top is MinInt64 when empty: the second test is for id MinInt64
	}
	s.drain()
	k := s.key(id)
	hi, lo := uint32(k>>32), uint32(k)
	sl := s.slotOf(hi)
	if sl.bm != nil && sl.hi == hi {
		return int64(lo) <= sl.max && sl.bm.contains(lo)
	}
	bm := s.dir[hi]
	return bm != nil && bm.contains(lo)
}

// Len returns the number of distinct IDs added.
func (s *Set) Len() uint64 { return s.n + uint64(s.npend) }

// load points a slot at the bitmap for hi, evicting what it held, and
// returns it. When the evicted slot belonged to another node the table
// grows (up to maxSlots), so interleaved nodes soon stop evicting each
// other.
func (s *Set) load(hi uint32) *slot {
	sl := s.slotOf(hi)
	if sl.bm != nil && sl.hi>>s.slotShift != hi>>s.slotShift && len(s.slots) < maxSlots {
		s.grow()
		sl = s.slotOf(hi)
	}
	bm := s.dir[hi]
	if bm == nil {
		bm = &bits32{}
		s.dir[hi] = bm
	}
	sl.bm, sl.hi, sl.max = bm, hi, -1
	if !bm.empty() {
		sl.max = int64(bm.max())
	}
	return sl
}

// grow replaces the table with one four times the size; slots refill
// lazily.
func (s *Set) grow() {
	s.slots = make([]slot, min(len(s.slots)*4, maxSlots))
	for i := range s.slots {
		s.slots[i].max = -1
	}
}

// bitmapOverhead is a bitmap's header plus its directory map entry.
const bitmapOverhead = 48 + 16

// Bytes estimates the heap memory the set holds: bitmap payloads plus the
// bookkeeping around them. It walks every bitmap, so it costs time
// proportional to the set's size; call it for reports, not per ID.
func (s *Set) Bytes() uint64 {
	b := uint64(unsafe.Sizeof(*s)) + uint64(len(s.slots))*uint64(unsafe.Sizeof(slot{}))
	for _, bm := range s.dir {
		b += bitmapOverhead + bm.bytes()
	}
	return b
}
