package faults_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// t0 is the base clock's start in the history tests: two seconds before a
// leap-second midnight.
var t0 = time.Date(2016, 12, 31, 23, 59, 58, 0, time.UTC)

// midnight is the leap-second instant after t0.
var midnight = time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)

// row is one step of a clock's history: advance the base to at (base time
// since t0), do something, then read the clock.
type row struct {
	at   time.Duration       // base time; rows are in order
	do   func(*faults.Clock) // nil: just read
	note string
	wall time.Duration // expected wall reading minus t0
	mono time.Duration // expected monotonic reading
	back bool          // the wall reads earlier than in the previous row or just before do
}

// runHistory plays rows against a fresh Clock over a Virtual base and checks
// every reading, Offset and MonoOffset, and the direction the wall moved.
func runHistory(t *testing.T, rows []row) {
	t.Helper()
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	var prevWall int64
	for i, r := range rows {
		if d := r.at - base.Elapsed(); d < 0 {
			t.Fatalf("row %d (%s): at %v is before base time %v", i, r.note, r.at, base.Elapsed())
		} else {
			base.Advance(d)
		}
		ref := prevWall // the wall reading the row's is compared with
		if r.do != nil {
			if before, _ := c.Now(); i == 0 || before > ref {
				ref = before
			}
			r.do(c)
		}
		wall, mono := c.Now()
		gotWall := time.Duration(wall - t0.UnixNano())
		if gotWall != r.wall || time.Duration(mono) != r.mono {
			t.Errorf("row %d at %v (%s): wall t0%+v mono %v, want wall t0%+v mono %v",
				i, r.at, r.note, gotWall, time.Duration(mono), r.wall, r.mono)
		}
		if off, want := c.Offset(), r.wall-r.at; off != want {
			t.Errorf("row %d at %v (%s): Offset %v, want %v", i, r.at, r.note, off, want)
		}
		if off, want := c.MonoOffset(), r.mono-r.at; off != want {
			t.Errorf("row %d at %v (%s): MonoOffset %v, want %v", i, r.at, r.note, off, want)
		}
		if (i > 0 || r.do != nil) && (wall < ref) != r.back {
			t.Errorf("row %d at %v (%s): wall went back = %v, want %v", i, r.at, r.note, wall < ref, r.back)
		}
		prevWall = wall
	}
}

const (
	ms = time.Millisecond
	s  = time.Second
	us = time.Microsecond
)

