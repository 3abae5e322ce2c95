// Package extclock carries clock faults to processes the harness did not
// write: a Host keeps the fault model (a faults.Clock over the system
// clock, the one definition of what each fault does) and publishes the
// host's wall clock as a State, a linear function of real time, to Sinks
// (a libfaketime timestamp file, a Go clock page) that child processes
// read on every wall-clock reading.
//
// What maps, and how exactly (e is real time since the fault):
//
//	fault          published as                              exact to
//	step           offset                                    the write (one rename or store)
//	freeze         a frozen wall, then the offset again      the write; the end to timer latency
//	leap           the offset -1 s when the wall reaches at  timer latency (the wall runs past at meanwhile)
//	smear          a rate 1 + d/window until the window ends the write; re-anchored at every change
//	slew           a rate 1 ± ppm/1e6 until d is covered     the write; re-anchored at every change
//	drift          a rate 1 + ppm/1e6                        the write
//	revert         offset 0, rate 1                          the write
//	pause          not mapped: ErrPause
//
// A VM pause stops the guest's monotonic clock too, and an outside process
// keeps the host's monotonic clock (libfaketime is run with
// FAKETIME_DONT_FAKE_MONOTONIC, and the Go route fakes only the wall
// clock); stopping the process (SIGSTOP) would pause it without pausing its
// clocks, a different fault. So pause is refused rather than approximated.
package extclock

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// State is a host's wall clock as a function of real time t (Unix ns):
//
//	wall(t) = t + Offset + (t - At)·PPB/1e9   unless Frozen
//	wall(t) = At + Offset                      when Frozen
type State struct {
	// At is the real wall time (Unix ns) at which Offset holds.
	At int64
	// Offset is the wall clock's error at At.
	Offset time.Duration
	// PPB is how much faster than real time the wall runs, in parts per
	// billion (negative: slower).
	PPB int64
	// Frozen holds the wall at At + Offset.
	Frozen bool
}

// Wall returns the wall reading the state gives at real time t (Unix ns).
func (s State) Wall(t int64) int64 {
	if s.Frozen {
		return s.At + int64(s.Offset)
	}
	return t + int64(s.Offset) + Scale(t-s.At, s.PPB)
}

// Hold returns s with a frozen wall held no earlier than real time
// now+lead (Unix ns): published just after now, with lead covering the
// publish, no process reads a later time from the state before than the
// one it then holds, so a freeze never shows a process a step back. A
// running state is returned as it is.
func (s State) Hold(now int64, lead time.Duration) State {
	if s.Frozen && s.At < now+int64(lead) {
		s.At = now + int64(lead)
	}
	return s
}

// ErrLate: a freeze landed after the instant it holds, so a process may
// have read a later time first (a step back the fault did not ask for).
var ErrLate = errors.New("extclock: a freeze landed after the instant it holds")

// Scale returns d·ppb/1e9 without overflow for |d| < 2^63 and |ppb| <= 1e9.
func Scale(d, ppb int64) int64 {
	return (d/1e9)*ppb + (d%1e9)*ppb/1e9
}

// Sink receives every State a Host publishes. Publish must not block for
// long: it runs under the Host's lock.
type Sink interface {
	Publish(State) error
}

// Errors.
var (
	// ErrPause: a VM pause cannot be applied to an outside process.
	ErrPause = errors.New("extclock: a VM pause cannot reach an outside process (its monotonic clock is the host's)")
	// ErrClosed: the host is closed.
	ErrClosed = errors.New("extclock: host closed")
)

// Host is the clock of a host whose processes run outside the harness.
// Its fault methods mirror faults.Clock's; each publishes the new State to
// every sink at once, and a background goroutine publishes again at each
// instant the state changes by itself (a freeze, smear or slew ending, a
// leap second falling due). Safe for concurrent use.
type Host struct {
	real generator.Clock
	// Clock is the fault model; read it for the offset a process should
	// show now.
	Clock *faults.Clock

	mu struct {
		sync.Mutex
		sinks   []Sink
		probes  map[Sink]bool // the sinks added by AddProbe
		smears  []rateSpan    // in progress
		slew    rateSpan      // outstanding slew (ppb 0: none)
		slewRem int64         // ns still to slew at slew.start
		drift   int64         // ppb
		frozen  int64         // real mono ns at which a freeze ends; -1: until revert; 0: none
		leaps   []int64       // pending leap instants (Unix ns, host wall)
		closed  bool
		last    State
		err     error // the last publish error
		// slowest is the longest a publish to every sink has taken: a
		// freeze is held three times that (at least MinLead) ahead.
		slowest time.Duration
	}
	wake chan struct{}
	done chan struct{}
}

// rateSpan is a rate in force from start until end (real mono ns).
type rateSpan struct {
	ppb        int64
	start, end int64
}

