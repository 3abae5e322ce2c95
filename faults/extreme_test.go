package faults_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// maxD and minD are the extreme durations.
const (
	maxD = time.Duration(math.MaxInt64)
	minD = time.Duration(math.MinInt64)
)

// TestExtremeParameters gives every fault absurd parameters: no reading
// panics, none wraps around the int64 range, and a leap beyond 2262 is
// scheduled, not fired.
func TestExtremeParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(*faults.Clock)
		// sign: the wall offset's sign after 1s of base time (+1 ahead,
		// -1 behind, 0 exactly none).
		sign int
	}{
		{"jitter max", func(c *faults.Clock) { c.Jitter(maxD, rand.New(rand.NewPCG(1, 2))) }, 0},
		{"step max twice", func(c *faults.Clock) { c.Step(maxD); c.Step(maxD) }, +1},
		{"step min twice", func(c *faults.Clock) { c.Step(minD); c.Step(minD) }, -1},
		{"step min, then leap", func(c *faults.Clock) { c.Step(minD); c.Leap(time.Unix(0, math.MinInt64)) }, -1},
		{"step max, then leap", func(c *faults.Clock) { c.Step(maxD); c.Leap(t0) }, +1},
		{"step max, freeze, leap", func(c *faults.Clock) { c.Step(maxD); c.Freeze(0); c.Leap(t0) }, +1},
		{"step min, freeze", func(c *faults.Clock) { c.Step(minD); c.Freeze(0) }, -1},
		{"leap after 2262", func(c *faults.Clock) { c.Leap(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)) }, 0},
		{"leap before 1678", func(c *faults.Clock) { c.Leap(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)) }, -1},
		{"smear min", func(c *faults.Clock) { c.Smear(minD, time.Second) }, -1},
		{"smear max", func(c *faults.Clock) { c.Smear(maxD, time.Second) }, +1},
		{"smear max twice, at once", func(c *faults.Clock) { c.Smear(maxD, 0); c.Smear(maxD, 0) }, +1},
		{"slew min twice", func(c *faults.Clock) { c.Slew(minD, 1e6); c.Slew(minD, 1e6) }, -1},
		{"slew max twice", func(c *faults.Clock) { c.Slew(maxD, math.Inf(1)); c.Slew(maxD, 0) }, +1},
		{"drift inf", func(c *faults.Clock) { c.Drift(math.Inf(1)) }, +1},
		{"drift -inf", func(c *faults.Clock) { c.Drift(math.Inf(-1)) }, -1},
		{"drift nan", func(c *faults.Clock) { c.Drift(math.NaN()) }, 0},
		{"freeze max", func(c *faults.Clock) { c.Freeze(maxD) }, -1},
		{"pause max", func(c *faults.Clock) { c.Pause(maxD) }, -1},
		{"pause max, step max", func(c *faults.Clock) { c.Pause(maxD); c.Step(maxD) }, -1},
		{"everything", func(c *faults.Clock) {
			c.Step(maxD)
			c.Smear(maxD, maxD)
			c.Slew(maxD, 1e6)
			c.Drift(1e6)
			c.Jitter(maxD, rand.New(rand.NewPCG(3, 4)))
		}, +1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := faults.NewVirtual(t0, false)
			c := faults.New(base)
			w0, _ := c.Now()
			tc.do(c)
			base.Advance(time.Second)
			bw, bm := base.Now()
			w, m := c.Now()
			if m > bm {
				t.Errorf("mono %d ahead of the base's %d", m, bm)
			}
			got := 0
			switch off := c.Offset(); {
			case off > 0:
				got = +1
			case off < 0:
				got = -1
			}
			if got != tc.sign {
				t.Errorf("Offset %v (wall %d, base %d): sign %d, want %d", c.Offset(), w, bw, got, tc.sign)
			}
			if tc.sign > 0 && w < w0 {
				t.Errorf("forward faults only, but the wall went back from %d to %d", w0, w)
			}
			if tc.sign < 0 && w > bw {
				t.Errorf("backward faults only, but the wall %d is ahead of the base %d", w, bw)
			}
			for _, a := range c.Active() {
				if a.Detail == "" {
					t.Errorf("Active %+v without detail", a)
				}
			}
			c.Revert()
			if off := c.Offset(); off != 0 {
				t.Errorf("Offset %v after Revert", off)
			}
		})
	}
}

