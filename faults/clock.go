package faults

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// DefaultSlewPPM is the slew rate Slew uses when given 0: the Linux kernel's
// maximum adjtime slew, 500 ppm (0.5 ms per second).
const DefaultSlewPPM = 500

// Active describes one fault that currently shapes a Clock's readings or is
// scheduled to.
type Active struct {
	// Kind is the fault's kind.
	Kind Kind
	// Detail says, in words, what the fault does and how far it has got.
	Detail string
	// SinceWall is the clock's wall reading (Unix ns) when the fault began
	// (for an inserted leap, its instant), or for a summary of several
	// faults, when the latest of them began.
	SinceWall int64
}

// Clock is a generator.Clock that wraps a base clock (real or Virtual) and
// injects wall-clock faults into its readings. It is safe for concurrent use;
// every reading and fault call is serialised by one mutex and reads the base
// clock exactly once.
//
// Every fault is a piecewise-linear function of the base clock's monotonic
// reading ("base time"), evaluated with exact integer arithmetic, so the
// same base readings always give the same faulted readings. Faults compose:
// the wall clock is
//
//	base wall + steps + inserted leaps + smears + slew + drift
//
// unless a Freeze holds it, and a Pause holds both readings. The monotonic
// reading follows real kernels: only Pause moves it (it keeps the time the
// pause lost); steps, freezes, leaps, smears, slews and drift act on the wall
// clock alone. Each fault's exact effect on Offset is documented on its
// method; Revert removes them all.
//
// Every parameter is accepted: the arithmetic saturates at the int64
// nanosecond range instead of wrapping, so an absurd parameter (a step of
// math.MaxInt64, a leap in the year 3000, a jitter of 292 years) gives
// readings pinned at the range's end, never a panic, a wrap-around or a
// fault that fires early. Callers facing outside input (the admin API)
// bound the parameters themselves.
//
// A new Clock is enabled. Disabling it (Enable(false)) reverts every fault
// and makes the fault methods no-ops until it is enabled again.
type Clock struct {
	base generator.Clock

	mu struct {
		sync.Mutex
		enabled bool
		faultState
	}
}

// faultState is every fault in force; its zero value is no fault.
type faultState struct {
	steps    int   // Step calls in effect
	stepped  int64 // their net, ns
	stepWall int64 // wall at the latest Step

	leaps  []leap // scheduled and inserted, ordered by at
	leaped int64  // net of inserted leaps: -1 s each

	smears     []smear // in progress, in call order
	smearDone  int64   // net of finished smears
	smearsDone int     // how many have finished
	smearWall  int64   // wall when the latest finished smear began

	slew  slew
	drift drift

	freeze *hold // nil: wall not frozen
	pause  *hold // nil: not paused

	monoLost   int64 // mono lost to finished pauses
	pausesDone int   // how many have finished
	pauseWall  int64 // wall when the latest finished pause began

	jitter    int64      // max jitter, ns; 0: none
	rng       *rand.Rand // jitter source, used under mu only
	jitterWal int64      // wall when jitter began
}

// leap is a scheduled or inserted leap second.
type leap struct {
	at    int64 // wall instant (Unix ns) at which the wall steps back 1 s
	since int64 // wall when scheduled
	fired bool  // inserted
}

// smear is a shift of d spread linearly over window ns of base time.
type smear struct {
	start  int64 // base mono
	d      int64
	window int64 // > 0, and >= -d when d < 0
	since  int64 // wall
}

// value returns the part of d applied at base mono bm.
func (s *smear) value(bm int64) int64 {
	e := max(bm-s.start, 0)
	if e >= s.window {
		return s.d
	}
	return mulDiv(s.d, e, s.window)
}

// slew moves the wall by total ns at rate ppb, starting at base mono start,
// on top of applied (the part applied before the latest Slew call).
type slew struct {
	applied int64
	total   int64 // outstanding at start
	rate    int64 // parts per billion, in [1, billion]
	start   int64 // base mono
	ppm     float64
	calls   int
	since   int64 // wall at the latest Slew call
}