func TestHistories(t *testing.T) {
	step := func(d time.Duration) func(*faults.Clock) { return func(c *faults.Clock) { c.Step(d) } }
	revert := func(c *faults.Clock) { c.Revert() }
	release := func(c *faults.Clock) { c.Release() }
	tests := []struct {
		name string
		rows []row
	}{
		{"step", []row{
			{at: 0, note: "no fault", wall: 0, mono: 0},
			{at: 1 * s, do: step(-3 * ms), note: "the clock jumps back 3ms", wall: 1*s - 3*ms, mono: 1 * s, back: true},
			{at: 2 * s, note: "runs on, 3ms behind", wall: 2*s - 3*ms, mono: 2 * s},
			{at: 2 * s, do: step(10 * ms), note: "steps forward 10ms", wall: 2*s + 7*ms, mono: 2 * s},
			{at: 2 * s, do: step(-2 * s), note: "the clock jumps back 2s", wall: 7 * ms, mono: 2 * s, back: true},
			{at: 3 * s, do: revert, note: "revert", wall: 3 * s, mono: 3 * s},
		}},
		{"freeze for a duration", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Freeze(5 * s) }, note: "freeze 5s", wall: 1 * s, mono: 1 * s},
			{at: 3 * s, note: "stands still", wall: 1 * s, mono: 3 * s},
			{at: 6*s - 1, note: "last ns of the freeze", wall: 1 * s, mono: 6*s - 1},
			{at: 6 * s, note: "resumes where it would have been", wall: 6 * s, mono: 6 * s},
			{at: 7 * s, note: "runs", wall: 7 * s, mono: 7 * s},
		}},
		{"freeze until release, with a step", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Freeze(0) }, note: "freeze until Release", wall: 1 * s, mono: 1 * s},
			{at: 100 * s, note: "still frozen", wall: 1 * s, mono: 100 * s},
			{at: 100 * s, do: step(-500 * ms), note: "the clock jumps back while frozen", wall: 500 * ms, mono: 100 * s, back: true},
			{at: 101 * s, note: "held at the stepped value", wall: 500 * ms, mono: 101 * s},
			{at: 102 * s, do: release, note: "released: base plus the step", wall: 102*s - 500*ms, mono: 102 * s},
		}},
		{"leap second", []row{
			{at: 0, do: func(c *faults.Clock) { c.Leap(midnight) }, note: "23:59:58, leap scheduled", wall: 0, mono: 0},
			{at: 1 * s, note: "23:59:59", wall: 1 * s, mono: 1 * s},
			{at: 2*s - 1, note: "23:59:59.999999999", wall: 2*s - 1, mono: 2*s - 1},
			{at: 2 * s, note: "midnight: the clock jumps back to 23:59:59", wall: 1 * s, mono: 2 * s, back: true},
			{at: 2*s + 500*ms, note: "23:59:59.5 again", wall: 1*s + 500*ms, mono: 2*s + 500*ms},
			{at: 3 * s, note: "midnight for real", wall: 2 * s, mono: 3 * s},
			{at: 4 * s, note: "1s behind for good", wall: 3 * s, mono: 4 * s},
			{at: 5 * s, do: revert, note: "revert", wall: 5 * s, mono: 5 * s},
		}},
		{"leap already passed", []row{
			{at: 3 * s, do: func(c *faults.Clock) { c.Leap(midnight) }, note: "scheduled after midnight: the clock jumps back at once", wall: 2 * s, mono: 3 * s, back: true},
		}},
		{"smear +1s over 10s", []row{
			{at: 0, do: func(c *faults.Clock) { c.Smear(1*s, 10*s) }, wall: 0, mono: 0},
			{at: 1 * s, wall: 1100 * ms, mono: 1 * s},
			{at: 5 * s, wall: 5500 * ms, mono: 5 * s},
			{at: 10 * s, note: "window end: exactly +1s", wall: 11 * s, mono: 10 * s},
			{at: 20 * s, wall: 21 * s, mono: 20 * s},
		}},
		{"smear -1s over 3s, truncated toward zero", []row{
			{at: 0, do: func(c *faults.Clock) { c.Smear(-1*s, 3*s) }, wall: 0, mono: 0},
			{at: 1 * s, wall: 1*s - 333333333, mono: 1 * s},
			{at: 2 * s, wall: 2*s - 666666666, mono: 2 * s},
			{at: 3 * s, wall: 2 * s, mono: 3 * s},
			{at: 4 * s, wall: 3 * s, mono: 4 * s},
		}},
		{"smear -2s over 1s is lengthened to 2s", []row{
			{at: 0, do: func(c *faults.Clock) { c.Smear(-2*s, 1*s) }, wall: 0, mono: 0},
			{at: 1 * s, note: "stands still", wall: 0, mono: 1 * s},
			{at: 2 * s, note: "stands still", wall: 0, mono: 2 * s},
			{at: 3 * s, wall: 1 * s, mono: 3 * s},
		}},
		{"smear with no window applies at once", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Smear(250*ms, 0) }, wall: 1250 * ms, mono: 1 * s},
			{at: 2 * s, wall: 2250 * ms, mono: 2 * s},
		}},
		{"overlapping smears add up", []row{
			{at: 0, do: func(c *faults.Clock) { c.Smear(1*s, 10*s) }, wall: 0, mono: 0},
			{at: 5 * s, do: func(c *faults.Clock) { c.Smear(-1*s, 10*s) }, wall: 5500 * ms, mono: 5 * s},
			{at: 10 * s, note: "first done, second half way", wall: 10*s + 1*s - 500*ms, mono: 10 * s},
			{at: 15 * s, note: "both done", wall: 15 * s, mono: 15 * s},
		}},
		{"slew +5ms at the default 500ppm", []row{
			{at: 0, do: func(c *faults.Clock) { c.Slew(5*ms, 0) }, wall: 0, mono: 0},
			{at: 1 * s, wall: 1*s + 500*us, mono: 1 * s},
			{at: 4 * s, wall: 4*s + 2*ms, mono: 4 * s},
			{at: 4 * s, do: step(-1 * s), note: "a step during the slew: the clock jumps back", wall: 3*s + 2*ms, mono: 4 * s, back: true},
			{at: 6 * s, note: "the slew runs on", wall: 5*s + 3*ms, mono: 6 * s},
			{at: 10 * s, note: "slew done", wall: 9*s + 5*ms, mono: 10 * s},
			{at: 20 * s, wall: 19*s + 5*ms, mono: 20 * s},
		}},
		{"slew -5ms at 1000ppm, then more", []row{
			{at: 0, do: func(c *faults.Clock) { c.Slew(-5*ms, 1000) }, wall: 0, mono: 0},
			{at: 1 * s, wall: 1*s - 1*ms, mono: 1 * s},
			{at: 2 * s, do: func(c *faults.Clock) { c.Slew(-2*ms, -2000) }, note: "5ms outstanding at 2000ppm", wall: 2*s - 2*ms, mono: 2 * s},
			{at: 3 * s, wall: 3*s - 4*ms, mono: 3 * s},
			{at: 4500 * ms, note: "done: -7ms in all", wall: 4500*ms - 7*ms, mono: 4500 * ms},
			{at: 9 * s, wall: 9*s - 7*ms, mono: 9 * s},
		}},
		{"drift", []row{
			{at: 0, do: func(c *faults.Clock) { c.Drift(100) }, wall: 0, mono: 0},
			{at: 1 * s, wall: 1*s + 100*us, mono: 1 * s},
			{at: 10 * s, do: func(c *faults.Clock) { c.Drift(-50.5) }, wall: 10*s + 1*ms, mono: 10 * s},
			{at: 20 * s, wall: 20*s + 1*ms - 505*us, mono: 20 * s},
			{at: 20 * s, do: func(c *faults.Clock) { c.Drift(0) }, wall: 20*s + 495*us, mono: 20 * s},
			{at: 30 * s, wall: 30*s + 495*us, mono: 30 * s},
		}},
		{"pause", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Pause(2 * s) }, note: "pause 2s", wall: 1 * s, mono: 1 * s},
			{at: 2 * s, note: "wall and mono stand still", wall: 1 * s, mono: 1 * s},
			{at: 3 * s, note: "wall jumps to base, mono resumes", wall: 3 * s, mono: 1 * s},
			{at: 4 * s, note: "mono 2s behind for good", wall: 4 * s, mono: 2 * s},
			{at: 5 * s, do: revert, note: "revert: mono jumps forward", wall: 5 * s, mono: 5 * s},
		}},
		{"pause until release, with a step", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Pause(0) }, wall: 1 * s, mono: 1 * s},
			{at: 2 * s, do: step(-10 * s), note: "stepped while paused: not shown yet", wall: 1 * s, mono: 1 * s},
			{at: 3 * s, do: release, note: "released: the clock jumps back", wall: 3*s - 10*s, mono: 1 * s, back: true},
			{at: 4 * s, wall: 4*s - 10*s, mono: 2 * s},
		}},
		{"freeze inside a pause", []row{
			{at: 1 * s, do: func(c *faults.Clock) { c.Freeze(10 * s) }, wall: 1 * s, mono: 1 * s},
			{at: 2 * s, do: func(c *faults.Clock) { c.Pause(2 * s) }, wall: 1 * s, mono: 2 * s},
			{at: 3 * s, wall: 1 * s, mono: 2 * s},
			{at: 4 * s, note: "pause over, still frozen", wall: 1 * s, mono: 2 * s},
			{at: 5 * s, wall: 1 * s, mono: 3 * s},
			{at: 11 * s, note: "freeze over", wall: 11 * s, mono: 9 * s},
		}},
		{"composed: drift, smear and a leap", []row{
			{at: 0, do: func(c *faults.Clock) { c.Drift(1000); c.Smear(-1*s, 4*s); c.Leap(midnight) }, wall: 0, mono: 0},
			{at: 2 * s, note: "before midnight by the faulted wall", wall: 2*s + 2*ms - 500*ms, mono: 2 * s},
			{at: 2500 * ms, note: "still before midnight", wall: 2500*ms + 2500*us - 625*ms, mono: 2500 * ms},
			{at: 3 * s, note: "wall passed midnight: the clock jumps back", wall: 3*s + 3*ms - 750*ms - 1*s, mono: 3 * s, back: true},
			{at: 4 * s, wall: 4*s + 4*ms - 1*s - 1*s, mono: 4 * s},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runHistory(t, tt.rows) })
	}
}

