package verify

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/snowchaos/snowchaos/generator"
)

// wideModel is the dumb reference for the wide kinds: a map from the ID's
// text to its first issue, per-stream last IDs and per-issuer maxima.
type wideModel struct {
	ordered bool
	first   map[string]refFirst
	dups    int
	pairs   map[[2]IssuerID]uint64
	details []wideDup
	order   int
	restart int
	last    map[uint64]ID128
	maxByIs map[IssuerID]ID128
}

type wideDup struct {
	id     string
	first  refFirst
	second IssuerID
}

// observe feeds one call; keys are the IDs' texts, vals their 128-bit
// values (nil for strings).
func (m *wideModel) observe(specs []testIssuer, o Observation, keys []string, vals []ID128) {
	me := specs[o.Issuer]
	var floor ID128
	hasFloor := false
	for i, s := range specs {
		if s.worker == me.worker && s.inc < me.inc {
			if mx, ok := m.maxByIs[IssuerID(i)]; ok && (!hasFloor || floor.Compare(mx) < 0) {
				floor, hasFloor = mx, true
			}
		}
	}
	for j, k := range keys {
		if m.ordered {
			x := vals[j]
			if o.Stream != 0 {
				if last, ok := m.last[o.Stream]; ok && x.Compare(last) <= 0 {
					m.order++
				}
				m.last[o.Stream] = x
			}
			if hasFloor && x.Compare(floor) <= 0 {
				m.restart++
			}
		}
		if f, ok := m.first[k]; ok {
			m.dups++
			m.pairs[[2]IssuerID{f.is, o.Issuer}]++
			m.details = append(m.details, wideDup{id: k, first: f, second: o.Issuer})
			continue
		}
		m.first[k] = refFirst{is: o.Issuer, start: o.RefStart, end: o.RefEnd}
	}
	if m.ordered {
		for _, x := range vals {
			if mx, ok := m.maxByIs[o.Issuer]; !ok || mx.Compare(x) < 0 {
				m.maxByIs[o.Issuer] = x
			}
		}
	}
}

func TestWideAgainstReferenceModel(t *testing.T) {
	for _, k := range []Kind{KindUUIDv7, KindULID, KindUUIDv4, KindUUID, KindString} {
		for seed := uint64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprint(k, "/", seed), func(t *testing.T) { compareWide(t, k, seed) })
		}
	}
}

