package harness

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Real mode runs on the operating system's timers and scheduler, whose
// jitter shows in every timing figure: a client that sleeps until its
// next request wakes late, a goroutine made runnable waits for a CPU. A
// real-mode suite therefore starts with a calibration of the machine
// (Calibrate) and judges timing and liveness invariants with the
// tolerance it derives; safety invariants (duplicates, order and restart
// violations, and every other count) never get one.

// Calibration bounds.
const (
	// CalibrationSamples is how many 1 ms sleeps, and how many goroutine
	// wake-ups, a calibration measures (about 1.2 s on an idle machine).
	CalibrationSamples = 1000
	// CalibrationSleep is the sleep whose overshoot is measured.
	CalibrationSleep = time.Millisecond
	// ToleranceFactor multiplies the worst measured jitter: a run's
	// figures are maxima over thousands of requests in several goroutines
	// at once, so they reach deeper into the tail than the calibration's
	// samples do.
	ToleranceFactor = 3
	// ToleranceStep rounds the tolerance up, so that small differences
	// between calibrations do not change the bounds' printed form.
	ToleranceStep = time.Millisecond
	// MaxTolerance bounds the tolerance: on a machine whose jitter calls
	// for more, a timing figure says nothing about the target, and the
	// timing checks are unknown (with the reason) instead of passing.
	MaxTolerance = 200 * time.Millisecond
)

// Jitter is a distribution of measured delays.
type Jitter struct {
	P50 Duration `json:"p50_seconds"`
	P99 Duration `json:"p99_seconds"`
	Max Duration `json:"max_seconds"`
}

// String renders the distribution.
func (j Jitter) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", j.P50, j.P99, j.Max)
}

// Calibration is the timer and scheduling jitter of the machine, measured
// at the start of a real-mode suite, and the tolerance derived from it.
type Calibration struct {
	// Samples is how many sleeps and wake-ups were measured.
	Samples int `json:"samples"`
	// Sleep is how late a 1 ms sleep returns.
	Sleep Jitter `json:"sleep_overshoot"`
	// Wake is how long a goroutine blocked on a channel takes to run
	// after another goroutine sends to it.
	Wake Jitter `json:"wake_latency"`
	// Tolerance is ToleranceFactor x (Sleep.Max + Wake.Max), rounded up
	// to ToleranceStep: what a timing bound is widened by (and a
	// negative control's timing expectation tightened by).
	Tolerance Duration `json:"tolerance_seconds"`
	// TooNoisy is set when the tolerance would exceed MaxTolerance: a
	// timing check then gets a verdict only where no jitter up to Wanted
	// could have changed it (see decideNoisy), else unknown.
	TooNoisy bool `json:"too_noisy,omitempty"`
	// Wanted is the tolerance the formula gives before the MaxTolerance
	// bound.
	Wanted Duration `json:"wanted_tolerance_seconds"`
	// Took is how long the calibration took.
	Took Duration `json:"took_seconds"`
}

// String renders the calibration for a report line.
func (c *Calibration) String() string {
	s := fmt.Sprintf("real-mode calibration (%d samples): 1ms sleep overshoot %s; goroutine wake-up %s; timing tolerance %d x (%s + %s) = %s",
		c.Samples, c.Sleep, c.Wake, ToleranceFactor, c.Sleep.Max, c.Wake.Max, c.Tolerance)
	if c.TooNoisy {
		s += fmt.Sprintf(" (wanted %s, above %s: a timing check is decided only where that much jitter could not change it)", c.Wanted, Duration(MaxTolerance))
	}
	return s
}

// Prober measures the machine: Sleep sleeps for d and returns how long it
// took; Wake makes a blocked goroutine runnable and returns how long it
// took to run. Tests replace it.
type Prober interface {
	Sleep(d time.Duration) time.Duration
	Wake() time.Duration
}

// systemProber measures the real timers and scheduler.
type systemProber struct{}

