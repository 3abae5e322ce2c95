package verify

import (
	"math"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/snowchaos/snowchaos/generator"
)

// checkAgainstMap adds ids to a Set and to a plain map and fails on the
// first disagreement; it also cross-checks Contains and Len.
func checkAgainstMap(t testing.TB, l generator.Layout, ids []generator.ID) {
	t.Helper()
	s := NewSet(l)
	m := make(map[uint64]struct{}, len(ids))
	for i, id := range ids {
		_, seen := m[uint64(id)]
		if got := s.Contains(id); got != seen {
			t.Fatalf("layout %s: id #%d %d: Contains = %v before Add, map says %v", l.Name, i, id, got, seen)
		}
		m[uint64(id)] = struct{}{}
		if fresh := s.Add(id); fresh == seen {
			t.Fatalf("layout %s: id #%d %d: Add fresh = %v, map says seen = %v", l.Name, i, id, fresh, seen)
		}
		if !s.Contains(id) {
			t.Fatalf("layout %s: id #%d %d: Contains = false after Add", l.Name, i, id)
		}
	}
	if s.Len() != uint64(len(m)) {
		t.Fatalf("layout %s: Len = %d, map has %d", l.Name, s.Len(), len(m))
	}
	// Every member is still found after all the evictions and flushes.
	for k := range m {
		if !s.Contains(generator.ID(k)) {
			t.Fatalf("layout %s: member %d lost", l.Name, k)
		}
	}
}

// layouts returns every preset plus a foreign layout that does not sum to
// 63 bits (the Set then keys by the raw ID).
func layouts() []generator.Layout {
	ls := generator.Presets()
	return append(ls, generator.Layout{Name: "foreign-20/20/20", TimeBits: 20, NodeBits: 20, SeqBits: 20}, generator.Layout{})
}

func TestSetQuickAgainstMap(t *testing.T) {
	for _, l := range layouts() {
		f := func(raw []uint64, small []uint16) bool {
			ids := make([]generator.ID, 0, 2*len(raw)+len(small))
			for _, r := range raw {
				ids = append(ids, generator.ID(r))
			}
			// Small values collide often; re-add some raw values too.
			for _, v := range small {
				ids = append(ids, generator.ID(v&0x3ff))
			}
			for i := 0; i < len(raw); i += 3 {
				ids = append(ids, generator.ID(raw[i]))
			}
			checkAgainstMap(t, l, ids)
			return !t.Failed()
		}
		if err := quick.Check(f, &quick.Config{MaxCount: 200}); err != nil {
			t.Fatalf("layout %s: %v", l.Name, err)
		}
	}
}

// adversarial returns named streams aimed at the Set's fast paths and
// boundaries.
func adversarial(l generator.Layout, seed uint64) map[string][]generator.ID {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	mk := func(tick, node, seq int64) generator.ID {
		return generator.ID(tick<<(l.NodeBits+l.SeqBits) | node<<l.SeqBits | seq)
	}
	maxNode, maxSeq := int64(1)<<l.NodeBits-1, int64(1)<<l.SeqBits-1
	out := map[string][]generator.ID{}

	// Every node interleaved, one ID per tick, then the same stream again.
	var inter []generator.ID
	nodes := min(maxNode+1, 1100)
	for tick := int64(1000); tick < 1040; tick++ {
		for n := range nodes {
			inter = append(inter, mk(tick, n, 0))
		}
	}
	out["interleaved"] = append(inter, inter...)

	// The same ID many times, alone and between others.
	same := mk(5000, maxNode/2, 7)
	var rep []generator.ID
	for i := range 300 {
		rep = append(rep, same, mk(5000+int64(i), maxNode/2, 0), same)
	}
	out["repeat"] = rep

	// Values either side of the container (16-bit) and bitmap (32-bit)
	// boundaries of the key, for a few nodes and sequence rows, in both
	// orders: ticks near multiples of 2^6 and 2^22 (the key keeps 10 low
	// sequence bits below the time), and of 2^4, 2^8, 2^20 and 2^24
	// (boundaries other splits would have).
	var edges []generator.ID
	seqs := []int64{0, 1, 255, 256, 1023, 1024, 1025, maxSeq - 1, maxSeq}
	for _, n := range []int64{0, 1, maxNode} {
		for _, b := range []uint{4, 6, 8, 20, 22, 24} {
			for k := int64(1); k < 4; k++ {
				for d := int64(-2); d <= 2; d++ {
					tick := k<<b + d
					if l.TimeBits < 63 && tick >= int64(1)<<l.TimeBits {
						continue
					}
					for _, sq := range seqs {
						if sq >= 0 && sq <= maxSeq {
							edges = append(edges, mk(tick, n, sq))
						}
					}
				}
			}
		}
	}
	rev := make([]generator.ID, len(edges))
	for i, id := range edges {
		rev[len(edges)-1-i] = id
	}
	out["boundaries"] = append(append(edges, rev...), edges...)

	// Extreme values, including the sign bit a foreign source might set.
	out["extremes"] = []generator.ID{
		0, 1, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, -1, 0, math.MaxInt64,
		generator.ID(maxSeq), generator.ID(maxSeq + 1), mk(0, maxNode, maxSeq), -1, math.MinInt64,
	}

	// A saturated tick from several nodes, seq runs interleaved, then
	// clones re-issuing the same run out of step.
	var sat []generator.ID
	for tick := int64(77); tick < 80; tick++ {
		for s := int64(0); s <= min(maxSeq, 5000); s++ {
			for n := range min(maxNode+1, 3) {
				sat = append(sat, mk(tick, n, s))
			}
		}
	}
	clone := append([]generator.ID(nil), sat[:len(sat)/2]...)
	out["saturated+clone"] = append(sat, clone...)

	// A node whose clock steps back: IDs descend, then overlap.
	var back []generator.ID
	for tick := int64(2000); tick < 2300; tick++ {
		back = append(back, mk(tick, 3%(maxNode+1), 0))
	}
	for tick := int64(2150); tick < 2400; tick++ {
		back = append(back, mk(tick, 3%(maxNode+1), 0))
	}
	out["rewind"] = back

	// Random values drawn near each other so that they collide.
	var near []generator.ID
	for range 20000 {
		near = append(near, generator.ID(r.Uint64N(1<<18)<<l.SeqBits|r.Uint64N(4)))
	}
	out["random-near"] = near
	// Fully random 64-bit values, re-added in shuffled order.
	var wide []generator.ID
	for range 5000 {
		wide = append(wide, generator.ID(r.Uint64()))
	}
	sh := append([]generator.ID(nil), wide...)
	r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
	out["random-wide"] = append(wide, sh...)
	return out
}