// progress returns how much of total has been applied at base mono bm.
func (s *slew) progress(bm int64) int64 {
	if s.total == 0 {
		return 0
	}
	amt := mulDiv(max(bm-s.start, 0), s.rate, billion)
	if amt >= 0 && uint64(amt) >= absU(s.total) {
		return s.total
	}
	if s.total < 0 {
		return -amt
	}
	return amt
}

// drift is a constant rate error of rate ppb since base mono start, on top of
// settled (what earlier rates accumulated).
type drift struct {
	settled int64
	rate    int64 // parts per billion
	start   int64 // base mono
	ppm     float64
	since   int64 // wall
}

// value returns the drift's total contribution at base mono bm.
func (d *drift) value(bm int64) int64 {
	if d.rate == 0 {
		return d.settled
	}
	return satAdd(d.settled, mulDiv(max(bm-d.start, 0), d.rate, billion))
}

// hold is a Freeze or a Pause in progress.
type hold struct {
	start int64 // base mono
	end   int64 // base mono; -1: until Release
	wall  int64 // freeze: held wall minus steps and leaps; pause: held wall
	mono  int64 // pause: held mono
	since int64 // wall when it began
}

// New returns an enabled Clock with no faults over base, which must not be
// nil.
func New(base generator.Clock) *Clock {
	if base == nil {
		panic("faults: New with nil base clock")
	}
	c := &Clock{base: base}
	c.mu.enabled = true
	return c
}

var _ generator.Clock = (*Clock)(nil)

// Base returns the clock New wrapped.
func (c *Clock) Base() generator.Clock { return c.base }

// Now returns the faulted wall (Unix ns) and monotonic readings. It reads the
// base clock once, under the clock's mutex.
func (c *Clock) Now() (wall, mono int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.readLocked()
	if c.mu.jitter > 0 && !r.held && c.mu.freeze == nil {
		r.wall = satAdd(r.wall, int64(c.mu.rng.Uint64N(uint64(c.mu.jitter)+1)))
	}
	return r.wall, r.mono
}

// Sleep sleeps for d on the base clock, which measures it in base
// monotonic time. It never blocks longer than the base clock's Sleep(d)
// would, as generator.Clock requires, so during a Pause the sleeper wakes on
// time but reads a monotonic clock that has not moved: like a paused guest, a
// caller waiting for its own monotonic deadline keeps waiting until the pause
// ends.
func (c *Clock) Sleep(d time.Duration) { c.base.Sleep(d) }

// Enable turns fault injection on or off. Turning it off reverts every fault
// (as Revert) and makes the fault methods no-ops until it is turned on again,
// so a disabled clock reads exactly as its base.
func (c *Clock) Enable(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !on {
		c.revertLocked()
	}
	c.mu.enabled = on
}

// Enabled reports whether fault injection is on.
func (c *Clock) Enabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.enabled
}

// Step moves the wall clock by d at once, as an NTP step (settimeofday):
// negative d sets it back. Offset changes by exactly d, immediately and
// until Revert; the monotonic reading does not move. A step during a Freeze
// moves the held wall too; a step during a Pause shows when the pause ends.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled || d == 0 {
		return
	}
	r := c.readLocked()
	c.mu.steps++
	c.mu.stepped = satAdd(c.mu.stepped, int64(d))
	c.mu.stepWall = r.wall
}

// Freeze holds the wall clock at its current reading for d of base time
// (d <= 0: until Release). While frozen, Offset falls by the base time
// elapsed (the wall stands still while the base runs on); when the freeze
// ends the wall resumes where it would have been without it, so Offset
// returns to what the other faults make it. Steps and leaps during the freeze
// move the held wall; smears, slews and drift keep running underneath and
// show when it ends. The monotonic reading is unaffected. Freezing a frozen
// clock keeps the held wall and resets the end to d from now.
func (c *Clock) Freeze(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdLocked(&c.mu.freeze, d, func(r reading) hold {
		return hold{wall: satSub(satSub(r.under, c.mu.stepped), c.mu.leaped)}
	})
}