func TestRevertRestoresBase(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	c.Step(-time.Hour)
	c.Drift(300)
	c.Slew(time.Second, 0)
	c.Smear(time.Second, time.Hour)
	c.Leap(midnight)
	c.Jitter(time.Millisecond, rand.New(rand.NewPCG(1, 2)))
	base.Advance(time.Second)
	c.Pause(10 * time.Second)
	c.Freeze(0)
	base.Advance(time.Minute)
	if len(c.Active()) == 0 {
		t.Fatal("no active faults before Revert")
	}
	c.Revert()
	for range 3 {
		bw, bm := base.Now()
		w, m := c.Now()
		if w != bw || m != bm {
			t.Fatalf("after Revert: (%d, %d), base (%d, %d)", w, m, bw, bm)
		}
		if c.Offset() != 0 || c.MonoOffset() != 0 {
			t.Fatalf("after Revert: Offset %v MonoOffset %v", c.Offset(), c.MonoOffset())
		}
		if a := c.Active(); len(a) != 0 {
			t.Fatalf("after Revert: Active %v", a)
		}
		base.Advance(time.Hour)
	}
}

func TestEnable(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	if !c.Enabled() {
		t.Fatal("new clock is disabled")
	}
	c.Step(time.Second)
	c.Enable(false)
	if c.Enabled() || c.Offset() != 0 {
		t.Fatalf("disabled: Enabled %v Offset %v", c.Enabled(), c.Offset())
	}
	c.Step(time.Second)
	c.Pause(time.Second)
	c.Leap(t0)
	c.Drift(100)
	base.Advance(time.Second)
	if c.Offset() != 0 || c.MonoOffset() != 0 || len(c.Active()) != 0 {
		t.Fatalf("faults took effect while disabled: Offset %v MonoOffset %v Active %v", c.Offset(), c.MonoOffset(), c.Active())
	}
	c.Enable(true)
	c.Step(time.Second)
	if c.Offset() != time.Second {
		t.Fatalf("re-enabled: Offset %v, want 1s", c.Offset())
	}
}

