package loadgen

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Stage is one stretch of an open-model load: the rate moves linearly from
// From to To requests per second over Duration (From == To: constant).
type Stage struct {
	// From and To are the rates at the stage's start and end, in
	// requests per second; both in [0, MaxRate].
	From, To float64
	// Duration is the stage's length; > 0.
	Duration time.Duration
}

// MaxRate bounds a stage's rates: one request per nanosecond.
const MaxRate = 1e9

// Constant is a stage at a fixed rate.
func Constant(rate float64, d time.Duration) Stage { return Stage{From: rate, To: rate, Duration: d} }

// Ramp is a stage whose rate moves linearly from one rate to another.
func Ramp(from, to float64, d time.Duration) Stage { return Stage{From: from, To: to, Duration: d} }

// String describes the stage, e.g. "1000/s for 10s" or "1000→5000/s over 5s".
func (s Stage) String() string {
	if s.From == s.To {
		return fmt.Sprintf("%g/s for %v", s.From, s.Duration)
	}
	return fmt.Sprintf("%g→%g/s over %v", s.From, s.To, s.Duration)
}

// Ramps are paced in constant steps of rampStep (at most maxRampSteps a
// ramp), each at the ramp's rate at the step's middle, so the hits over
// each step are the ramp's.
const (
	rampStep     = 10 * time.Millisecond
	maxRampSteps = 1000
)

// StagedPacer is a vegeta.Pacer for a sequence of stages, constant rates
// and linear ramps one after another, that stops the attack after the
// last. Every hit is timed by vegeta's ConstantPacer: a constant stage is
// one, a ramp a run of short ones (vegeta's LinearPacer is no ramp: it
// takes a zero start rate for no limit, and from 1/s rising by 100/s² it
// waits 2 s, then sends 200 hits at once). Like every vegeta pacer it
// never reads a clock.
type StagedPacer struct {
	stages []Stage
	steps  []step
	total  time.Duration
}

// step is one constant-rate stretch of a StagedPacer.
type step struct {
	start, end time.Duration
	// pacer times the step's hits; Freq 0: a pause.
	pacer vegeta.ConstantPacer
	// base is the whole hits due before the step; phase the fraction of
	// one more, as the pacer's elapsed time at the step's start.
	base  uint64
	phase time.Duration
}

var _ vegeta.Pacer = (*StagedPacer)(nil)

// NewStagedPacer validates the stages and returns their pacer.
func NewStagedPacer(stages ...Stage) (*StagedPacer, error) {
	if len(stages) == 0 {
		return nil, fmt.Errorf("%w: no stages", ErrConfig)
	}
	p := &StagedPacer{stages: stages}
	var due float64 // hits due before the next step
	for i, s := range stages {
		if s.Duration <= 0 || !(s.From >= 0 && s.From <= MaxRate) || !(s.To >= 0 && s.To <= MaxRate) {
			return nil, fmt.Errorf("%w: stage %d: %v (want rates in [0, %g] and a positive duration)", ErrConfig, i, s, float64(MaxRate))
		}
		n := 1
		if s.From != s.To {
			n = int(min(max((s.Duration+rampStep-1)/rampStep, 1), maxRampSteps))
		}
		for j := range n {
			st := step{start: p.total + s.Duration*time.Duration(j)/time.Duration(n), end: p.total + s.Duration*time.Duration(j+1)/time.Duration(n)}
			if rate := s.From + (s.To-s.From)*(float64(j)+0.5)/float64(n); rate > 0 {
				interval := time.Duration(min(math.Round(1e9/rate), 1<<62))
				st.pacer = vegeta.ConstantPacer{Freq: 1, Per: max(interval, 1)}
				whole := math.Floor(due + 1e-9)
				st.base, st.phase = uint64(whole), time.Duration(max(due-whole, 0)*float64(st.pacer.Per))
				due += float64(st.end-st.start) / float64(st.pacer.Per)
			} else {
				st.base = uint64(math.Floor(due + 1e-9))
			}
			p.steps = append(p.steps, st)
		}
		p.total += s.Duration
	}
	return p, nil
}

// String lists the stages.
func (p *StagedPacer) String() string {
	parts := make([]string, len(p.stages))
	for i, s := range p.stages {
		parts[i] = s.String()
	}
	return "Staged{" + strings.Join(parts, ", ") + "}"
}

// Duration is the total length of the stages.
func (p *StagedPacer) Duration() time.Duration { return p.total }

// stepAt returns the index of the step running at t (len(steps) past the
// end).
func (p *StagedPacer) stepAt(t time.Duration) int {
	return sort.Search(len(p.steps), func(i int) bool { return p.steps[i].end > t })
}

// Rate returns the paced rate at elapsed time t, per second (0 outside
// the stages).
func (p *StagedPacer) Rate(t time.Duration) float64 {
	i := p.stepAt(t)
	if t < 0 || i == len(p.steps) || p.steps[i].pacer.Freq == 0 {
		return 0
	}
	return p.steps[i].pacer.Rate(t)
}

// Pace returns how long to wait before the next hit, given the elapsed time
// and the hits sent so far; it stops after the last stage.
func (p *StagedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	for i := p.stepAt(max(elapsed, 0)); i < len(p.steps); i++ {
		st := &p.steps[i]
		at := max(elapsed, st.start)
		if hits < st.base {
			return at - elapsed, false // behind: hit now
		}
		if st.pacer.Freq == 0 {
			continue // a pause
		}
		// The step's pacer counts its own hits from the fraction due at
		// its start; a wait that ends past the step goes to the next.
		w, stop := st.pacer.Pace(at-st.start+st.phase, hits-st.base)
		if !stop && at+w <= st.end {
			return at + w - elapsed, false
		}
	}
	return 0, true
}
