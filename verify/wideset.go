package verify

import (
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// The exact sets of the wide kinds. Each remembers, per distinct ID, the
// issuer that first issued it and the span (see span) of that call. The
// entries live densely in insertion order; an open-addressing index maps
// hashes to them: one 64-bit word per slot holding the hash's high 32 bits
// and the entry number plus one (0: empty), linear probing, at most 3/4
// full, so a fresh ID costs one probe sequence in one array and an append.
// A lookup compares the full ID (or the string's bytes) before it reports
// a match, so a hash collision costs a probe, never a false duplicate.
// Memory is the entry (24 bytes) plus 11 to 22 bytes of index per ID;
// growth doubles the index and appends to the entries, so nothing is
// allocated per ID.

// index is the open-addressing part of a set whose entries live
// elsewhere, numbered from 0.
type index struct {
	slots []uint64
	n     int // occupied slots
}

const minIndex = 1024

// maxEntries bounds a set's distinct IDs (entry numbers plus one are
// 32-bit).
const maxEntries = math.MaxUint32 - 1

func (x *index) init(slots int) {
	x.slots, x.n = make([]uint64, slots), 0
}

// probe returns the slot holding an entry for which eq is true, or the
// empty slot where one with hash h belongs.
func (x *index) probe(h uint64, eq func(e uint32) bool) (slot int, found bool) {
	mask := len(x.slots) - 1
	tag := h >> 32
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch w := x.slots[i]; {
		case w == 0:
			return i, false
		case w>>32 == tag && eq(uint32(w)-1):
			return i, true
		}
	}
}

// entry returns the entry number in a full slot.
func (x *index) entry(slot int) uint32 { return uint32(x.slots[slot]) - 1 }

// put fills the empty slot with entry e of hash h.
func (x *index) put(slot int, h uint64, e uint32) {
	x.slots[slot] = h>>32<<32 | uint64(e+1)
	x.n++
}

// full reports whether one more entry would pass 3/4 load.
func (x *index) full() bool { return 4*(x.n+1) > 3*len(x.slots) }

// rebuild makes the index twice as large and re-inserts n entries whose
// hashes hash(e) gives.
func (x *index) rebuild(n int, hash func(e uint32) uint64) {
	x.init(max(2*len(x.slots), minIndex))
	mask := len(x.slots) - 1
	for e := range uint32(n) {
		h := hash(e)
		i := int(h) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.put(i, h, e)
	}
}

func (x *index) bytes() uint64 { return uint64(len(x.slots)) * 8 }

// first records a distinct ID's first issue.
type first struct {
	who  IssuerID
	span uint32
}

// set128 is the exact set of 128-bit IDs.
type set128 struct {
	idx     index
	keys    []ID128
	firsts  []first
	s0, s1  uint64 // hash seeds
	started bool
}

// hash mixes an ID with the set's seeds (a folded 128-bit multiply), so
// crafted IDs cannot be aimed at one probe chain.
func (s *set128) hash(x ID128) uint64 {
	hi, lo := bits.Mul64(x.Hi^s.s0, x.Lo^s.s1)
	return hi ^ lo
}

// add records x as issued by who during span, and reports whether it was
// fresh; when not, it returns its first issue.
func (s *set128) add(x ID128, who IssuerID, span uint32) (first, bool) {
	if !s.started {
		s.s0, s.s1, s.started = rand.Uint64()|1, rand.Uint64()|1, true
		s.idx.init(minIndex)
	}
	if s.idx.full() {
		s.idx.rebuild(len(s.keys), func(e uint32) uint64 { return s.hash(s.keys[e]) })
	}
	h := s.hash(x)
	slot, found := s.idx.probe(h, func(e uint32) bool { return s.keys[e] == x })
	if found {
		return s.firsts[s.idx.entry(slot)], false
	}
	if len(s.keys) >= maxEntries {
		panic("verify: more than 2^32-1 distinct 128-bit IDs")
	}
	s.idx.put(slot, h, uint32(len(s.keys)))
	s.keys = append(s.keys, x)
	s.firsts = append(s.firsts, first{who: who, span: span})
	return first{}, true
}

func (s *set128) len() int { return len(s.keys) }

func (s *set128) bytes() uint64 {
	return s.idx.bytes() + uint64(cap(s.keys))*16 + uint64(cap(s.firsts))*uint64(unsafe.Sizeof(first{}))
}

// stringSet is the exact set of string IDs; their bytes are copied into
// an arena of chunks, so the caller's strings may point into a reused
// buffer.
type stringSet struct {
	idx     index
	refs    []strRef
	firsts  []first
	chunks  [][]byte
	seed    maphash.Seed
	started bool
}

// strRef locates a string in the arena.
type strRef struct {
	chunk, off, n uint32
}

// chunkSize is the arena's chunk size; a longer string gets a chunk of
// its own.
const chunkSize = 1 << 20

func (s *stringSet) str(r strRef) string {
	b := s.chunks[r.chunk][r.off : r.off+r.n]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// add records x as issued by who during span, and reports whether it was
// fresh; when not, it returns its first issue.
func (s *stringSet) add(x string, who IssuerID, span uint32) (first, bool) {
	if !s.started {
		s.seed, s.started = maphash.MakeSeed(), true
		s.idx.init(minIndex)
	}
	if s.idx.full() {
		s.idx.rebuild(len(s.refs), func(e uint32) uint64 { return maphash.String(s.seed, s.str(s.refs[e])) })
	}
	h := maphash.String(s.seed, x)
	slot, found := s.idx.probe(h, func(e uint32) bool { return s.str(s.refs[e]) == x })
	if found {
		return s.firsts[s.idx.entry(slot)], false
	}
	if len(s.refs) >= maxEntries || len(x) > math.MaxUint32 {
		panic("verify: more than 2^32-1 distinct string IDs, or one longer than 4 GiB")
	}
	s.idx.put(slot, h, uint32(len(s.refs)))
	s.refs = append(s.refs, s.store(x))
	s.firsts = append(s.firsts, first{who: who, span: span})
	return first{}, true
}

// store copies x into the arena.
func (s *stringSet) store(x string) strRef {
	k := len(s.chunks) - 1
	if k < 0 || len(s.chunks[k])+len(x) > cap(s.chunks[k]) {
		s.chunks = append(s.chunks, make([]byte, 0, max(chunkSize, len(x))))
		k++
	}
	c := s.chunks[k]
	r := strRef{chunk: uint32(k), off: uint32(len(c)), n: uint32(len(x))}
	s.chunks[k] = append(c, x...)
	return r
}

func (s *stringSet) len() int { return len(s.refs) }

func (s *stringSet) bytes() uint64 {
	b := s.idx.bytes() + uint64(cap(s.refs))*uint64(unsafe.Sizeof(strRef{})) + uint64(cap(s.firsts))*uint64(unsafe.Sizeof(first{}))
	for _, c := range s.chunks {
		b += uint64(cap(c))
	}
	return b
}