// compareWide feeds a random run of kind k, with clones, restarts, clock
// rewinds (time-ordered IDs repeat) and a small pool of random IDs (which
// repeat), to a Verifier and to the model, and compares every figure.
func compareWide(t *testing.T, k Kind, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 3))
	specs := []testIssuer{{"a", 0, 1}, {"b", 0, 2}, {"a-clone", 0, 1}, {"a", 1, 1}, {"b", 1, 2}}
	v := New(Config{Kind: k, MaxDetails: 1 << 20})
	for _, s := range specs {
		v.Issuer(s.name, s.inc, s.worker)
	}
	m := wideModel{ordered: k.Ordered(), first: map[string]refFirst{}, pairs: map[[2]IssuerID]uint64{}, last: map[uint64]ID128{}, maxByIs: map[IssuerID]ID128{}}
	clock := make([]uint64, len(specs)) // each issuer's clock, Unix ms
	for i := range clock {
		clock[i] = 1_700_000_000_000 + r.Uint64N(30)
	}
	now := int64(1000)
	for range 3000 {
		now += r.Int64N(3)
		i := r.IntN(len(specs))
		if r.IntN(12) == 0 {
			clock[i] -= r.Uint64N(20) // a rewind
		}
		clock[i] += r.Uint64N(2)
		n := 1 + r.IntN(4)
		var vals []ID128
		var keys []string
		for j := range n {
			var x ID128
			switch {
			case k.Timed():
				// Time-ordered: ms, then a counter from a small range,
				// then the node's worker: a rewind repeats IDs; clones
				// (same worker) collide.
				x = ID128{Hi: clock[i]<<16 | uint64(j), Lo: uint64(specs[i].worker)}
			default:
				x = ID128{Hi: r.Uint64N(40), Lo: r.Uint64N(40)}
			}
			vals = append(vals, x)
			switch k {
			case KindULID:
				keys = append(keys, x.ULID())
			case KindString:
				keys = append(keys, fmt.Sprintf("id-%d-%d", x.Hi, x.Lo))
			default:
				keys = append(keys, x.UUID())
			}
		}
		stream := uint64(i + 1)
		if r.IntN(4) == 0 {
			stream = 0
		}
		start := epochNs + now*ms
		o := Observation{Issuer: IssuerID(i), Stream: stream, RefStart: start, RefEnd: start + r.Int64N(int64(time.Millisecond))}
		var f Found
		if k == KindString {
			// The verifier copies what it keeps: hand it strings in a
			// buffer that is overwritten afterwards.
			buf := []byte(strings.Join(keys, ""))
			views := make([]string, len(keys))
			off := 0
			for j, key := range keys {
				views[j] = unsafe.String(&buf[off], len(key))
				off += len(key)
			}
			f = v.ObserveStrings(o, views)
			clear(buf)
		} else {
			f = v.ObserveWide(o, vals)
		}
		before := m.dups
		m.observe(specs, o, keys, vals)
		if f.Duplicates != m.dups-before {
			t.Fatalf("call found %d duplicates, model %d", f.Duplicates, m.dups-before)
		}
	}
	res := v.Result()
	if res.Kind != k || res.Ordered != k.Ordered() || res.Timed != k.Timed() {
		t.Fatalf("result kind %v ordered %v timed %v", res.Kind, res.Ordered, res.Timed)
	}
	if int(res.Duplicates) != m.dups || int(res.OrderViolations) != m.order || int(res.RestartViolations) != m.restart {
		t.Fatalf("dups %d/%d order %d/%d restart %d/%d", res.Duplicates, m.dups, res.OrderViolations, m.order, res.RestartViolations, m.restart)
	}
	if m.dups == 0 || k.Ordered() && (m.order == 0 || m.restart == 0) {
		t.Fatalf("the run should find something: dups %d order %d restart %d", m.dups, m.order, m.restart)
	}
	if int(res.Unique) != len(m.first) {
		t.Fatalf("unique %d, model %d", res.Unique, len(m.first))
	}
	ref := func(i IssuerID) IssuerRef { s := specs[i]; return IssuerRef{s.name, s.inc, s.worker} }
	got := map[[2]IssuerRef]uint64{}
	for _, p := range res.DuplicatePairs {
		got[[2]IssuerRef{p.First, p.Second}] = p.Count
	}
	for key, n := range m.pairs {
		if got[[2]IssuerRef{ref(key[0]), ref(key[1])}] != n {
			t.Fatalf("pair %v: %d, model %d", key, got[[2]IssuerRef{ref(key[0]), ref(key[1])}], n)
		}
	}
	if len(res.DuplicateDetails) != len(m.details) {
		t.Fatalf("details %d, model %d", len(res.DuplicateDetails), len(m.details))
	}
	for i, d := range res.DuplicateDetails {
		w := m.details[i]
		if d.ID.String() != w.id || d.ID.Kind != k || d.First != ref(w.first.is) || d.Second != ref(w.second) {
			t.Fatalf("detail %d: %+v, model %+v", i, d, w)
		}
		if d.FirstRefStart > w.first.start || d.FirstRefEnd < w.first.end || d.FirstRefEnd-d.FirstRefStart > int64(11*time.Millisecond) {
			t.Fatalf("detail %d: bracket [%d, %d] misses the first call [%d, %d] or exceeds the resolution", i, d.FirstRefStart, d.FirstRefEnd, w.first.start, w.first.end)
		}
	}
	for i, is := range res.Issuers {
		mx, ok := m.maxByIs[IssuerID(i)]
		if k.Ordered() && ok && is.MaxID != (Value{Kind: k, Bits: mx}) || !k.Ordered() && !is.MaxID.IsZero() {
			t.Fatalf("issuer %d max %v, model %v", i, is.MaxID, mx)
		}
	}
}

func TestWideLeadLag(t *testing.T) {
	for _, k := range []Kind{KindUUIDv7, KindULID} {
		v := New(Config{Kind: k})
		a := v.Issuer("js", 0, 0)
		ref := int64(1_700_000_000_000) * int64(time.Millisecond)
		// In step, then 250 ms ahead, then 40 ms behind.
		for i, off := range []int64{0, 250, -40} {
			msT := uint64(ref/int64(time.Millisecond)) + uint64(off)
			v.ObserveWide(Observation{Issuer: a, Stream: 1, RefStart: ref + int64(i), RefEnd: ref + int64(i) + 100}, []ID128{{Hi: msT<<16 | uint64(i)}})
		}
		r := v.Result()
		if r.Lead.Max != 250*time.Millisecond-101 || r.Lag.Max != 39*time.Millisecond+2 || r.Lead.Count != 3 {
			t.Fatalf("%s: lead %+v lag %+v", k, r.Lead, r.Lag)
		}
		if r.OrderViolations != 1 { // the step back
			t.Fatalf("%s: order %d", k, r.OrderViolations)
		}
	}
	// Unordered kinds have no time: no lead, lag or order.
	v := New(Config{Kind: KindUUIDv4})
	a := v.Issuer("x", 0, 0)
	v.ObserveWide(Observation{Issuer: a, Stream: 1}, []ID128{{Hi: 9 << 16}, {Hi: 1}})
	if r := v.Result(); r.Lead.Max != 0 || r.OrderViolations != 0 || r.Streams != 0 || r.Ordered {
		t.Fatalf("uuidv4: %+v", r)
	}
}