// holdLocked starts the hold in *h (a freeze or a pause) for d of base time
// (d <= 0: until Release), with the readings mk takes from now; a hold in
// progress keeps its readings and only moves its end.
func (c *Clock) holdLocked(h **hold, d time.Duration, mk func(r reading) hold) {
	if !c.mu.enabled {
		return
	}
	r := c.readLocked()
	end := endOf(r.bm, d)
	if *h != nil {
		(*h).end = end
		return
	}
	v := mk(r)
	v.start, v.end, v.since = r.bm, end, r.wall
	*h = &v
}

// Release ends a Freeze and a Pause in progress, now, as if their duration
// had run out. It is a no-op when neither is in progress.
func (c *Clock) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.readLocked()
	c.mu.freeze = nil
	if c.mu.pause != nil {
		c.endPauseLocked(r.bm)
	}
}

// Leap schedules a leap-second insertion at the wall instant at (normally a
// UTC midnight): at the first reading whose wall is at or past at, the wall
// steps back 1 s, so the second before at (23:59:59) repeats, as a kernel
// without smearing inserts a leap second. From then on Offset is 1 s lower,
// until Revert; the monotonic reading does not move. If the wall has already
// passed at, the step happens at once. Each call schedules one insertion.
// An instant beyond the int64 nanosecond range (before 1678 or after 2262)
// is clamped to the range's end, so one after 2262 stays scheduled.
func (c *Clock) Leap(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled {
		return
	}
	r := c.readLocked()
	l := leap{at: unixNano(at), since: r.wall}
	i, _ := slices.BinarySearchFunc(c.mu.leaps, l.at, func(x leap, at int64) int {
		if x.at <= at {
			return -1
		}
		return 1
	})
	c.mu.leaps = slices.Insert(c.mu.leaps, i, l)
	c.fireLeapsLocked(r.under)
}

// LeapAll schedules the same leap-second insertion (see Clock.Leap) on every
// clock; each steps back when its own wall reaches at.
func LeapAll(at time.Time, clocks ...*Clock) {
	for _, c := range clocks {
		c.Leap(at)
	}
}

// Smear moves the wall clock by d spread linearly over window of base time
// from now, as a leap smear does (Smear(-time.Second, 24*time.Hour) is
// Google's smear of an inserted leap second). During the window Offset grows
// by trunc(d·e/window) after e of base time, computed exactly in integers;
// from the window's end it stays d higher, until Revert. The wall never runs
// backwards: when d < 0 and window < |d| the window is lengthened to |d| (the
// wall then stands still for |d|). A positive d with window <= 0 applies at
// once. The monotonic reading is unaffected. Smears overlap and add up. A d
// of math.MinInt64 is taken as -math.MaxInt64.
func (c *Clock) Smear(d, window time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled || d == 0 {
		return
	}
	r := c.readLocked()
	d = max(d, -math.MaxInt64) // so that |d| is an int64
	w := int64(window)
	if d < 0 && w < -int64(d) {
		w = -int64(d)
	}
	if w <= 0 {
		c.mu.smearDone = satAdd(c.mu.smearDone, int64(d))
		c.mu.smearsDone++
		c.mu.smearWall = r.wall
		return
	}
	c.mu.smears = append(c.mu.smears, smear{start: r.bm, d: int64(d), window: w, since: r.wall})
}

