package harness

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
)

func mustParse(t *testing.T, src string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// count runs a client's pacer over the whole run.
func count(p *plan, seed uint64) (n int, hot int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for t := p.pace(0, true, rng); t >= 0; t = p.pace(t, false, rng) {
		n++
		if p.isHot(t) {
			hot++
		}
	}
	return n, hot
}

func TestPlanFullRate(t *testing.T) {
	s := mustParse(t, `name: x
duration: 10s
nodes: [{name: a, worker: 1}]
load: {clients: 2, rate: 1000/s}
invariants: ["duplicates == 0"]
`)
	p, err := newPlan(s, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.factor != 1 {
		t.Fatalf("factor %v for a load within budget", p.factor)
	}
	n, _ := count(p, 1)
	// 500/s per client for 10 s: 5000 give or take the jitter.
	if n < 4700 || n > 5300 {
		t.Fatalf("%d arrivals, want about 5000", n)
	}
	m, _ := count(p, 1)
	if m != n {
		t.Fatal("the pacer is not deterministic")
	}
}

// TestPlanSampling: a long quiet run is sampled down to the budget while
// the hot span around the fault keeps the full rate.
func TestPlanSampling(t *testing.T) {
	s := mustParse(t, `name: x
duration: 10h
nodes: [{name: a, worker: 1}]
load: {clients: 1, rate: 1000/s}
faults: [{at: 5h, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
simulation: {budget: 20000, hot: 1s}
`)
	p, err := newPlan(s, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.factor >= 0.01 || p.factor <= 0 {
		t.Fatalf("factor %v", p.factor)
	}
	n, hot := count(p, 2)
	if n > 25000 || n < 15000 {
		t.Fatalf("%d arrivals for a budget of 20000", n)
	}
	// Two hot spans (the start of the load and the fault), 1.1 s each at
	// 1000/s.
	if hot < 2000 || hot > 2400 {
		t.Fatalf("%d arrivals in the hot spans, want about 2200", hot)
	}
	q, err := newPlan(s, false)
	if err != nil || q.factor != 1 {
		t.Fatalf("real mode is never sampled: %v %v", q.factor, err)
	}
}

func TestPlanMaxStage(t *testing.T) {
	s := mustParse(t, `name: x
duration: 2s
nodes: [{name: a, worker: 1}]
load:
  stages: [{rate: 10/s, for: 1s}, {rate: max, for: 1ms}, {rate: 10/s}]
invariants: ["duplicates == 0"]
`)
	p, err := newPlan(s, true)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	if got := p.pace(time.Second, true, rng); got != time.Second {
		t.Fatalf("a max stage sends at once: %v", got)
	}
	if got := p.after(time.Second, time.Second, false, rng); got != time.Second+p.service {
		t.Fatalf("after an answer: %v", got)
	}
	if got := p.after(time.Second+time.Millisecond-1, time.Second+time.Millisecond, false, rng); got <= time.Second+time.Millisecond {
		t.Fatalf("after the stage: %v", got)
	}
}
