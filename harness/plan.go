package harness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
)

// plan is a run's load schedule: which rate each client sends at when.
//
// In simulated mode hours of scenario time must run in seconds, so the
// load is sampled: within the hot spans around each fault's hot points
// and the start of each load stage (from scenario.HotLead before to
// Simulation.Hot after) every client sends
// at the full rate; elsewhere at the full rate times factor, chosen so the
// whole run stays near Simulation.Budget requests. The verifier checks
// every ID that is issued; quiet periods just issue fewer. "max" stages are
// never sampled. Real mode runs the full rate throughout (factor 1).
type plan struct {
	duration time.Duration
	stages   []stageSpan
	hot      []span
	factor   float64
	service  time.Duration
	clients  int
	perNode  bool
	batch    int
	budget   int
	hotLen   time.Duration
	// bounds are every instant the rate may change, sorted, ending with
	// the duration.
	bounds []time.Duration
}

type stageSpan struct {
	start, end time.Duration
	rate       float64 // requests per second per client
	max        bool
}

type span struct{ start, end time.Duration }

// retryAfter is how long a client in a "max" stage waits after a failed
// request before the next one.
const retryAfter = 100 * time.Microsecond

// newPlan builds the load plan; sampled enables simulated-mode sampling.
func newPlan(s *scenario.Scenario, sampled bool) (*plan, error) {
	p := &plan{
		duration: s.Duration,
		clients:  s.Load.Clients,
		perNode:  s.Load.PerNode,
		batch:    s.Load.Batch,
		factor:   1,
		service:  s.Simulation.Service,
		budget:   s.Simulation.Budget,
		hotLen:   s.Simulation.Hot,
	}
	if p.service <= 0 {
		p.service = scenario.DefaultService
	}
	if p.budget <= 0 {
		p.budget = scenario.DefaultBudget
	}
	if p.hotLen <= 0 {
		p.hotLen = scenario.DefaultHot
	}
	var t time.Duration
	for _, st := range s.Load.Stages {
		p.stages = append(p.stages, stageSpan{start: t, end: min(t+st.For, s.Duration), rate: st.Rate / float64(p.clients), max: st.Max})
		t += st.For
	}
	// Hot spans, merged: around each fault's hot points and the start of
	// each load stage (a burst is never sampled).
	var raw []span
	for _, st := range p.stages {
		raw = append(raw, span{max(st.start-scenario.HotLead, 0), min(st.start+p.hotLen, s.Duration)})
	}
	for _, f := range s.Faults {
		for _, pt := range f.HotPoints(s.Duration) {
			raw = append(raw, span{max(pt-scenario.HotLead, 0), min(pt+p.hotLen, s.Duration)})
		}
	}
	sort.Slice(raw, func(i, j int) bool { return raw[i].start < raw[j].start })
	for _, r := range raw {
		if n := len(p.hot); n > 0 && r.start <= p.hot[n-1].end {
			p.hot[n-1].end = max(p.hot[n-1].end, r.end)
			continue
		}
		p.hot = append(p.hot, r)
	}
	bset := map[time.Duration]bool{s.Duration: true}
	for _, st := range p.stages {
		bset[st.start], bset[st.end] = true, true
	}
	for _, h := range p.hot {
		bset[h.start], bset[h.end] = true, true
	}
	for b := range bset {
		if b <= s.Duration {
			p.bounds = append(p.bounds, b)
		}
	}
	sort.Slice(p.bounds, func(i, j int) bool { return p.bounds[i] < p.bounds[j] })

	// Requests at the full rate, split into hot and quiet.
	nodes := float64(len(s.Nodes))
	streams := float64(p.clients)
	if p.perNode {
		streams *= nodes
	}
	var hotReq, quietReq float64
	for _, st := range p.stages {
		if st.max {
			hotReq += streams * float64(st.end-st.start) / float64(p.service)
			continue
		}
		hot := p.overlapHot(st.start, st.end)
		hotReq += streams * st.rate * hot.Seconds()
		quietReq += streams * st.rate * (st.end - st.start - hot).Seconds()
	}
	if !sampled {
		return p, nil
	}
	if hotReq > 20*float64(p.budget) {
		return nil, fmt.Errorf("the load needs about %.0f simulated requests at full rate around the faults, more than 20 times the budget of %d: lower the rate, shorten \"max\" stages or raise simulation.budget", hotReq, p.budget)
	}
	if hotReq+quietReq > float64(p.budget) && quietReq > 0 {
		left := max(float64(p.budget)-hotReq, float64(p.budget)/10)
		p.factor = min(1, left/quietReq)
	}
	return p, nil
}