// Slew moves the wall clock by d at a bounded rate, as adjtime does: ppm
// parts per million of base time (0 means DefaultSlewPPM, 500; the sign is
// ignored; rates are rounded to 0.001 ppm and clamped to [0.001, 1e6] so a
// negative slew never runs the wall backwards). After e of base time Offset
// has moved by sign(d)·min(|d|, trunc(e·ppm/1e6)); once |d| is covered it
// stays d higher, until Revert. A Slew while another is still running adds
// to what is outstanding and sets the rate for all of it, so at most one
// slew runs and the rate bound holds for the sum. The monotonic reading is
// unaffected.
func (c *Clock) Slew(d time.Duration, ppm float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled {
		return
	}
	r := c.readLocked()
	if ppm == 0 {
		ppm = DefaultSlewPPM
	}
	s := &c.mu.slew
	cur := s.progress(r.bm)
	s.applied = satAdd(s.applied, cur)
	s.total = satAdd(s.total-cur, int64(d)) // |cur| <= |total|, same sign
	s.start = r.bm
	s.rate = ppb(math.Abs(ppm), 1, billion)
	s.ppm = float64(s.rate) / 1000
	if d != 0 {
		s.calls++
		s.since = r.wall
	}
}

// Drift makes the wall clock run ppm parts per million fast (negative: slow)
// from now on, replacing any earlier drift rate; what earlier drift
// accumulated stays. After e of base time Offset has moved by
// trunc(e·ppm/1e6) beyond that, without bound, until Revert; Drift(0) stops
// the drift. ppm is rounded to 0.001 ppm and clamped to [-1e6, 1e6], so the
// wall never runs backwards. The monotonic reading is unaffected.
func (c *Clock) Drift(ppm float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled {
		return
	}
	r := c.readLocked()
	d := &c.mu.drift
	d.settled = d.value(r.bm)
	d.start = r.bm
	d.rate = ppb(ppm, -billion, billion)
	d.ppm = float64(d.rate) / 1000
	d.since = r.wall
}

// Pause simulates a VM pause of d of base time (d <= 0: until Release):
// both readings stand still, then the wall jumps to where it would have been
// (base wall plus the other faults) while the monotonic clock resumes from
// where it stopped, having lost the pause, like a guest whose monotonic clock
// did not count it. During the pause Offset and MonoOffset fall by the base
// time elapsed; after it Offset is as if there had been no pause and
// MonoOffset is d lower, until Revert. Faults injected during the pause show
// when it ends. Pausing a paused clock keeps the held readings and resets the
// end to d from now. In a single-threaded simulation a pause until Release
// lasts until the simulation itself calls Release: a caller sleeping out a
// monotonic deadline meanwhile keeps sleeping on the base clock.
func (c *Clock) Pause(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdLocked(&c.mu.pause, d, func(r reading) hold {
		return hold{wall: r.wall, mono: r.mono}
	})
}

// Jitter adds independent noise, uniform in [0, max], to every wall reading
// Now returns, drawn from rng (which the clock then owns and uses under its
// mutex; seed it, and report the seed with any failure). The noise can make
// consecutive readings go backwards by up to max. It is not applied while
// the wall is frozen or paused, and Offset excludes it. max <= 0 or a nil rng
// removes the jitter. With one goroutine reading, the same seed gives the
// same readings.
func (c *Clock) Jitter(max time.Duration, rng *rand.Rand) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.enabled {
		return
	}
	if max <= 0 || rng == nil {
		c.mu.jitter, c.mu.rng = 0, nil
		return
	}
	r := c.readLocked()
	c.mu.jitter, c.mu.rng, c.mu.jitterWal = int64(max), rng, r.wall
}

// Hold reports what holds the clock still now: KindPause while a Pause
// holds both readings, else KindFreeze while a Freeze holds the wall, else
// "" (and left 0). left is the base time until the hold ends, or -1 for a
// hold until Release. A caller that needs the wall to move within a bound
// (a generator waiting for its next tick) cannot progress while left
// exceeds that bound.
func (c *Clock) Hold() (kind Kind, left time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bm := c.readLocked().bm
	h := c.mu.pause
	kind = KindPause
	if h == nil {
		h, kind = c.mu.freeze, KindFreeze
	}
	switch {
	case h == nil:
		return "", 0
	case h.end < 0:
		return kind, -1
	}
	return kind, time.Duration(max(h.end-bm, 0))
}