// TestSet128Collisions forces every ID onto one probe chain (zero seeds
// and a zero high half make every hash 0): lookups must still be exact.
func TestSet128Collisions(t *testing.T) {
	var s set128
	s.started = true
	s.idx.init(minIndex)
	seen := map[ID128]first{}
	r := rand.New(rand.NewPCG(4, 4))
	for i := range 3000 {
		x := ID128{Lo: r.Uint64N(2000)}
		if s.hash(x) != 0 {
			t.Fatal("the test needs colliding hashes")
		}
		f, fresh := s.add(x, IssuerID(i%7), uint32(i))
		w, dup := seen[x]
		if fresh == dup || dup && f != w {
			t.Fatalf("#%d %v: fresh %v first %+v, map %v %+v", i, x, fresh, f, dup, w)
		}
		if fresh {
			seen[x] = first{who: IssuerID(i % 7), span: uint32(i)}
		}
	}
	if s.len() != len(seen) {
		t.Fatalf("len %d, map %d", s.len(), len(seen))
	}
}

func TestStringSetArena(t *testing.T) {
	// Enough long strings to fill several arena chunks, each re-added.
	var s stringSet
	const n = 40000
	mk := func(i int) string { return fmt.Sprintf("%060d", i) }
	for i := range n {
		if _, fresh := s.add(mk(i), 0, 0); !fresh {
			t.Fatalf("%d: false duplicate", i)
		}
	}
	for i := range n {
		if f, fresh := s.add(mk(i), 1, 1); fresh || f != (first{}) {
			t.Fatalf("%d: duplicate missed", i)
		}
	}
	if len(s.chunks) < 2 || s.len() != n || s.bytes() < n*60 {
		t.Fatalf("chunks %d len %d bytes %d", len(s.chunks), s.len(), s.bytes())
	}
}

func TestConcurrentWide(t *testing.T) {
	c := NewConcurrent(Config{Kind: KindString})
	a := c.Issuer("a", 0, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				c.ObserveStrings(Observation{Issuer: a}, []string{fmt.Sprint(i%50, "-", g%2)})
			}
		})
	}
	wg.Wait()
	// 4 feeders x 100 calls, 100 distinct strings.
	if p := c.Progress(); p.IDs != 400 || p.Duplicates != 300 || c.Kind() != KindString {
		t.Fatalf("%+v", p)
	}
	w := NewConcurrent(Config{Kind: KindUUIDv4})
	b := w.Issuer("b", 0, 0)
	w.ObserveWide(Observation{Issuer: b}, []ID128{{Lo: 1}, {Lo: 1}})
	if w.Result().Duplicates != 1 {
		t.Fatal("wide duplicate")
	}
}

func TestKindMismatchPanics(t *testing.T) {
	snow := New(Config{})
	a := snow.Issuer("a", 0, 1)
	mustPanic(t, "wide IDs to a Snowflake verifier", func() { snow.ObserveWide(Observation{Issuer: a}, []ID128{{Lo: 1}}) })
	mustPanic(t, "strings to a Snowflake verifier", func() { snow.ObserveStrings(Observation{Issuer: a}, []string{"x"}) })
	wide := New(Config{Kind: KindUUIDv7})
	b := wide.Issuer("b", 0, 1)
	mustPanic(t, "Snowflakes to a UUID verifier", func() { wide.Observe(Observation{Issuer: b, IDs: []generator.ID{1}}) })
	mustPanic(t, "Snowflakes beside wide IDs", func() { wide.ObserveWide(Observation{Issuer: b, IDs: []generator.ID{1}}, []ID128{{Lo: 1}}) })
	mustPanic(t, "unknown kind", func() { New(Config{Kind: numKinds}) })
	// A call without IDs is fine for any kind.
	if f := wide.ObserveWide(Observation{Issuer: b, Outcome: OutcomeRefused}, nil); f.Any() || wide.Progress().Calls != 1 {
		t.Fatal("empty wide call")
	}
}