// overlapHot returns how much of [a, b) lies in hot spans.
func (p *plan) overlapHot(a, b time.Duration) time.Duration {
	var d time.Duration
	for _, h := range p.hot {
		lo, hi := max(a, h.start), min(b, h.end)
		if hi > lo {
			d += hi - lo
		}
	}
	return d
}

// isHot reports whether t lies in a hot span.
func (p *plan) isHot(t time.Duration) bool {
	i := sort.Search(len(p.hot), func(i int) bool { return p.hot[i].end > t })
	return i < len(p.hot) && p.hot[i].start <= t
}

// at returns a client's rate (requests per second, sampled) at t and
// whether t lies in a "max" stage; rate 0 means no load.
func (p *plan) at(t time.Duration) (rate float64, isMax bool) {
	for _, st := range p.stages {
		if t >= st.start && t < st.end {
			if st.max {
				return 0, true
			}
			if p.factor < 1 && !p.isHot(t) {
				return st.rate * p.factor, false
			}
			return st.rate, false
		}
	}
	return 0, false
}

// next returns the first bound after t (the duration at the latest).
func (p *plan) next(t time.Duration) time.Duration {
	i := sort.Search(len(p.bounds), func(i int) bool { return p.bounds[i] > t })
	if i == len(p.bounds) {
		return p.duration
	}
	return p.bounds[i]
}

// pace returns a client's next arrival after t, or -1 when it sends no
// more. fresh means t is not an arrival (the start, a bound): the first
// arrival then falls at a uniformly random phase of the interval, as in a
// Poisson process; otherwise the gap is the interval times a uniform
// jitter in [0.5, 1.5). "max" stages return t itself: the caller sends as
// soon as its previous request is answered. It never reads a clock: time
// is given. It is not a vegeta.Pacer: vegeta has no jitter, and no vegeta
// attacker drives these clients (the simulation schedules them on
// virtual time).
func (p *plan) pace(t time.Duration, fresh bool, rng *rand.Rand) time.Duration {
	for t < p.duration {
		rate, isMax := p.at(t)
		b := p.next(t)
		if isMax {
			return t
		}
		if rate <= 0 {
			t, fresh = b, true
			continue
		}
		interval := float64(time.Second) / rate
		var gap float64
		if fresh {
			gap = interval * rng.Float64()
		} else {
			gap = interval * (0.5 + rng.Float64())
		}
		if gap > float64(math.MaxInt64/2) {
			gap = float64(math.MaxInt64 / 2)
		}
		nt := t + max(time.Duration(gap), 1)
		if nt < b {
			return nt
		}
		t, fresh = b, true
	}
	return -1
}

// after returns a client's next arrival after a request that arrived at
// arrive and was answered at end: the open-model pace, or in a "max"
// stage the answer plus the simulated service time (retryAfter after a
// failure). -1 means no more.
func (p *plan) after(arrive, end time.Duration, failed bool, rng *rand.Rand) time.Duration {
	if _, isMax := p.at(arrive); !isMax {
		return p.pace(arrive, false, rng)
	}
	gap := p.service
	if failed {
		gap = retryAfter
	}
	next := max(end, arrive) + gap
	if next >= p.duration {
		return -1
	}
	if _, stillMax := p.at(next); !stillMax {
		return p.pace(next, true, rng)
	}
	return next
}