// Revert removes every fault, scheduled ones included: from now on the
// clock reads exactly as its base (Offset and MonoOffset are 0). After a
// Pause this moves the monotonic reading forward by the time the pause lost;
// it never moves it back.
func (c *Clock) Revert() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revertLocked()
}

// Offset returns the clock's wall reading minus the base clock's, both read
// now: the net effect of every fault, excluding Jitter noise. A harness uses
// it to confirm a fault took effect.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.readLocked()
	return time.Duration(satSub(r.wall, r.bw))
}

// MonoOffset returns the clock's monotonic reading minus the base clock's,
// both read now. Only Pause makes it non-zero (negative: the time lost).
func (c *Clock) MonoOffset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.readLocked()
	return time.Duration(satSub(r.mono, r.bm))
}

// Active describes the faults that currently shape the readings or are
// scheduled to, in a fixed order of kind. Faults whose effect persists
// (steps, inserted leaps, finished smears and slews, accumulated drift, the
// monotonic time lost to finished pauses) are listed until Revert.
func (c *Clock) Active() []Active {
	c.mu.Lock()
	defer c.mu.Unlock()
	bm := c.readLocked().bm
	m := &c.mu
	var out []Active
	if m.steps > 0 {
		out = append(out, Active{KindStep, fmt.Sprintf("net %s over %d step(s)", signed(m.stepped), m.steps), m.stepWall})
	}
	if f := m.freeze; f != nil {
		out = append(out, Active{KindFreeze, "wall held " + holdFor(f, bm), f.since})
	}
	for _, l := range m.leaps {
		if l.fired {
			out = append(out, Active{KindLeap, fmt.Sprintf("inserted at %s: the wall stepped back 1s", stamp(l.at)), l.at})
		} else {
			out = append(out, Active{KindLeap, fmt.Sprintf("scheduled at %s", stamp(l.at)), l.since})
		}
	}
	if m.smearsDone > 0 {
		out = append(out, Active{KindSmear, fmt.Sprintf("finished: net %s over %d smear(s)", signed(m.smearDone), m.smearsDone), m.smearWall})
	}
	for i := range m.smears {
		s := &m.smears[i]
		out = append(out, Active{KindSmear, fmt.Sprintf("%s of %s applied, over %s", signed(s.value(bm)), signed(s.d), time.Duration(s.window)), s.since})
	}
	if s := &m.slew; s.calls > 0 {
		p := s.progress(bm)
		state := "running"
		if p == s.total {
			state = "finished"
		}
		out = append(out, Active{KindSlew, fmt.Sprintf("%s: %s of %s applied at %sppm", state, signed(satAdd(s.applied, p)), signed(satAdd(s.applied, s.total)), fmtPPM(s.ppm)), s.since})
	}
	if d := &m.drift; d.rate != 0 || d.settled != 0 {
		out = append(out, Active{KindDrift, fmt.Sprintf("%sppm, accumulated %s", fmtPPM(d.ppm), signed(d.value(bm))), d.since})
	}
	if p := m.pause; p != nil {
		out = append(out, Active{KindPause, "wall and mono held " + holdFor(p, bm), p.since})
	}
	if m.pausesDone > 0 {
		out = append(out, Active{KindPause, fmt.Sprintf("finished: mono lost %s over %d pause(s)", time.Duration(m.monoLost), m.pausesDone), m.pauseWall})
	}
	if m.jitter > 0 {
		out = append(out, Active{KindJitter, fmt.Sprintf("wall readings jitter by up to %s", time.Duration(m.jitter)), m.jitterWal})
	}
	return out
}

// reading is one read of the base clock and the clock's readings then.
type reading struct {
	bw, bm     int64 // base wall and mono
	wall, mono int64 // the clock's readings, before jitter
	under      int64 // the wall as it would read without a Pause
	held       bool  // a Pause holds wall and mono
}

