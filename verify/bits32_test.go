package verify

import (
	"math/rand/v2"
	"testing"
	"testing/quick"
)

// checkBits32 applies ops to a bits32 and to a map: a run of values
// each above the maximum is appended (as the Set drains: with appendRun,
// or appendMax for odd positions), any other value added anywhere; every
// answer, and every member at the end, must agree.
func checkBits32(t testing.TB, vals []uint32) *bits32 {
	t.Helper()
	var b bits32
	m := map[uint32]bool{}
	var top uint32
	for i := 0; i < len(vals); {
		x := vals[i]
		if got := b.contains(x); got != m[x] {
			t.Fatalf("value #%d %#x: contains = %v, map %v", i, x, got, m[x])
		}
		if len(m) == 0 || x > top {
			j := i + 1
			for j < len(vals) && j-i < pendCap && vals[j] > vals[j-1] {
				j++
			}
			if i%2 == 0 {
				b.appendRun(vals[i:j])
			} else {
				for _, y := range vals[i:j] {
					b.appendMax(y)
				}
			}
			for _, y := range vals[i:j] {
				m[y] = true
				if !b.contains(y) {
					t.Fatalf("value %#x: not found after appending", y)
				}
			}
			top = vals[j-1]
			if b.max() != top {
				t.Fatalf("max %#x != %#x", b.max(), top)
			}
			i = j
			continue
		}
		if fresh := b.add(x); fresh == m[x] {
			t.Fatalf("value #%d %#x: add fresh = %v, map seen = %v", i, x, fresh, m[x])
		}
		m[x] = true
		if !b.contains(x) || b.max() != top {
			t.Fatalf("value #%d %#x: not found after adding, or max %#x != %#x", i, x, b.max(), top)
		}
		i++
	}
	n := 0
	for i, c := range b.ctrs {
		n += int(c.n)
		if i > 0 && b.keys[i] <= b.keys[i-1] {
			t.Fatalf("keys out of order at %d", i)
		}
	}
	if n != len(m) {
		t.Fatalf("cardinality %d, map %d", n, len(m))
	}
	for x := range m {
		if !b.contains(x) {
			t.Fatalf("member %#x lost", x)
		}
	}
	return &b
}

func TestBits32QuickAgainstMap(t *testing.T) {
	f := func(raw []uint32, small []uint16, seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 7))
		var vals []uint32
		// Ascending runs and gaps (appends), then random values and
		// repeats (adds and duplicates) around them.
		x := r.Uint32N(1 << 20)
		for range 2000 {
			x += 1 + r.Uint32N(3)*r.Uint32N(2)
			vals = append(vals, x)
		}
		vals = append(vals, raw...)
		for _, v := range small {
			vals = append(vals, uint32(v), vals[int(v)%len(vals)])
		}
		checkBits32(t, vals)
		return !t.Failed()
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 100}); err != nil {
		t.Fatal(err)
	}
}

// TestBits32Containers drives every container through every form: arrays
// past arrayMax into runs (consecutive) and into bitmaps (spread), runs
// past runsMax, and inserts below the maximum into each form.
func TestBits32Containers(t *testing.T) {
	var vals []uint32
	// Key 1: 10,000 consecutive values: array, then runs.
	for v := range uint32(10000) {
		vals = append(vals, 1<<16|v)
	}
	// Key 2: every third value: array, then a bitmap.
	for v := uint32(0); v < 1<<16; v += 3 {
		vals = append(vals, 2<<16|v)
	}
	// Key 3: pairs with gaps: array, runs, then past runsMax a bitmap.
	for v := uint32(0); v+1 < 1<<16; v += 5 {
		vals = append(vals, 3<<16|v, 3<<16|(v+1))
	}
	// Key 4: the top of the range.
	vals = append(vals, 4<<16|0xfffe, 4<<16|0xffff)
	b := checkBits32(t, vals)
	if c := b.ctrs[0]; !c.isRuns || len(c.vals) != 2 {
		t.Fatalf("key 1: consecutive values should be one run: runs %v, %d words", c.isRuns, len(c.vals))
	}
	if b.ctrs[1].bm == nil || b.ctrs[2].bm == nil || b.ctrs[3].bm != nil || b.ctrs[3].isRuns {
		t.Fatal("keys 2 and 3 should be bitmaps, key 4 an array")
	}
	// Inserts below the maximum into each form, and repeats.
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		vals = append(vals, uint32(1+r.IntN(4))<<16|r.Uint32N(1<<16), uint32(r.IntN(6))<<16|r.Uint32N(1<<16))
	}
	vals = append(vals, 7, 0, 5<<16, 1<<16|5)
	checkBits32(t, vals)
}

func FuzzBits32AgainstMap(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1})
	f.Add([]byte{0, 1, 0xff, 0xff, 0, 2, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var vals []uint32
		// Each 4 bytes is a value; a short tail runs consecutive values
		// from the last one, so inputs reach runs and bitmaps.
		for len(data) >= 4 {
			vals = append(vals, uint32(data[0])<<24|uint32(data[1])<<16|uint32(data[2])<<8|uint32(data[3]))
			data = data[4:]
		}
		if len(vals) > 0 {
			for i, b := range data {
				for k := range uint32(b) * 32 {
					vals = append(vals, vals[len(vals)-1-i%len(vals)]+k)
				}
			}
		}
		checkBits32(t, vals)
	})
}
