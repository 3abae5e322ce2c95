package loadgen

import (
	"fmt"
	"math"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Stage is one stretch of an open-model load: the rate moves linearly from
// From to To requests per second over Duration (From == To: constant).
type Stage struct {
	// From and To are the rates at the stage's start and end, in
	// requests per second; both >= 0.
	From, To float64
	// Duration is the stage's length; > 0.
	Duration time.Duration
}

// Constant is a stage at a fixed rate.
func Constant(rate float64, d time.Duration) Stage { return Stage{From: rate, To: rate, Duration: d} }

// Ramp is a stage whose rate moves linearly from one rate to another.
func Ramp(from, to float64, d time.Duration) Stage { return Stage{From: from, To: to, Duration: d} }

// StagedPacer is a vegeta.Pacer for a sequence of stages: constant rates
// and linear ramps, one after another. It stops the attack after the last
// stage. Like every vegeta pacer it never reads a clock: the attacker hands
// it the elapsed time and the hits so far.
type StagedPacer struct {
	stages []Stage
	starts []time.Duration // start of each stage
	before []float64       // hits expected before each stage
	total  time.Duration
}

var _ vegeta.Pacer = (*StagedPacer)(nil)

// NewStagedPacer validates the stages and returns their pacer.
func NewStagedPacer(stages ...Stage) (*StagedPacer, error) {
	if len(stages) == 0 {
		return nil, fmt.Errorf("%w: no stages", ErrConfig)
	}
	p := &StagedPacer{stages: stages}
	var at time.Duration
	var hits float64
	for i, s := range stages {
		if s.Duration <= 0 || s.From < 0 || s.To < 0 || math.IsNaN(s.From) || math.IsNaN(s.To) || math.IsInf(s.From, 0) || math.IsInf(s.To, 0) {
			return nil, fmt.Errorf("%w: stage %d: %v (want rates >= 0 and a positive duration)", ErrConfig, i, s)
		}
		p.starts = append(p.starts, at)
		p.before = append(p.before, hits)
		at += s.Duration
		hits += (s.From + s.To) / 2 * s.Duration.Seconds()
	}
	p.total = at
	return p, nil
}

// String describes the stages, e.g. "1000/s for 10s, 1000→5000/s over 5s".
func (s Stage) String() string {
	if s.From == s.To {
		return fmt.Sprintf("%g/s for %v", s.From, s.Duration)
	}
	return fmt.Sprintf("%g→%g/s over %v", s.From, s.To, s.Duration)
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

// Hits returns the number of hits expected by elapsed time t.
func (p *StagedPacer) Hits(t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	if t >= p.total {
		n := len(p.stages) - 1
		s := p.stages[n]
		return p.before[n] + (s.From+s.To)/2*s.Duration.Seconds()
	}
	i := p.stageAt(t)
	s := p.stages[i]
	x := (t - p.starts[i]).Seconds()
	slope := (s.To - s.From) / s.Duration.Seconds()
	return p.before[i] + s.From*x + slope*x*x/2
}

// stageAt returns the index of the stage running at t (0 <= t < total).
func (p *StagedPacer) stageAt(t time.Duration) int {
	for i := len(p.starts) - 1; i > 0; i-- {
		if t >= p.starts[i] {
			return i
		}
	}
	return 0
}

// Rate returns the instantaneous rate at elapsed time t, per second.
func (p *StagedPacer) Rate(t time.Duration) float64 {
	if t < 0 || t >= p.total {
		return 0
	}
	i := p.stageAt(t)
	s := p.stages[i]
	return s.From + (s.To-s.From)*float64(t-p.starts[i])/float64(s.Duration)
}

// Pace returns how long to wait before the next hit, given the elapsed time
// and the hits sent so far; it stops after the last stage.
func (p *StagedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if elapsed >= p.total {
		return 0, true
	}
	if float64(hits) < p.Hits(elapsed) {
		return 0, false // behind: hit now
	}
	// Find when the (hits+1)th hit is due: the first t with Hits(t) >=
	// hits+1, by bisection over [elapsed, total] (Hits is non-decreasing).
	want := float64(hits + 1)
	if p.Hits(p.total) < want {
		// No more hits fit in the stages: stop now (vegeta sends a hit
		// after every wait, so waiting out the rest would add one).
		return 0, true
	}
	lo, hi := elapsed, p.total
	for hi-lo > time.Microsecond {
		mid := lo + (hi-lo)/2
		if p.Hits(mid) >= want {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi - elapsed, false
}