// TestOffsetConfirmsEachFault checks that every fault shows in Offset or
// MonoOffset, and in Active, once it has had time to act.
func TestOffsetConfirmsEachFault(t *testing.T) {
	tests := []struct {
		kind     faults.Kind
		do       func(*faults.Clock)
		off      time.Duration
		monoOff  time.Duration
		inDetail string
	}{
		{faults.KindStep, func(c *faults.Clock) { c.Step(-3 * ms) }, -3 * ms, 0, "-3ms"},
		{faults.KindFreeze, func(c *faults.Clock) { c.Freeze(0) }, -10 * s, 0, "until Release"},
		{faults.KindLeap, func(c *faults.Clock) { c.Leap(t0.Add(5 * s)) }, -1 * s, 0, "inserted"},
		{faults.KindSmear, func(c *faults.Clock) { c.Smear(1*s, 20*s) }, 500 * ms, 0, "+500ms of +1s"},
		{faults.KindSlew, func(c *faults.Clock) { c.Slew(1*s, 0) }, 5 * ms, 0, "running"},
		{faults.KindDrift, func(c *faults.Clock) { c.Drift(-20) }, -200 * us, 0, "-20ppm"},
		{faults.KindPause, func(c *faults.Clock) { c.Pause(4 * s) }, 0, -4 * s, "mono lost 4s"},
		{faults.KindJitter, func(c *faults.Clock) { c.Jitter(ms, rand.New(rand.NewPCG(3, 4))) }, 0, 0, "up to 1ms"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			base := faults.NewVirtual(t0, false)
			c := faults.New(base)
			tt.do(c)
			base.Advance(10 * s)
			if got := c.Offset(); got != tt.off {
				t.Errorf("Offset %v, want %v", got, tt.off)
			}
			if got := c.MonoOffset(); got != tt.monoOff {
				t.Errorf("MonoOffset %v, want %v", got, tt.monoOff)
			}
			a := c.Active()
			if len(a) != 1 || a[0].Kind != tt.kind || !strings.Contains(a[0].Detail, tt.inDetail) {
				t.Fatalf("Active %+v, want one %q containing %q", a, tt.kind, tt.inDetail)
			}
		})
	}
}