// readLocked reads the base clock once, settles faults whose time is up,
// inserts leaps the wall has reached, and returns the readings.
func (c *Clock) readLocked() reading {
	bw, bm := c.base.Now()
	m := &c.mu
	if p := m.pause; p != nil && p.end >= 0 && bm >= p.end {
		c.endPauseLocked(p.end)
	}
	if f := m.freeze; f != nil && f.end >= 0 && bm >= f.end {
		m.freeze = nil
	}
	if len(m.smears) > 0 {
		m.smears = slices.DeleteFunc(m.smears, func(s smear) bool {
			if bm-s.start < s.window {
				return false
			}
			m.smearDone = satAdd(m.smearDone, s.d)
			m.smearsDone++
			m.smearWall = s.since
			return true
		})
	}
	r := reading{bw: bw, bm: bm}
	r.under = c.wallLocked(bw, bm)
	if c.fireLeapsLocked(r.under) {
		r.under = c.wallLocked(bw, bm)
	}
	if p := m.pause; p != nil {
		r.wall, r.mono, r.held = p.wall, p.mono, true
	} else {
		r.wall, r.mono = r.under, satSub(bm, m.monoLost)
	}
	return r
}

// wallLocked returns the wall reading at base readings (bw, bm) as it would
// be without a Pause: held by a Freeze, or base wall plus every offset.
func (c *Clock) wallLocked(bw, bm int64) int64 {
	m := &c.mu
	if f := m.freeze; f != nil {
		return satAdd(satAdd(f.wall, m.stepped), m.leaped)
	}
	off := satAdd(satAdd(m.stepped, m.leaped), m.smearDone)
	for i := range m.smears {
		off = satAdd(off, m.smears[i].value(bm))
	}
	off = satAdd(off, satAdd(m.slew.applied, m.slew.progress(bm)))
	off = satAdd(off, m.drift.value(bm))
	return satAdd(bw, off)
}

// fireLeapsLocked inserts every scheduled leap whose instant the wall has
// reached, earliest first, and reports whether any fired.
func (c *Clock) fireLeapsLocked(wall int64) bool {
	fired := false
	for i := range c.mu.leaps {
		l := &c.mu.leaps[i]
		if l.fired || wall < l.at {
			continue
		}
		l.fired = true
		c.mu.leaped = satAdd(c.mu.leaped, -int64(time.Second))
		wall = satAdd(wall, -int64(time.Second))
		fired = true
	}
	return fired
}

// endPauseLocked ends the pause in progress at base mono end, keeping the
// monotonic time it lost.
func (c *Clock) endPauseLocked(end int64) {
	p := c.mu.pause
	c.mu.monoLost = satAdd(c.mu.monoLost, max(end-p.start, 0))
	c.mu.pausesDone++
	c.mu.pauseWall = p.since
	c.mu.pause = nil
}

// endOf returns the base mono at which a hold of d starting at bm ends
// (-1: until Release).
func endOf(bm int64, d time.Duration) int64 {
	if d <= 0 {
		return -1
	}
	return satAdd(bm, int64(d))
}

// revertLocked removes every fault, leaving the enabled switch alone.
func (c *Clock) revertLocked() { c.mu.faultState = faultState{} }

// holdFor describes how long a hold lasts.
func holdFor(h *hold, bm int64) string {
	if h.end < 0 {
		return fmt.Sprintf("until Release (%s so far)", time.Duration(bm-h.start))
	}
	return fmt.Sprintf("for %s (%s so far)", time.Duration(h.end-h.start), time.Duration(bm-h.start))
}

// stamp formats a Unix ns instant as RFC 3339 UTC with nanoseconds.
func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// signed formats a duration in ns with an explicit sign.
func signed(ns int64) string {
	if ns > 0 {
		return "+" + time.Duration(ns).String()
	}
	return time.Duration(ns).String()
}

// fmtPPM formats a rate in ppm without float noise.
func fmtPPM(ppm float64) string { return strconv.FormatFloat(ppm, 'f', -1, 64) }
