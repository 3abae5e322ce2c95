package explore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// Caps is what a target lets explore generate for it.
type Caps struct {
	// Kinds are the fault kinds it takes.
	Kinds []faults.Kind
	// Lease is true when its nodes may hold a memory lease.
	Lease bool
	// Policy is true when it runs the nodes' own policies (the declared
	// target); false when the target fixes the policy (wait, refuse,
	// logical) or has none (a known-bad reference).
	Policy bool
	// Simulated is true when it runs in simulated time.
	Simulated bool
}

// policyTargets are the target names that fix a policy on the in-process
// generator.
var policyTargets = []string{"wait", "refuse", "logical"}

// CapsOf returns what explore may generate for the named target. A
// known-bad reference gets the product's space (checkpoints and leases
// included): it ignores them, which is its bug.
func CapsOf(name string) (Caps, error) {
	use := name
	policy := false
	switch {
	case slices.Contains(policyTargets, name):
		use = target.InProcessName
	case name == "declared" || name == target.InProcessName:
		use, policy = target.InProcessName, true
	}
	t, err := target.Lookup(use)
	if err != nil {
		return Caps{}, err
	}
	info := t.Info()
	c := Caps{Kinds: info.Caps.Faults, Policy: policy, Simulated: info.Caps.Simulated}
	c.Lease = info.KnownBad || slices.Contains(info.Caps.Leases, "memory")
	return c, nil
}

// Derive returns the seed of schedule i of an exploration seeded with
// seed: the same (seed, i) always gives the same schedule, whatever ran
// before it.
func Derive(seed int64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(i)^0x9e3779b97f4a7c15))
}

// Generate draws one schedule from space sp for a target with capabilities
// c, named name. The same rng state gives the same schedule. Every
// schedule keeps the configuration's promises: a restart only hits a node
// with a checkpoint or a lease (keep_checkpoint: off only with a lease), a
// clone, a handoff and the store's faults only nodes with a lease, so any
// failure of a safe target is a bug.
func Generate(rng *rand.Rand, sp Space, c Caps, tgt, name string) *Schedule {
	sp = sp.WithDefaults()
	g := gen{r: rng, sp: sp}
	s := &Schedule{Name: name, Target: tgt, Seed: rng.Int64N(1 << 31)}
	s.Duration = g.durBetween(sp.Duration.Min, sp.Duration.Max, time.Millisecond)

	// Nodes share a layout, a checkpoint setting and a lease.
	layout := pick(rng, sp.Layouts)
	l, err := generator.ParseLayout(layout)
	if err != nil {
		l = generator.DefaultLayout()
		layout = ""
	}
	l = l.Normalize()
	if layout == "41/10/12" {
		layout = ""
	}
	leases := sp.Leases
	if !c.Lease {
		leases = []string{""}
	}
	lease := pick(rng, leases)
	if lease == "none" {
		lease = ""
	}
	ttl := time.Duration(0)
	if lease != "" {
		ttl = g.durBetween(sp.LeaseTTL.Min, sp.LeaseTTL.Max, 100*time.Millisecond)
	}
	epoch := ""
	if rng.IntN(4) == 0 {
		epoch = pick(rng, epochs)
	}
	maxLead := pick(rng, sp.MaxLead)
	n := g.intBetween(sp.Nodes.Min, sp.Nodes.Max)
	maxNode := l.MaxNode()
	used := map[int64]bool{}
	for i := range n {
		nd := Node{Name: string(rune('a' + i)), Layout: layout, Epoch: epoch, Lease: lease, LeaseTTL: ttl, MaxLead: maxLead}
		nd.Checkpoint = pick(rng, sp.Checkpoint)
		if c.Policy {
			nd.Policy = pick(rng, sp.Policies)
		}
		switch rng.IntN(3) {
		case 0:
			nd.Reserve = NoReserve
		case 1:
			nd.Reserve = g.durBetween(time.Millisecond, 200*time.Millisecond, time.Millisecond)
		}
		// Workers: small ones, the field's top, and twins that differ
		// only in the field's top bit.
		var w int64
		for range 8 {
			switch k := rng.IntN(4); {
			case k == 0 && i > 0 && maxNode > 1:
				w = s.Nodes[i-1].Worker ^ ((maxNode + 1) >> 1)
			case k == 1:
				w = maxNode - rng.Int64N(min(maxNode+1, 4))
			default:
				w = rng.Int64N(min(maxNode+1, 16))
			}
			if !used[w] {
				break
			}
		}
		for used[w] {
			w = (w + 1) & maxNode
		}
		used[w] = true
		nd.Worker = w
		s.Nodes = append(s.Nodes, nd)
	}

	// Load.
	s.Load.Rate = math.Round(g.logBetween(sp.Rate.Min, sp.Rate.Max))
	s.Load.Clients = g.intBetween(sp.Clients.Min, sp.Clients.Max)
	s.Load.Batch = 1
	if sp.Batch.Max > 1 && rng.IntN(4) == 0 {
		s.Load.Batch = int(math.Round(g.logBetween(float64(max(sp.Batch.Min, 2)), float64(sp.Batch.Max))))
		s.Load.Rate = max(1, min(s.Load.Rate, math.Round(MaxIDRate/float64(s.Load.Batch))))
	}
	// Outside bursts a node is asked for at most half of what its layout
	// issues per second: a steady overload is a queue that grows for the
	// whole run, not a fault schedule.
	capacity := float64(time.Second/l.Tick) * float64(int64(1)<<l.SeqBits)
	if ids := s.Load.Rate * float64(s.Load.Batch); ids > capacity/2 {
		s.Load.Rate = max(1, math.Floor(capacity/2/float64(s.Load.Batch)))
	}
	if rng.Float64() < sp.Burst {
		perTick := float64(int64(1) << l.SeqBits)
		want := perTick * g.logBetween(0.5, 4)
		s.Load.Burst = &Burst{
			At:       g.durBetween(0, s.Duration-time.Millisecond, time.Millisecond),
			Requests: max(1, int(math.Round(want/float64(s.Load.Batch)))),
		}
	}

	// Faults.
	nf := g.intBetween(sp.Faults.Min, sp.Faults.Max)
	for range nf {
		if f, ok := g.fault(s, c); ok {
			s.Faults = append(s.Faults, f)
		}
	}
	s.Invariants = Invariants(s)
	return s
}