func TestSetAdversarialAgainstMap(t *testing.T) {
	for _, l := range layouts() {
		if l.TimeBits+l.NodeBits+l.SeqBits != 63 {
			continue // the streams compose IDs with the layout's widths
		}
		for name, ids := range adversarial(l, 1) {
			t.Run(l.Name+"/"+name, func(t *testing.T) { checkAgainstMap(t, l, ids) })
		}
	}
}

func TestSetRawKeyedAgainstMap(t *testing.T) {
	foreign := generator.Layout{Name: "foreign", TimeBits: 30, NodeBits: 30, SeqBits: 30}
	for name, ids := range adversarial(generator.DefaultLayout(), 2) {
		t.Run(name, func(t *testing.T) { checkAgainstMap(t, foreign, ids) })
	}
}

func TestSetForeignLayoutIDs(t *testing.T) {
	// IDs made with one layout fed to a Set keyed for another stay exact.
	for _, made := range generator.Presets() {
		for _, keyed := range generator.Presets() {
			all := adversarial(made, 3)["interleaved"]
			// A slice of the first pass and the same slice of the repeat.
			ids := append(append([]generator.ID(nil), all[:3000]...), all[len(all)/2:len(all)/2+3000]...)
			checkAgainstMap(t, keyed, ids)
		}
	}
}

func TestSetBytesGrows(t *testing.T) {
	s := NewSet(generator.Layout{})
	b0 := s.Bytes()
	for i := range 100000 {
		s.Add(generator.ID(int64(i) << 22))
	}
	if s.Bytes() <= b0 || s.Len() != 100000 {
		t.Fatalf("Bytes %d -> %d, Len %d", b0, s.Bytes(), s.Len())
	}
}

// TestSetMemoryTargets checks Bytes per ID against the targets on
// deterministic streams: at most 8 bytes per ID with one ID per ms per
// node (1,024 nodes interleaved), under 0.5 at 4,096 per ms per node.
func TestSetMemoryTargets(t *testing.T) {
	l := generator.DefaultLayout()
	sparse := NewSet(l)
	n := 0
	for tick := int64(47_000_000_000); tick < 47_000_000_000+1024; tick++ {
		for node := range int64(1024) {
			id, _ := l.Compose(tick, node, 0)
			sparse.Add(id)
			n++
		}
	}
	if perID := float64(sparse.Bytes()) / float64(n); perID > 8 {
		t.Errorf("sparse: %.2f bytes/ID, want <= 8", perID)
	}
	sat := NewSet(l)
	n = 0
	for tick := int64(47_000_000_000); tick < 47_000_000_000+64; tick++ {
		for node := range int64(4) {
			for seq := range int64(4096) {
				id, _ := l.Compose(tick, node, seq)
				sat.Add(id)
				n++
			}
		}
	}
	if perID := float64(sat.Bytes()) / float64(n); perID >= 0.5 {
		t.Errorf("saturated: %.3f bytes/ID, want < 0.5", perID)
	}
}

func FuzzSetAgainstMap(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, uint8(0))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, uint8(5))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xff, 0xff}, uint8(2))
	ls := layouts()
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		l := ls[int(which)%len(ls)]
		var ids []generator.ID
		// Each 8 bytes is an ID; a short tail repeats earlier IDs with
		// small offsets so that inputs produce duplicates and neighbours.
		for len(data) >= 8 {
			var v uint64
			for _, b := range data[:8] {
				v = v<<8 | uint64(b)
			}
			ids = append(ids, generator.ID(v))
			data = data[8:]
		}
		for i, b := range data {
			if len(ids) > 0 {
				ids = append(ids, ids[(i*7)%len(ids)]+generator.ID(b%4))
			}
		}
		checkAgainstMap(t, l, ids)
	})
}