// TestLeapBeyond2262IsScheduled checks that an instant beyond the int64
// nanosecond range is kept as scheduled (clamped), not fired at once.
func TestLeapBeyond2262IsScheduled(t *testing.T) {
	c := faults.New(faults.NewVirtual(t0, false))
	c.Leap(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
	a := c.Active()
	if len(a) != 1 || a[0].Kind != faults.KindLeap || c.Offset() != 0 {
		t.Fatalf("Active %+v, Offset %v: want one scheduled leap and no offset", a, c.Offset())
	}
}

// FuzzClock applies a sequence of faults with arbitrary parameters,
// advancing the base between them, and checks the invariants every
// reading keeps: no panic, a monotonic reading that never goes back and
// never passes the base's, and an Offset whose sign follows the faults'
// direction (a wrap around the int64 range flips it).
//
// Each op is 10 bytes: kind, sign, a 64-bit parameter.
func FuzzClock(f *testing.F) {
	op := func(kind, sign byte, v uint64) []byte {
		b := []byte{kind, sign}
		return binary.LittleEndian.AppendUint64(b, v)
	}
	f.Add(op(0, 0, math.MaxUint64))
	f.Add(append(op(1, 1, 1<<63), op(7, 1, 1<<63-1)...))
	f.Add(append(op(3, 1, 5), op(2, 1, 0)...))
	f.Add(append(op(4, 0, 1<<62), op(5, 0, 3)...))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 10*64 {
			ops = ops[:10*64]
		}
		base := faults.NewVirtual(t0, false)
		c := faults.New(base)
		var prevMono int64
		dir := 0 // +1 forward faults only, -1 backward only, 2 mixed
		note := func(d int) {
			switch {
			case d == 0:
			case dir == 0:
				dir = d
			case dir != d:
				dir = 2
			}
		}
		for len(ops) >= 10 {
			kind, sign, v := ops[0], ops[1], binary.LittleEndian.Uint64(ops[2:10])
			ops = ops[10:]
			d := time.Duration(v >> 1)
			if sign&1 == 1 {
				d = -d - time.Duration(v&1) // reaches math.MinInt64
			}
			s := 0
			switch {
			case d > 0:
				s = +1
			case d < 0:
				s = -1
			}
			switch kind % 10 {
			case 0:
				c.Jitter(d, rand.New(rand.NewPCG(v, v)))
			case 1:
				c.Step(d)
				note(s)
			case 2:
				c.Freeze(d)
				note(-1)
			case 3:
				c.Release()
			case 4:
				c.Leap(time.Unix(0, int64(d)))
				note(-1)
			case 5:
				c.Smear(d, time.Duration(v))
				note(s)
			case 6:
				c.Slew(d, float64(sign))
				note(s)
			case 7:
				ppm := math.Float64frombits(v)
				c.Drift(ppm)
				switch {
				case ppm > 0:
					note(+1)
				case ppm < 0:
					note(-1)
				}
			case 8:
				c.Pause(d)
				note(-1)
			case 9:
				c.Revert()
				dir = 0
			}
			base.Advance(time.Duration(v % uint64(time.Hour)))
			_, bm := base.Now()
			_, m := c.Now()
			if m < prevMono || m > bm {
				t.Fatalf("mono %d after %d (base %d)", m, prevMono, bm)
			}
			prevMono = m
			off := c.Offset()
			if (dir == +1 && off < 0) || (dir == -1 && off > 0) {
				t.Fatalf("faults of direction %d, Offset %v", dir, off)
			}
			c.Active()
			c.MonoOffset()
		}
	})
}