func TestActiveSinceWall(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	c.Leap(midnight)
	base.Advance(s)
	c.Step(-5 * s)
	base.Advance(10 * s)
	got := c.Active()
	want := []faults.Active{
		{Kind: faults.KindStep, Detail: "net -5s over 1 step(s)", SinceWall: t0.Add(s).UnixNano()},
		{Kind: faults.KindLeap, Detail: "inserted at 2017-01-01T00:00:00Z: the wall stepped back 1s", SinceWall: midnight.UnixNano()},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Active:\n got %+v\nwant %+v", got, want)
	}
}

// TestMonoOnlyPause drives random fault schedules and checks that the
// monotonic reading equals the base's except for what pauses took, and
// never goes backwards.
func TestMonoOnlyPause(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	var prev int64
	for i := range 2000 {
		d := time.Duration(rng.Int64N(int64(2 * s)))
		switch rng.IntN(9) {
		case 0:
			c.Step(d - s)
		case 1:
			c.Freeze(d)
		case 2:
			c.Leap(t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
		case 3:
			c.Smear(d-s, d)
		case 4:
			c.Slew(d-s, rng.Float64()*1000)
		case 5:
			c.Drift(rng.Float64()*200 - 100)
		case 6:
			c.Release()
		case 7:
			c.Revert()
		}
		_, bm := base.Now()
		_, mono := c.Now()
		if mono < prev {
			t.Fatalf("seed %d step %d: mono went back from %d to %d", seed, i, prev, mono)
		}
		if mono != bm || c.MonoOffset() != 0 {
			t.Fatalf("seed %d step %d: MonoOffset %v with no pause (mono %d base %d)", seed, i, c.MonoOffset(), mono, bm)
		}
		prev = mono
		base.Advance(time.Duration(rng.Int64N(int64(500 * ms))))
	}
	// Now with pauses: mono never goes back nor runs ahead of the base.
	for i := range 2000 {
		switch rng.IntN(4) {
		case 0:
			c.Pause(time.Duration(rng.Int64N(int64(2 * s))))
		case 1:
			c.Release()
		case 2:
			if rng.IntN(10) == 0 {
				c.Revert()
			}
		}
		_, mono := c.Now()
		if mono < prev {
			t.Fatalf("seed %d pause step %d: mono went back from %d to %d", seed, i, prev, mono)
		}
		if c.MonoOffset() > 0 {
			t.Fatalf("seed %d pause step %d: MonoOffset %v > 0", seed, i, c.MonoOffset())
		}
		prev = mono
		base.Advance(time.Duration(rng.Int64N(int64(500 * ms))))
	}
}

func TestLeapAll(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	offsets := []time.Duration{0, 0, 0, 300 * ms, -700 * ms}
	clocks := make([]*faults.Clock, len(offsets))
	for i, off := range offsets {
		clocks[i] = faults.New(base)
		clocks[i].Step(off)
	}
	faults.LeapAll(midnight, clocks...)
	leapAt := func(i int) time.Duration { return 2*s - offsets[i] } // base time at which clock i reaches midnight
	for at := time.Duration(0); at <= 4*s; at += 100 * ms {
		base.Advance(at - base.Elapsed())
		for i, c := range clocks {
			want := at + offsets[i]
			if at >= leapAt(i) {
				want -= s
			}
			wall, _ := c.Now()
			if got := time.Duration(wall - t0.UnixNano()); got != want {
				t.Fatalf("clock %d (offset %v) at base %v: wall t0%+v, want t0%+v", i, offsets[i], at, got, want)
			}
		}
	}
	// At the boundary the identical clocks all rewound to 23:59:59 together.
	for i := range 3 {
		if got := clocks[i].Offset(); got != -s {
			t.Fatalf("clock %d Offset %v, want -1s", i, got)
		}
	}
}

// TestSmearNeverBackward checks random smears read at random points: the
// wall never goes back and the smear totals exactly d at the window's end.
func TestSmearNeverBackward(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	for trial := range 200 {
		base := faults.NewVirtual(t0, false)
		c := faults.New(base)
		window := time.Duration(1 + rng.Int64N(int64(24*time.Hour)))
		d := time.Duration(rng.Int64N(int64(window)*2+1) - int64(window)) // |d| <= window
		if trial%4 == 0 {
			d = -window // the steepest smear: the wall stands still
		}
		c.Smear(d, window)
		prev, _ := c.Now()
		for base.Elapsed() < window {
			step := time.Duration(1 + rng.Int64N(int64(window)/50+1))
			if rng.IntN(3) == 0 {
				step = 1 // one nanosecond at a time
			}
			base.Advance(min(step, window-base.Elapsed()))
			wall, _ := c.Now()
			if wall < prev {
				t.Fatalf("seed %d trial %d: Smear(%v, %v) went back at %v: %d -> %d", seed, trial, d, window, base.Elapsed(), prev, wall)
			}
			prev = wall
		}
		if got := c.Offset(); got != d {
			t.Fatalf("seed %d trial %d: Smear(%v, %v) totals %v at window end", seed, trial, d, window, got)
		}
		base.Advance(time.Hour)
		if got := c.Offset(); got != d {
			t.Fatalf("seed %d trial %d: Smear(%v, %v) totals %v after window", seed, trial, d, window, got)
		}
	}
}

// TestSlewRateBound checks that a slew never moves the offset faster than
// its rate (within one ns of integer truncation) and ends at exactly d.
func TestSlewRateBound(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	for trial := range 100 {
		base := faults.NewVirtual(t0, false)
		c := faults.New(base)
		d := time.Duration(rng.Int64N(int64(2*s)) - int64(s))
		ppm := []float64{0, 500, 1, 100, 12.5, 1e6}[rng.IntN(6)]
		rate := ppm
		if rate == 0 {
			rate = faults.DefaultSlewPPM
		}
		c.Slew(d, ppm)
		need := time.Duration(float64(d.Abs())*1e6/rate) + 2*s
		prev := c.Offset()
		for base.Elapsed() < need {
			dt := time.Duration(1 + rng.Int64N(int64(need)/20))
			base.Advance(dt)
			off := c.Offset()
			moved := (off - prev).Abs()
			bound := time.Duration(float64(dt)*rate/1e6) + 1
			if moved > bound {
				t.Fatalf("seed %d trial %d: Slew(%v, %v) moved %v in %v, bound %v", seed, trial, d, ppm, moved, dt, bound)
			}
			if (d >= 0 && off < prev) || (d < 0 && off > prev) {
				t.Fatalf("seed %d trial %d: Slew(%v, %v) reversed: %v -> %v", seed, trial, d, ppm, prev, off)
			}
			prev = off
		}
		if prev != d {
			t.Fatalf("seed %d trial %d: Slew(%v, %v) ended at %v", seed, trial, d, ppm, prev)
		}
	}
}

func TestJitter(t *testing.T) {
	read := func(seed uint64) []int64 {
		base := faults.NewVirtual(t0, false)
		c := faults.New(base)
		c.Jitter(5*ms, rand.New(rand.NewPCG(seed, seed)))
		var out []int64
		for range 100 {
			w, m := c.Now()
			bw, bm := base.Now()
			if w < bw || w > bw+int64(5*ms) || m != bm {
				t.Fatalf("seed %d: reading (%d, %d) outside base (%d, %d) + [0, 5ms]", seed, w, m, bw, bm)
			}
			if c.Offset() != 0 {
				t.Fatalf("seed %d: Offset %v includes jitter", seed, c.Offset())
			}
			out = append(out, w-bw)
			base.Advance(ms)
		}
		return out
	}
	a, b, other := read(7), read(7), read(8)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different readings")
	}
	if slices.Equal(a, other) {
		t.Fatal("different seeds gave the same readings")
	}
	c := faults.New(faults.NewVirtual(t0, false))
	c.Jitter(5*ms, rand.New(rand.NewPCG(1, 1)))
	c.Freeze(0)
	w1, _ := c.Now()
	w2, _ := c.Now()
	if w1 != w2 {
		t.Fatalf("jitter applied while frozen: %d, %d", w1, w2)
	}
	c.Jitter(0, nil)
	if a := c.Active(); len(a) != 1 || a[0].Kind != faults.KindFreeze {
		t.Fatalf("Active after removing jitter: %v", a)
	}
}