// New returns a host over the real (system) clock whose wall starts offset
// from real time; it publishes to the sinks added later with Add.
func New(real generator.Clock, offset time.Duration) *Host {
	h := &Host{real: real, Clock: faults.New(real), wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.Clock.Step(offset)
	go h.loop()
	return h
}

// Add publishes the current state to s and every later one; the error is
// s's first Publish error.
func (h *Host) Add(s Sink) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return ErrClosed
	}
	h.mu.sinks = append(h.mu.sinks, s)
	return s.Publish(h.stateLocked())
}

// AddProbe is Add for the sink of a probe beside the processes: it is
// published to after the processes' sinks, and its errors and lateness
// are not the host's (Err), since no process of the host reads it.
func (h *Host) AddProbe(s Sink) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return ErrClosed
	}
	if h.mu.probes == nil {
		h.mu.probes = map[Sink]bool{}
	}
	h.mu.probes[s] = true
	h.mu.sinks = append(h.mu.sinks, s)
	return s.Publish(h.stateLocked())
}

// Remove stops publishing to s.
func (h *Host) Remove(s Sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.mu.sinks {
		if x == s {
			h.mu.sinks = append(h.mu.sinks[:i:i], h.mu.sinks[i+1:]...)
			return
		}
	}
}

// State returns the state published now.
func (h *Host) State() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stateLocked()
}

// Lead returns how far the wall the sinks were given now lies ahead of the
// model (a held freeze; 0 when running).
func (h *Host) Lead() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, _ := h.real.Now()
	if !h.mu.last.Frozen {
		return 0
	}
	return time.Duration(h.mu.last.Wall(w) - (w + int64(h.Clock.Offset())))
}

// Published returns the state last published to the sinks.
func (h *Host) Published() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.last
}

// Err returns the last error a sink returned while publishing (nil when
// every publish succeeded).
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.err
}

// Step moves the wall by d at once.
func (h *Host) Step(d time.Duration) error {
	return h.change(func(int64) { h.Clock.Step(d) })
}

// Freeze holds the wall for d (d <= 0: until Revert).
func (h *Host) Freeze(d time.Duration) error {
	return h.change(func(mono int64) {
		h.Clock.Freeze(d)
		h.mu.frozen = -1
		if d > 0 {
			h.mu.frozen = mono + int64(d)
		}
	})
}

// Leap inserts a leap second when the host's wall reaches at.
func (h *Host) Leap(at time.Time) error {
	return h.change(func(int64) {
		h.Clock.Leap(at)
		h.mu.leaps = append(h.mu.leaps, at.UnixNano())
	})
}

// Smear moves the wall by d spread linearly over window (as
// faults.Clock.Smear, whose rules it follows).
func (h *Host) Smear(d, window time.Duration) error {
	return h.change(func(mono int64) {
		h.Clock.Smear(d, window)
		w := int64(window)
		if d < 0 && w < -int64(d) {
			w = -int64(d)
		}
		if d == 0 || w <= 0 {
			return
		}
		h.mu.smears = append(h.mu.smears, rateSpan{ppb: ratePPB(float64(d) / float64(w) * 1e9), start: mono, end: mono + w})
	})
}

// Slew moves the wall by d at ppm parts per million (0: 500), adding to a
// slew in progress as faults.Clock.Slew does.
func (h *Host) Slew(d time.Duration, ppm float64) error {
	return h.change(func(mono int64) {
		h.Clock.Slew(d, ppm)
		if ppm == 0 {
			ppm = faults.DefaultSlewPPM
		}
		rate := ratePPB(math.Abs(ppm) * 1000)
		rate = min(max(rate, 1), 1e9)
		rem := h.mu.slewRem
		if s := h.mu.slew; s.ppb != 0 {
			done := Scale(mono-s.start, abs(s.ppb))
			if rem < 0 {
				rem = min(rem+done, 0)
			} else {
				rem = max(rem-done, 0)
			}
		}
		rem += int64(d)
		h.mu.slewRem = rem
		if rem == 0 {
			h.mu.slew = rateSpan{}
			return
		}
		sign := int64(1)
		if rem < 0 {
			sign = -1
		}
		// the slew ends when |rem| has been covered at rate ppb
		end := mono + int64(math.Ceil(float64(abs(rem))*1e9/float64(rate)))
		h.mu.slew = rateSpan{ppb: sign * rate, start: mono, end: end}
	})
}

// Drift makes the wall run ppm parts per million fast (negative: slow).
func (h *Host) Drift(ppm float64) error {
	return h.change(func(int64) {
		h.Clock.Drift(ppm)
		h.mu.drift = min(max(ratePPB(ppm*1000), -1e9), 1e9)
	})
}

// Revert removes every fault.
func (h *Host) Revert() error {
	return h.change(func(int64) {
		h.Clock.Revert()
		h.mu.smears, h.mu.slew, h.mu.slewRem, h.mu.drift, h.mu.frozen, h.mu.leaps = nil, rateSpan{}, 0, 0, 0, nil
	})
}

// Close stops the background publisher; the sinks keep the last state.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.mu.closed {
		h.mu.closed = true
		close(h.done)
	}
}

// change applies f (with the real monotonic reading) and publishes.
func (h *Host) change(f func(mono int64)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return ErrClosed
	}
	_, mono := h.real.Now()
	f(mono)
	err := h.publishLocked()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return err
}