// Invariants are the checks a schedule is judged by: the safety
// invariants `run` judges in every scenario (no duplicate, no order or
// restart violation, no ID outside a lease) and the logical policy's
// bound on its lead over its own clock.
func Invariants(s *Schedule) []string {
	out := []string{"duplicates == 0", "order_violations == 0", "restart_violations == 0"}
	if slices.ContainsFunc(s.Nodes, func(n Node) bool { return n.Lease != "" }) {
		out = append(out, "lease_overruns == 0")
	}
	bound := time.Duration(0)
	for _, n := range s.Nodes {
		lead := n.MaxLead
		if lead == 0 {
			lead = time.Second
		}
		l, err := generator.ParseLayout(n.Layout)
		if n.Layout == "" || err != nil {
			l = generator.DefaultLayout()
		}
		bound = max(bound, lead+l.Normalize().Tick)
	}
	return append(out, "max_lead_own <= "+Dur(bound))
}

// gen draws values.
type gen struct {
	r  *rand.Rand
	sp Space
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (g gen) intBetween(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + g.r.IntN(hi-lo+1)
}

// durBetween draws uniformly in [lo, hi], in steps of unit (or of a
// microsecond, one time in four, so instants land inside milliseconds).
func (g gen) durBetween(lo, hi, unit time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	if g.r.IntN(4) == 0 {
		unit = time.Microsecond
	}
	d := lo + time.Duration(g.r.Int64N(int64(hi-lo)+1))
	return max(lo, d/unit*unit)
}

// logBetween draws log-uniformly in [lo, hi] (lo > 0): small and large
// magnitudes are equally likely.
func (g gen) logBetween(lo, hi float64) float64 {
	if hi <= lo || lo <= 0 {
		return max(lo, hi)
	}
	return math.Exp(math.Log(lo) + g.r.Float64()*(math.Log(hi)-math.Log(lo)))
}

// magnitude draws a duration log-uniformly in r, rounded to a readable
// unit (three significant digits).
func (g gen) magnitude(r DurRange) time.Duration {
	lo := max(r.Min, time.Microsecond)
	d := time.Duration(g.logBetween(float64(lo), float64(max(r.Max, lo))))
	return roundSig(d)
}

// roundSig rounds d to two significant digits.
func roundSig(d time.Duration) time.Duration {
	if d < 0 {
		return -roundSig(-d)
	}
	if d == 0 {
		return 0
	}
	unit := time.Duration(1)
	for d/unit >= 100 {
		unit *= 10
	}
	return max(d/unit*unit, 1)
}

// fault draws one fault for s, or false when no kind fits.
func (g gen) fault(s *Schedule, c Caps) (Fault, bool) {
	r := g.r
	var leased []string
	for _, n := range s.Nodes {
		if n.Lease != "" {
			leased = append(leased, n.Name)
		}
	}
	var kinds []faults.Kind
	for _, k := range g.sp.Kinds {
		spec, ok := faults.Lookup(k)
		if !ok || !spec.In(faults.InScenario) || !slices.Contains(c.Kinds, k) {
			continue
		}
		switch {
		case k == faults.KindRevert:
			if !slices.ContainsFunc(s.Faults, func(f Fault) bool { return f.Kind.Clock() && f.Kind != faults.KindRevert }) {
				continue
			}
		case k == faults.KindRestart:
			if !slices.ContainsFunc(s.Nodes, restartable) {
				continue
			}
		case spec.Scope == faults.ScopeNode || spec.Scope == faults.ScopeStore:
			if len(leased) == 0 {
				continue
			}
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return Fault{}, false
	}
	// With leases, one fault in three is of the lease's world (restarts,
	// clones, handoffs, the store): eleven clock kinds would drown them.
	if len(leased) > 0 && r.IntN(3) == 0 {
		if life := slices.DeleteFunc(slices.Clone(kinds), func(k faults.Kind) bool { return k.Clock() }); len(life) > 0 {
			kinds = life
		}
	}
	k := pick(r, kinds)
	f := Fault{Fault: faults.Fault{Kind: k}}
	// Instants: anywhere, or right beside an earlier fault (overlaps).
	f.At = g.durBetween(0, s.Duration-time.Millisecond, time.Millisecond)
	if anchors := anchors(s); len(anchors) > 0 && r.IntN(2) == 0 {
		near := pick(r, anchors) + time.Duration(r.Int64N(20_000))*time.Microsecond
		if near < s.Duration {
			f.At = near
		}
	}
	sign := func() time.Duration {
		if r.IntN(10) < 7 {
			return -1
		}
		return 1
	}
	all := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		all[i] = n.Name
	}
	target := func(cands []string) []string {
		if len(cands) > 1 && r.IntN(5) == 0 {
			return append([]string(nil), cands...)
		}
		return []string{pick(r, cands)}
	}
	switch k {
	case faults.KindRevert:
		// Revert what an earlier clock fault did, a while after it.
		var prior []Fault
		for _, p := range s.Faults {
			if p.Kind.Clock() && p.Kind != faults.KindRevert {
				prior = append(prior, p)
			}
		}
		p := pick(r, prior)
		f.At = min(p.At+g.magnitude(g.sp.Span), s.Duration-time.Millisecond)
		f.Nodes = append([]string(nil), p.Nodes...)
	case faults.KindStep:
		f.By = sign() * g.magnitude(g.sp.Shift)
	case faults.KindFreeze:
		// Always bounded: a freeze held to the end would hide every later
		// clock fault on its node, leaving them unconfirmed.
		f.For = g.magnitude(g.sp.Span)
	case faults.KindSmear:
		f.Window = max(g.magnitude(g.sp.Span), 2*time.Millisecond)
		f.By = sign() * min(g.magnitude(g.sp.Shift), f.Window/2)
		f.By = max(f.By, -f.Window/2)
		if f.By == 0 {
			f.By = time.Millisecond
		}
	case faults.KindSlew:
		f.By = sign() * g.magnitude(g.sp.Shift)
		if r.IntN(2) == 0 {
			f.PPM = math.Round(g.logBetween(50, min(faults.MaxPPM, max(g.sp.PPM.Max, 50))))
		}
	case faults.KindDrift:
		f.PPM = float64(sign()) * math.Round(g.logBetween(max(g.sp.PPM.Min, 1), g.sp.PPM.Max))
	case faults.KindStoreDrift:
		// A store clock that matters runs percents fast, not ppm: the
		// fence's margin is 10% of the TTL.
		f.PPM = float64(sign()) * math.Round(g.logBetween(max(g.sp.PPM.Min, 1000), max(g.sp.PPM.Max, 1000)))
	case faults.KindPause:
		f.For = g.magnitude(g.sp.Span)
	case faults.KindStorePause:
		// The store's clock jumps ahead by the pause when it ends: the
		// same bound as a store step ahead.
		f.For = min(g.magnitude(g.sp.Span), max(roundSig(minTTL(s)*3/10), time.Millisecond))
	case faults.KindRestart:
		var cands []string
		for _, n := range s.Nodes {
			if restartable(n) {
				cands = append(cands, n.Name)
			}
		}
		f.Nodes = target(cands)
		if r.IntN(2) == 0 {
			f.For = g.magnitude(g.sp.Span)
		}
		leasedAll, ckptAll := true, true
		for _, name := range f.Nodes {
			n, _ := s.node(name)
			leasedAll = leasedAll && n.Lease != ""
			ckptAll = ckptAll && n.Checkpoint
		}
		crash := 4
		if s.Load.Batch > 1 {
			crash = 7 // batches are where the marks' bugs are
		}
		switch m := r.IntN(10); {
		case m < crash && ckptAll && len(g.sp.CrashPoints) > 0:
			f.Point = pick(r, g.sp.CrashPoints)
			// Batch calls: crash inside one, where a batch needs its marks.
			if s.Load.Batch > 1 && r.IntN(2) == 0 {
				for _, p := range []string{faults.PointMidBatch, faults.PointNewTick} {
					if slices.Contains(g.sp.CrashPoints, p) && r.IntN(2) == 0 {
						f.Point = p
					}
				}
			}
		case m < crash+2:
			f.Graceful = true
		case m < crash+3 && leasedAll:
			f.WipeCheckpoint = true
		}
		if r.IntN(5) == 0 {
			f.OffsetWhileDown = sign() * g.magnitude(g.sp.Shift)
		}
	case faults.KindClone:
		f.Nodes = []string{pick(r, leased)}
		if r.IntN(2) == 0 {
			f.For = g.magnitude(g.sp.Span)
		}
		f.SameHolder = r.IntN(3) == 0
	case faults.KindHandoff:
		f.Nodes = []string{pick(r, leased)}
		if r.IntN(4) > 0 {
			f.Behind = g.magnitude(g.sp.Shift)
		}
		if r.IntN(2) == 0 {
			f.Gap = g.magnitude(g.sp.Span)
		}
		// A crashed holder's lease must expire before another host can
		// take the worker ID: the gap covers the TTL.
		if n, _ := s.node(f.Nodes[0]); r.IntN(2) == 0 && n.LeaseTTL > 0 {
			f.Crash = true
			f.Gap = n.LeaseTTL + g.magnitude(DurRange{time.Millisecond, 100 * time.Millisecond})
		}
	case faults.KindStoreOutage:
		f.For = g.magnitude(g.sp.Span)
		if r.IntN(2) == 0 {
			f.Nodes = []string{pick(r, leased)}
			if r.IntN(3) == 0 {
				f.Direction = pick(r, []string{"outbound", "inbound"})
			}
		}
		f.Hang = r.IntN(3) == 0
	case faults.KindStoreStep:
		f.By = sign() * g.magnitude(g.sp.Shift)
		// The fence covers a store clock stepped ahead only up to what its
		// failure count leaves, about 0.45 of the TTL (docs/leases.md):
		// beyond that no fence on the node's clock can help.
		if lim := roundSig(minTTL(s) * 3 / 10); f.By > lim {
			f.By = max(lim, time.Microsecond)
		}
	}
	if f.Kind == faults.KindStoreDrift && f.PPM > storeFastPPM {
		f.PPM = storeFastPPM
	}
	if f.Nodes == nil && k.Clock() {
		f.Nodes = target(all)
	}
	f, ok := fit(f, s.Duration, g.sp.PPM.Max)
	if !ok || duringPause(s, f) {
		return Fault{}, false
	}
	return f, true
}

// duringPause reports whether f strikes a node while a VM pause holds it,
// or is a pause that would hold a node while another of its faults
// strikes: nothing happens on a paused VM (no restart, no NTP step), so
// such a schedule is not one a host can live through.
func duringPause(s *Schedule, f Fault) bool {
	holds := func(p Fault, at time.Duration) bool {
		return p.Kind == faults.KindPause && at >= p.At && at <= p.At+p.For
	}
	for _, o := range s.Faults {
		if !slices.ContainsFunc(o.Nodes, func(n string) bool { return slices.Contains(f.Nodes, n) }) {
			continue
		}
		if holds(o, f.At) || holds(f, o.At) {
			return true
		}
	}
	return false
}

// fit makes f end within the run: it moves f earlier, or halves its
// magnitudes until it fits; false when it cannot. A slew's rate is raised
// to fit only up to maxPPM, the space's bound (by default 100,000 ppm,
// the most Linux's tick adjustment slews a clock by: a slew past 100%
// would stop the wall clock, a freeze no NTP daemon makes).
func fit(f Fault, d time.Duration, maxPPM float64) (Fault, bool) {
	// A node started near the end must have time to serve, or its run
	// is unknown (an incarnation that never served).
	if spec, _ := faults.Lookup(f.Kind); spec.Scope == faults.ScopeNode {
		d -= 100 * time.Millisecond
	}
	for range 40 {
		sf := scenario.Fault{Fault: f.Fault, At: f.At}
		span := sf.Span(d - f.At)
		switch {
		case f.Kind == faults.KindDrift || f.Kind == faults.KindStoreDrift:
			// The harness confirms a drift once it has moved the clock
			// well past its measurement tolerance, within the run.
			if rest := (d - f.At).Seconds(); rest > 0 && max(f.PPM, -f.PPM) < 100/rest {
				f.PPM = math.Copysign(math.Ceil(100/rest), f.PPM)
			}
			return f, f.PPM <= faults.MaxPPM && f.PPM >= -faults.MaxPPM
		case (f.Kind == faults.KindFreeze || f.Kind == faults.KindClone) && f.For == 0:
			return f, true
		case f.At+span < d:
			return f, true
		case span < d:
			f.At = (d - span - 1) / time.Millisecond * time.Millisecond
			if f.At < 0 {
				f.At = 0
			}
			continue
		}
		if lim := min(faults.MaxPPM, maxPPM); f.Kind == faults.KindSlew && f.PPM < lim {
			f.PPM = min(lim, max(f.PPM, faults.DefaultSlewPPM)*4)
			continue
		}
		if f.Kind == faults.KindHandoff && f.Crash {
			return f, false
		}
		f.By, f.For, f.Window, f.Gap, f.Behind = roundSig(f.By/2), roundSig(f.For/2), roundSig(f.Window/2), roundSig(f.Gap/2), roundSig(f.Behind/2)
		f.OffsetWhileDown = roundSig(f.OffsetWhileDown / 2)
	}
	return f, false
}

// storeFastPPM is the fastest store clock a schedule draws: the fence's
// margin (10% of the TTL plus 50 ms) covers a store clock up to about 11%
// faster than the node's (docs/leases.md).
const storeFastPPM = 80_000

// minTTL is the shortest lease TTL of s's leasing nodes (the lease
// package's default, 10 s, for a node that sets none).
func minTTL(s *Schedule) time.Duration {
	ttl := time.Duration(0)
	for _, n := range s.Nodes {
		if n.Lease == "" {
			continue
		}
		t := n.LeaseTTL
		if t == 0 {
			t = 10 * time.Second
		}
		if ttl == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// anchors are the instants where something already changes: each fault's
// start and end, the burst. Faults drawn beside them overlap.
func anchors(s *Schedule) []time.Duration {
	var out []time.Duration
	for _, f := range s.Faults {
		sf := scenario.Fault{Fault: f.Fault, At: f.At}
		out = append(out, f.At)
		if span := sf.Span(s.Duration - f.At); span > 0 {
			out = append(out, f.At+span)
		}
	}
	if s.Load.Burst != nil {
		out = append(out, s.Load.Burst.At)
	}
	return out
}

// restartable reports whether a restart of n is within its promises: the
// mark survives on its disk or in its lease.
func restartable(n Node) bool { return n.Checkpoint || n.Lease != "" }

// String describes a schedule in one line: its faults and load.
func (s *Schedule) String() string {
	fs := ""
	for i, f := range s.Faults {
		if i > 0 {
			fs += " "
		}
		fs += fmt.Sprintf("%s@%s", f.Kind, Dur(f.At))
	}
	return fmt.Sprintf("%s: %d nodes, %s, %s per node, faults: %s", s.Name, len(s.Nodes), Dur(s.Duration), Rate(s.Load.Rate), fs)
}