// TestConcurrent reads and faults one clock from many goroutines while the
// base advances; run it with -race. Each reader's mono never goes back.
func TestConcurrent(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	stop := make(chan struct{})
	errs := make(chan error, 8)
	done := make(chan struct{})
	for r := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			var prev int64
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, mono := c.Now()
				if mono < prev {
					errs <- fmt.Errorf("reader %d: mono went back %d -> %d", r, prev, mono)
					return
				}
				prev = mono
				if i%16 == 0 {
					_ = c.Offset()
					_ = c.MonoOffset()
					_ = c.Active()
				}
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		rng := rand.New(rand.NewPCG(seed, 3))
		for i := range 3000 {
			d := time.Duration(rng.Int64N(int64(s)))
			switch rng.IntN(11) {
			case 0:
				c.Step(d - s/2)
			case 1:
				c.Freeze(d)
			case 2:
				c.Leap(t0.Add(d))
			case 3:
				c.Smear(d, 2*d)
			case 4:
				c.Slew(d-s/2, 0)
			case 5:
				c.Drift(float64(rng.IntN(200) - 100))
			case 6:
				c.Pause(d)
			case 7:
				c.Release()
			case 8:
				if i%50 == 0 {
					c.Revert()
				}
			case 9:
				c.Enable(rng.IntN(8) != 0)
			case 10:
				c.Jitter(ms, rand.New(rand.NewPCG(seed, uint64(i))))
			}
			base.Advance(time.Duration(rng.Int64N(int64(100 * ms))))
		}
		close(stop)
	}()
	for range 5 {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Errorf("seed %d: %v", seed, err)
	}
}