// Freeze leads: how far after a publish starts a freeze holds the wall
// (see State.Hold): three times the slowest publish seen, within these,
// and at most half the freeze (so that its end still steps forward).
const (
	MinLead = 5 * time.Millisecond
	MaxLead = 20 * time.Millisecond
)

// publishLocked sends the current state to every sink, the processes'
// before the probes'. A freeze is held a lead ahead of the instant the
// publish starts (State.Hold); one whose publish to a process's sink
// still ended after its held instant is an error wrapping ErrLate.
func (h *Host) publishLocked() error {
	st := h.stateLocked()
	t0, mono := h.real.Now()
	lead := min(max(3*h.mu.slowest, MinLead), MaxLead)
	if h.mu.frozen > 0 {
		lead = min(lead, time.Duration(h.mu.frozen-mono)/2)
	}
	st = st.Hold(t0, lead)
	h.mu.last = st
	var errs []error
	done := t0
	for _, s := range h.mu.sinks {
		err := s.Publish(st)
		if h.mu.probes[s] {
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		done, _ = h.real.Now()
	}
	h.mu.slowest = max(h.mu.slowest, time.Duration(done-t0))
	if st.Frozen && done > st.At {
		errs = append(errs, fmt.Errorf("%w: the publish ended %s after the held instant (lead %s)", ErrLate, time.Duration(done-st.At), lead))
	}
	err := errors.Join(errs...)
	if err != nil {
		h.mu.err = err
	}
	return err
}

// stateLocked reads the model now: the offset from the fault clock, the
// rate from the spans in force, and drops the spans that have ended.
func (h *Host) stateLocked() State {
	if w0, _ := h.real.Now(); len(h.mu.leaps) > 0 && h.mu.last.At != 0 {
		// A leap the published wall has reached is one the fault clock
		// fires at its next reading (the one below).
		prev := h.mu.last.Wall(w0)
		keep := h.mu.leaps[:0]
		for _, l := range h.mu.leaps {
			if prev < l {
				keep = append(keep, l)
			}
		}
		h.mu.leaps = keep
	}
	off := h.Clock.Offset()
	wall, mono := h.real.Now()
	st := State{At: wall, Offset: off}
	if h.mu.frozen != 0 && (h.mu.frozen < 0 || mono < h.mu.frozen) {
		st.Frozen = true
		return st
	}
	h.mu.frozen = 0
	keep := h.mu.smears[:0]
	for _, s := range h.mu.smears {
		if mono < s.end {
			st.PPB += s.ppb
			keep = append(keep, s)
		}
	}
	h.mu.smears = keep
	if s := h.mu.slew; s.ppb != 0 {
		if mono < s.end {
			st.PPB += s.ppb
		} else {
			h.mu.slew, h.mu.slewRem = rateSpan{}, 0
		}
	}
	st.PPB += h.mu.drift
	return st
}

// nextLocked returns how long until the state changes by itself, or -1.
func (h *Host) nextLocked() time.Duration {
	wall, mono := h.real.Now()
	next := int64(-1)
	at := func(t int64) {
		if t > mono && (next < 0 || t < next) {
			next = t
		}
	}
	if h.mu.frozen > 0 {
		at(h.mu.frozen)
	}
	for _, s := range h.mu.smears {
		at(s.end)
	}
	if h.mu.slew.ppb != 0 {
		at(h.mu.slew.end)
	}
	st := h.mu.last
	for _, l := range h.mu.leaps {
		// real time at which the published wall reaches l
		w := st.Wall(wall)
		if st.Frozen {
			continue
		}
		d := float64(l-w) / (1 + float64(st.PPB)/1e9)
		at(mono + int64(math.Max(d, 0)) + 1)
	}
	if next < 0 {
		return -1
	}
	return time.Duration(next - mono)
}

// loop publishes at every instant the state changes by itself.
func (h *Host) loop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		h.mu.Lock()
		d := h.nextLocked()
		h.mu.Unlock()
		if d < 0 {
			d = time.Hour
		}
		t.Reset(d)
		select {
		case <-h.done:
			return
		case <-h.wake:
		case <-t.C:
			h.mu.Lock()
			if !h.mu.closed {
				_ = h.publishLocked() // kept in h.mu.err
			}
			h.mu.Unlock()
		}
	}
}

// ratePPB rounds a rate in parts per billion.
func ratePPB(v float64) int64 {
	if math.IsNaN(v) {
		return 0
	}
	return int64(math.Round(v))
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// String describes the state for logs and errors.
func (s State) String() string {
	if s.Frozen {
		return fmt.Sprintf("frozen at %s", time.Unix(0, s.At+int64(s.Offset)).UTC().Format(time.RFC3339Nano))
	}
	if s.PPB == 0 {
		return fmt.Sprintf("offset %s", s.Offset)
	}
	return fmt.Sprintf("offset %s at %s, rate %+.3f ppm", s.Offset, time.Unix(0, s.At).UTC().Format(time.RFC3339Nano), float64(s.PPB)/1000)
}