func (systemProber) Sleep(d time.Duration) time.Duration {
	t := time.Now()
	time.Sleep(d)
	return time.Since(t)
}

func (systemProber) Wake() time.Duration {
	ch := make(chan time.Time)
	got := make(chan time.Duration, 1)
	go func() { got <- time.Since(<-ch) }()
	time.Sleep(100 * time.Microsecond) // let the receiver block
	ch <- time.Now()
	return <-got
}

// SystemProber is the Prober of the running machine.
func SystemProber() Prober { return systemProber{} }

// Calibrate measures n sleeps of CalibrationSleep and n goroutine
// wake-ups with p and derives the tolerance; n must be in [1, 100000].
func Calibrate(p Prober, n int) (*Calibration, error) {
	if n < 1 || n > 100000 {
		return nil, fmt.Errorf("calibration: %d samples: want 1 to 100000", n)
	}
	start := time.Now()
	sleeps := make([]time.Duration, n)
	for i := range sleeps {
		sleeps[i] = max(p.Sleep(CalibrationSleep)-CalibrationSleep, 0)
	}
	wakes := make([]time.Duration, n)
	for i := range wakes {
		wakes[i] = max(p.Wake(), 0)
	}
	c := &Calibration{Samples: n, Sleep: jitterOf(sleeps), Wake: jitterOf(wakes), Took: Duration(time.Since(start))}
	c.Tolerance, c.Wanted, c.TooNoisy = tolerance(time.Duration(c.Sleep.Max) + time.Duration(c.Wake.Max))
	return c, nil
}

// tolerance derives the tolerance from the worst measured jitter: the
// tolerance used, the one wanted (before the MaxTolerance bound) and
// whether the bound cut it.
func tolerance(worst time.Duration) (used, wanted Duration, noisy bool) {
	t := min(worst, time.Hour) * ToleranceFactor
	t = max((t+ToleranceStep-1)/ToleranceStep*ToleranceStep, ToleranceStep)
	if t > MaxTolerance {
		return Duration(MaxTolerance), Duration(t), true
	}
	return Duration(t), Duration(t), false
}

// jitterOf summarizes delays (sorting ds).
func jitterOf(ds []time.Duration) Jitter {
	slices.Sort(ds)
	at := func(q float64) Duration {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return Duration(ds[min(max(i, 0), len(ds)-1)])
	}
	return Jitter{P50: at(0.50), P99: at(0.99), Max: Duration(ds[len(ds)-1])}
}

// timingMetric reports whether a metric measures time or liveness (and
// so depends on the scheduler in real mode): waits, lead (over true time
// and over the node's own clock), lag, gaps and
// availability. Every other metric is a count of what the generator did
// (duplicates, order and restart violations, IDs, refusals, lease
// events), never widened.
func timingMetric(m scenario.Metric) bool {
	switch m {
	case scenario.MetricWait, scenario.MetricLead, scenario.MetricLeadOwn, scenario.MetricLag, scenario.MetricGap, scenario.MetricAvailability:
		return true
	}
	return false
}

// widen returns expression e as real mode judges it under calibration c
// (nil: simulated mode, e unchanged) and, when it changed, the bound
// actually judged ("max_wait <= 9ms"). A timing or liveness bound moves
// by the tolerance in the direction that lets a safe target pass
// ("<= 6ms" becomes "<= 9ms", "availability == 1" becomes ">= 1 -
// share"); a negative control's expectation moves the other way, so that
// a control is only caught with a margin beyond the machine's jitter.
// Safety and count metrics are never changed. noisy is true when the
// machine is too noisy to judge a timing bound at all.
func widen(e scenario.Expr, c *Calibration, window time.Duration) (out scenario.Expr, bound string, noisy bool) {
	if c == nil || !timingMetric(e.Metric) {
		return e, "", false
	}
	if c.TooNoisy {
		return e, "", true
	}
	out, changed := shift(e, time.Duration(c.Tolerance), window, !e.Expected)
	if !changed {
		return e, "", false
	}
	return out, out.String(), false
}