func TestSleepUsesBase(t *testing.T) {
	base := faults.NewVirtual(t0, true)
	c := faults.New(base)
	c.Pause(0)
	c.Sleep(3 * s)
	if base.Elapsed() != 3*s {
		t.Fatalf("auto base advanced %v, want 3s", base.Elapsed())
	}
	if _, mono := c.Now(); mono != 0 {
		t.Fatalf("mono %d during pause, want 0", mono)
	}

	manual := faults.NewVirtual(t0, false)
	c = faults.New(manual)
	c.Step(-time.Hour) // wall faults do not change how long Sleep takes
	woke := make(chan struct{})
	go func() { c.Sleep(2 * s); close(woke) }()
	if !manual.BlockUntilWaiters(1, 10*time.Second) {
		t.Fatal("sleeper never blocked on the base clock")
	}
	manual.Advance(2*s - 1)
	if manual.Waiters() != 1 {
		t.Fatal("woke before its deadline")
	}
	manual.Advance(1)
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("sleeper did not wake at its deadline")
	}
}

func TestBase(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	if faults.New(base).Base() != base {
		t.Fatal("Base is not the clock New wrapped")
	}
}

func TestActiveDetails(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	c.Smear(250*ms, 0)
	c.Smear(-1*s, 10*s)
	c.Slew(-2*ms, 1000)
	c.Drift(12.5)
	c.Leap(midnight.Add(time.Hour))
	c.Pause(2 * s)
	c.Freeze(0)
	base.Advance(s)
	got := c.Active()
	var lines []string
	for _, a := range got {
		lines = append(lines, string(a.Kind)+": "+a.Detail)
	}
	want := []string{
		"freeze: wall held until Release (1s so far)",
		"leap: scheduled at 2017-01-01T01:00:00Z",
		"smear: finished: net +250ms over 1 smear(s)",
		"smear: -100ms of -1s applied, over 10s",
		"slew: running: -1ms of -2ms applied at 1000ppm",
		"drift: 12.5ppm, accumulated +12.5µs",
		"pause: wall and mono held for 2s (1s so far)",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("Active:\n got %q\nwant %q", lines, want)
	}
	base.Advance(s)
	c.Release()
	base.Advance(time.Minute)
	lines = lines[:0]
	for _, a := range c.Active() {
		lines = append(lines, string(a.Kind)+": "+a.Detail)
	}
	want = []string{
		"leap: scheduled at 2017-01-01T01:00:00Z",
		"smear: finished: net -750ms over 2 smear(s)",
		"slew: finished: -2ms of -2ms applied at 1000ppm",
		"drift: 12.5ppm, accumulated +775µs",
		"pause: finished: mono lost 2s over 1 pause(s)",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("Active later:\n got %q\nwant %q", lines, want)
	}
}

func TestNewNilBase(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(nil) did not panic")
		}
	}()
	faults.New(nil)
}

func TestHold(t *testing.T) {
	base := faults.NewVirtual(t0, false)
	c := faults.New(base)
	check := func(wantKind faults.Kind, wantLeft time.Duration) {
		t.Helper()
		if k, left := c.Hold(); k != wantKind || left != wantLeft {
			t.Fatalf("Hold() = %q, %v; want %q, %v", k, left, wantKind, wantLeft)
		}
	}
	check("", 0)
	c.Freeze(0)
	check(faults.KindFreeze, -1)
	c.Pause(3 * s)
	check(faults.KindPause, 3*s)
	base.Advance(s)
	check(faults.KindPause, 2*s)
	base.Advance(2 * s)
	check(faults.KindFreeze, -1)
	c.Release()
	check("", 0)
	c.Freeze(time.Minute)
	base.Advance(time.Minute)
	check("", 0)
}