// shift moves timing bound e by tolerance t (for a ratio, by the share
// of the window a stall of t costs: t / window, at least 0.001), looser
// or stricter; changed is false when the operator has no direction to
// move in ("== 0s", an exact figure made stricter).
func shift(e scenario.Expr, t, window time.Duration, loosen bool) (out scenario.Expr, changed bool) {
	d := float64(t)
	if e.Unit() == scenario.UnitRatio {
		// A stall of the tolerance's length can cost that share of the
		// window's requests (at least one request in a thousand).
		d = max(float64(t)/float64(max(window, time.Second)), 0.001)
	}
	out = e
	switch e.Op {
	case scenario.OpLE, scenario.OpLT:
		out.Value = e.Value + sign(loosen)*d
	case scenario.OpGE, scenario.OpGT:
		out.Value = e.Value - sign(loosen)*d
	case scenario.OpEQ:
		if !loosen || e.Unit() != scenario.UnitRatio || e.Value < 1 {
			return e, false
		}
		// "availability == 1" becomes ">= 1 - share".
		out.Op, out.Value = scenario.OpGE, e.Value-d
	default:
		return e, false
	}
	if loosen { // a stricter bound stays unreachable when it must
		if e.Unit() == scenario.UnitRatio {
			out.Value = min(max(out.Value, 0), 1)
		} else {
			out.Value = max(out.Value, 0)
		}
	}
	return out, true
}

// decideNoisy judges timing check e, observed v, on a machine whose
// jitter calls for tolerance t above MaxTolerance: a verdict only where
// no jitter up to t could have changed it. An invariant passes when it
// holds even tightened by t (or as written, when jitter only worsens its
// figure) and fails when it fails even widened by t; an expectation is
// caught when it holds tightened by t and escaped when it fails widened
// by t. Anything between is unknown.
func decideNoisy(e scenario.Expr, v float64, t, window time.Duration) Verdict {
	strict, _ := shift(e, t, window, false)
	loose, _ := shift(e, t, window, true)
	switch {
	case strict.Holds(v) || (worsenedOnly(e) && e.Holds(v)):
		return Pass
	case !loose.Holds(v):
		return Fail
	}
	return Unknown
}

func sign(plus bool) float64 {
	if plus {
		return 1
	}
	return -1
}

// window is the time a check's figure is taken over: the shortest
// observation window of the faults it names, or the whole run.
func window(s *scenario.Scenario, e scenario.Expr) time.Duration {
	if e.During == "" {
		return s.Duration
	}
	w := s.Duration
	for _, f := range s.FaultsNamed(e.During) {
		a, b := f.Observed(s.Duration)
		w = min(w, b-a)
	}
	return w
}

// realNA returns why scenario s's target t is n/a in mode (the
// scenario's or the target's real_na), "" when it runs.
func realNA(s *scenario.Scenario, t scenario.Target, mode scenario.Mode) string {
	switch {
	case mode != scenario.ModeReal:
		return ""
	case s.RealNA != "":
		return "not judged in real mode: " + s.RealNA
	case t.RealNA != "":
		return "not judged in real mode: " + t.RealNA
	}
	return ""
}

// Stall is the timer jitter measured while a real-mode run ran: a probe
// goroutine sleeps CalibrationSleep in a loop beside the run's clients,
// so it sees the same preemptions, and records each overshoot.
type Stall struct {
	// Samples is how many sleeps the probe measured.
	Samples int `json:"samples"`
	// Overshoot is how late they returned.
	Overshoot Jitter `json:"overshoot"`
}

// RealInfo is what a real-mode run was judged with.
type RealInfo struct {
	// Stall is the jitter measured while the run ran (nil when the run
	// did not get to start).
	Stall *Stall `json:"stall,omitempty"`
	// Tolerance is what the run's timing bounds were widened by: the
	// suite's calibration, raised when the machine got busier during
	// the run (see Calibration.during).
	Tolerance Duration `json:"tolerance_seconds"`
	// TooNoisy is set when that tolerance would exceed MaxTolerance;
	// Wanted is then the tolerance the formula gave.
	TooNoisy bool     `json:"too_noisy,omitempty"`
	Wanted   Duration `json:"wanted_tolerance_seconds,omitempty"`
	// Raised is set when the run's probe raised the tolerance above the
	// suite's calibration.
	Raised bool `json:"raised,omitempty"`
}

// String renders what the run was judged with.
func (ri *RealInfo) String() string {
	s := fmt.Sprintf("timing tolerance %s", ri.Tolerance)
	if ri.Stall != nil {
		s += fmt.Sprintf(" (1ms sleep overshoot during the run, %d samples: %s)", ri.Stall.Samples, ri.Stall.Overshoot)
	}
	if ri.TooNoisy {
		s += fmt.Sprintf(": wanted %s, above the bound: a timing check is decided only where that much jitter could not change it", ri.Wanted)
	}
	return s
}

// maxStallSamples bounds the probe's memory (a 10 min run at 1 ms).
const maxStallSamples = 700000

// stallProbe is a running probe; stop ends it and returns what it saw.
type stallProbe struct {
	quit chan struct{}
	done chan []time.Duration
	res  *Stall
}

// startStallProbe starts a probe on p.
func startStallProbe(p Prober) *stallProbe {
	quit, done := make(chan struct{}), make(chan []time.Duration, 1)
	s := &stallProbe{quit: quit, done: done}
	go func() {
		var ds []time.Duration
		for len(ds) < maxStallSamples {
			select {
			case <-quit:
				done <- ds
				return
			default:
			}
			ds = append(ds, max(p.Sleep(CalibrationSleep)-CalibrationSleep, 0))
		}
		<-quit
		done <- ds
	}()
	return s
}

// stop ends the probe (once; later calls return the same result) and
// summarizes it; nil when it measured nothing.
func (s *stallProbe) stop() *Stall {
	if s.quit == nil {
		return s.res
	}
	close(s.quit)
	s.quit = nil
	if ds := <-s.done; len(ds) > 0 {
		s.res = &Stall{Samples: len(ds), Overshoot: jitterOf(ds)}
	}
	return s.res
}

// during returns the calibration a run is judged with: c, with its
// tolerance raised when the run's own probe saw a worse overshoot than
// the calibration did (the machine got busier: other processes, the
// run's own goroutines). The formula is the calibration's, on the worse
// of the two.
func (c *Calibration) during(st *Stall) *Calibration {
	out := *c
	if st == nil || st.Overshoot.Max <= c.Sleep.Max {
		return &out
	}
	t, wanted, noisy := tolerance(time.Duration(st.Overshoot.Max) + time.Duration(c.Wake.Max))
	out.Tolerance, out.Wanted, out.TooNoisy = max(c.Tolerance, t), max(c.Wanted, wanted), noisy || c.TooNoisy
	return &out
}

// worsenedOnly reports whether scheduling jitter can only make the
// figure of invariant e look worse, never better: a wait or a gap only
// grows when the harness is late, availability only shrinks (lead and
// lag can move either way: a late client stamps a later reference).
// Such an invariant that holds as written holds whatever the noise.
func worsenedOnly(e scenario.Expr) bool {
	if e.Expected {
		return false
	}
	switch e.Metric {
	case scenario.MetricWait, scenario.MetricGap:
		return e.Op == scenario.OpLE || e.Op == scenario.OpLT
	case scenario.MetricAvailability:
		return e.Op == scenario.OpGE || e.Op == scenario.OpGT || e.Op == scenario.OpEQ
	}
	return false
}
