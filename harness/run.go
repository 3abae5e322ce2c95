package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/verify"
)

// run is the state one scenario x target run shares between the simulated
// and the real-time driver: the nodes (slots), the verifier, the faults'
// confirmation, the timeline and the history. In real mode several
// goroutines use it, so mu guards it; the simulated driver is one
// goroutine and pays only for uncontended locks.
type run struct {
	s       *scenario.Scenario
	st      scenario.Target // with the resolved overrides
	tgt     target.Target
	info    target.Info
	runID   string // Env.Run: scenario/target/seed/sequence
	opts    *Options
	mode    scenario.Mode
	seed    int64
	plan    *plan
	ctx     context.Context
	start   time.Time // reference wall time at offset 0
	startNs int64
	tol     time.Duration
	// expectDups is true when the target is expected to issue duplicates
	// (fail-fast then does not stop on them).
	expectDups bool
	// now returns the run's current offset (reference time since start).
	now func() time.Duration

	mu struct {
		sync.Mutex
		v       *verify.Verifier
		slots   []*slot
		faults  []FaultResult // by scenario fault index
		tl      *timeline
		stopped bool
	}
	leases *lease.Memory
	// lease is what the run's lease keepers did, for the report; guarded
	// by the lifecycle (one goroutine at a time).
	lease   leaseLog
	hist    *historyWriter
	metrics *telemetry.HarnessMetrics
	gens    *telemetry.GeneratorCollector
	hosts   int // hosts made so far, for names
	// life serialises lifecycle changes (faults) with real-mode clients
	// reading the slots.
	life sync.RWMutex
}

// slot is one node position: a declared node, or a clone. It keeps its
// name across restarts and handoffs (new incarnations).
type slot struct {
	idx         int
	name        string
	spec        target.NodeSpec
	node        target.Node // nil when the target failed to start it
	up          bool        // serving requests
	clone       bool
	alive       bool // false once a clone has ended
	incarnation int
	issuer      verify.IssuerID
	worker      int64         // the worker the issuer was registered with
	pending     bool          // the issuer was registered by a start that failed
	rebinds     uint64        // the node's LeaseStats.Rebinds last seen
	poked       time.Duration // simulated: when a deferred poke is due (see sim.poke)
	gen         int           // lifecycle generation: stale events are dropped
	host        *host
	series      *NodeSeries
	nm          *telemetry.NodeMetrics
	downReason  string
}

// callee is what a request saw of its slot when it was sent: real-mode
// clients take it under the run's lifecycle lock, then call without it.
type callee struct {
	sl          *slot
	node        target.Node
	up          bool
	issuer      verify.IssuerID
	incarnation int
	downReason  string
}

func (sl *slot) callee() callee {
	return callee{sl: sl, node: sl.node, up: sl.up, issuer: sl.issuer, incarnation: sl.incarnation, downReason: sl.downReason}
}

// host is the machine a node runs on: its true-time base clock, and the
// shadow clock that applies the same faults to true time so the harness
// knows what the node's clock should read.
type host struct {
	base   generator.Clock
	virt   *faults.Virtual // simulated mode
	origin time.Duration   // simulated: run offset at which virt started
	real   func() time.Duration
	shadow *faults.Clock
	store  *storeLink // the host's way to the run's lease store; nil until a node leases
}

// storeLink is one host's connection to the run's lease store. A partition
// cuts it: the host's calls fail as unavailable while other hosts still
// reach the store.
type storeLink struct {
	lease.Registry
	cut atomic.Bool
}

var _ lease.Registry = (*storeLink)(nil)

func (l *storeLink) check() error {
	if l.cut.Load() {
		return fmt.Errorf("%w: host partitioned from the lease store", lease.ErrUnavailable)
	}
	return nil
}

func (l *storeLink) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := l.check(); err != nil {
		return lease.Lease{}, err
	}
	return l.Registry.Acquire(ctx, req)
}

func (l *storeLink) Renew(ctx context.Context, le lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	if err := l.check(); err != nil {
		return lease.Lease{}, err
	}
	return l.Registry.Renew(ctx, le, lastIssuedMs)
}

func (l *storeLink) Record(ctx context.Context, le lease.Lease, lastIssuedMs int64) error {
	if err := l.check(); err != nil {
		return err
	}
	return l.Registry.Record(ctx, le, lastIssuedMs)
}

func (l *storeLink) Release(ctx context.Context, le lease.Lease, lastIssuedMs int64) error {
	if err := l.check(); err != nil {
		return err
	}
	return l.Registry.Release(ctx, le, lastIssuedMs)
}

func (l *storeLink) List(ctx context.Context) ([]lease.Lease, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return l.Registry.List(ctx)
}

// storeOf returns the host's link to the run's lease store (nil when the
// run has none).
func (r *run) storeOf(h *host) *storeLink {
	if r.leases == nil {
		return nil
	}
	if h.store == nil {
		h.store = &storeLink{Registry: r.leases}
	}
	return h.store
}

// hostNow is the host's true time as an offset from the run's start.
func hostNow(h *host) time.Duration {
	if h.virt == nil {
		return h.real()
	}
	return h.origin + h.virt.Elapsed()
}

// advance brings a simulated host's clock up to t (never back); real
// hosts need nothing.
func advance(h *host, t time.Duration) {
	if h.virt == nil {
		return
	}
	if d := t - hostNow(h); d > 0 {
		h.virt.Advance(d)
	}
}

// realTolerance is the least offset tolerance in real mode.
const realTolerance = time.Millisecond

// newRun prepares a run; the driver then starts the nodes.
func newRun(ctx context.Context, s *scenario.Scenario, t scenario.Target, o *Options) (*run, error) {
	tg, rt, err := resolve(t)
	if err != nil {
		return nil, err
	}
	mode := s.Mode
	if o.Mode != "" {
		mode = o.Mode
	}
	seed := s.Seed
	if o.Seed != nil {
		seed = *o.Seed
	}
	p, err := newPlan(s, mode == scenario.ModeSimulated)
	if err != nil {
		return nil, err
	}
	r := &run{s: s, st: rt, tgt: tg, info: tg.Info(), opts: o, mode: mode, seed: seed, plan: p, ctx: ctx,
		metrics: o.Metrics, gens: o.Generators}
	r.runID = fmt.Sprintf("%s/%s/%d/%d", s.Name, rt.Name, seed, runSeq.Add(1))
	r.tol = r.info.Caps.OffsetTolerance
	if r.tol <= 0 {
		r.tol = target.DefaultOffsetTolerance
	}
	if mode == scenario.ModeReal {
		// The node's offset and its shadow's are read at slightly
		// different real instants.
		r.tol = max(r.tol, realTolerance)
	}
	for _, e := range s.ChecksFor(t.Name) {
		if e.Expected && e.Metric == scenario.MetricDuplicates && e.Holds(1) && !e.Holds(0) {
			r.expectDups = true
		}
	}
	layout := generator.DefaultLayout()
	if len(s.Nodes) > 0 {
		layout = s.Nodes[0].Layout
	}
	r.mu.v = verify.New(verify.Config{Layout: layout, MaxDetails: 20})
	r.mu.faults = make([]FaultResult, len(s.Faults))
	for i, f := range s.Faults {
		r.mu.faults[i] = FaultResult{Name: f.Name, Kind: string(f.Kind), At: Duration(f.At)}
	}
	return r, nil
}

// rng returns a deterministic generator for stream k of the run.
func (r *run) rng(k uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(r.seed), k*0x9e3779b97f4a7c15+1))
}

// windows registers the fault windows with the verifier.
func (r *run) windows() {
	for _, f := range r.s.Faults {
		a, b := f.Observed(r.s.Duration)
		r.mu.v.FaultWindow(f.Name, r.startNs+int64(a), r.startNs+int64(b))
	}
}

// specFor returns the NodeSpec of a declared node under this run's target.
func (r *run) specFor(n scenario.Node) target.NodeSpec {
	return target.SpecOf(r.st.Apply(n))
}

// runSeq numbers the runs of this process, for Env.Run.
var runSeq atomic.Uint64

// usesLeases reports whether any node leases from memory, or a fault
// cuts the lease store off (the run then has a store, used or not).
func (r *run) usesLeases() bool {
	for _, n := range r.s.Nodes {
		if r.st.Apply(n).Lease == scenario.LeaseMemory {
			return true
		}
	}
	for _, f := range r.s.Faults {
		if f.Kind == scenario.KindStoreOutage {
			return true
		}
	}
	return false
}

// leaseLog records what the run's leases did: starts the lease refused and
// generators rebuilt on a new lease.
type leaseLog struct {
	refused []string
	rebound []string
	rebinds uint64
}

// refusedStart reports whether err is the lease refusing the node a worker
// ID (every one in its range held), and logs it.
func (r *run) refusedStart(sl *slot, err error) bool {
	if !errors.Is(err, lease.ErrAllTaken) {
		return false
	}
	msg := strings.TrimPrefix(err.Error(), "node "+sl.name+": ")
	r.lease.refused = append(r.lease.refused, fmt.Sprintf("%s at %s: %s", sl.name, Duration(r.now()), msg))
	return true
}

// followLease notes a node whose lease keeper lost its lease and whose
// generator was rebuilt on a new one (in Maintain): the node's metrics
// follow the new generator, and a new worker ID makes a new incarnation,
// so the verifier checks it as the worker's new issuer.
func (r *run) followLease(sl *slot) {
	if sl.node == nil || !sl.up {
		return
	}
	ln, ok := sl.node.(target.LeaseNode)
	if !ok {
		return
	}
	n := ln.LeaseStats().Rebinds
	if n == sl.rebinds {
		return
	}
	r.lease.rebinds += n - sl.rebinds
	sl.rebinds = n
	if gn, ok := sl.node.(target.GeneratorNode); ok && sl.nm != nil {
		if g := gn.Generator(); g != nil {
			sl.nm.Detach()
			sl.nm.Attach(g)
		}
	}
	w := sl.node.Worker()
	if w < 0 || w == sl.worker {
		r.lease.rebound = append(r.lease.rebound, fmt.Sprintf("%s at %s: lease lost and acquired again: new generator on worker %d", sl.name, Duration(r.now()), w))
		return
	}
	r.lease.rebound = append(r.lease.rebound, fmt.Sprintf("%s at %s: lease lost: new generator on worker %d (was %d), incarnation %d", sl.name, Duration(r.now()), w, sl.worker, sl.incarnation+1))
	sl.incarnation++
	sl.worker = w
	r.mu.Lock()
	sl.issuer = r.mu.v.Register(verify.IssuerSpec{Name: sl.name, Incarnation: sl.incarnation, Worker: w, Layout: sl.spec.Layout})
	r.mu.Unlock()
}

// startSlot starts the slot's node on its host (a fresh Start), registers
// its issuer and reports the error; the slot is down on error.
func (r *run) startSlot(sl *slot) error {
	env := target.Env{Base: sl.host.base, Observer: sl.observer(), Run: r.runID}
	if st := r.storeOf(sl.host); st != nil {
		env.Leases = st
	}
	n, err := r.tgt.Start(r.ctx, sl.spec, env)
	sl.node = n
	r.afterStart(sl, err)
	return err
}

// restartSlot starts a stopped node again on the same host.
func (r *run) restartSlot(sl *slot) error {
	if sl.node == nil {
		return r.startSlot(sl)
	}
	err := sl.node.Start(r.ctx)
	r.afterStart(sl, err)
	return err
}

func (r *run) afterStart(sl *slot, err error) {
	worker := sl.spec.Worker
	if err == nil {
		sl.up, sl.downReason = true, ""
		if w := sl.node.Worker(); w >= 0 {
			worker = w
		}
		if gn, ok := sl.node.(target.GeneratorNode); ok && sl.nm != nil {
			if g := gn.Generator(); g != nil {
				sl.nm.Attach(g)
			}
		}
		if ln, ok := sl.node.(target.LeaseNode); ok {
			sl.rebinds = ln.LeaseStats().Rebinds
		}
	} else {
		sl.up, sl.downReason = false, err.Error()
		if r.refusedStart(sl, err) {
			sl.downReason = "refused a worker ID: " + err.Error()
		}
	}
	if err == nil && sl.pending && worker != sl.worker {
		// A start that failed registered this incarnation with the
		// worker it asked for; the lease gave another: a new issuer.
		sl.incarnation++
	}
	sl.pending = err != nil
	sl.worker = worker
	r.mu.Lock()
	sl.issuer = r.mu.v.Register(verify.IssuerSpec{Name: sl.name, Incarnation: sl.incarnation, Worker: worker, Layout: sl.spec.Layout})
	r.mu.Unlock()
}

func (sl *slot) observer() generator.Observer {
	if sl.nm == nil {
		return nil
	}
	return sl.nm
}

// stopSlot stops the slot's node.
func (r *run) stopSlot(sl *slot, o target.StopOptions, reason string) error {
	sl.up, sl.downReason = false, reason
	sl.gen++
	if sl.nm != nil {
		sl.nm.Detach()
	}
	if sl.node == nil {
		return nil
	}
	return sl.node.Stop(r.ctx, o)
}

// slot returns the declared slot with the given name.
func (r *run) slot(name string) *slot {
	for _, sl := range r.mu.slots {
		if sl.name == name && !sl.clone {
			return sl
		}
	}
	return nil
}

// outcome classifies a call's error for the verifier.
func outcome(err error) verify.Outcome {
	if errors.Is(err, target.ErrStopped) {
		return verify.OutcomeError
	}
	return verify.OutcomeOf(err)
}

// record feeds one call to the verifier, the timeline, the history and the
// metrics. arrive and end are offsets from the start; client is the
// client's index.
func (r *run) record(c callee, client int, arrive, end time.Duration, ids []generator.ID, err error) verify.Found {
	sl := c.sl
	o := verify.Observation{
		Issuer:   c.issuer,
		RefStart: r.startNs + int64(arrive),
		RefEnd:   r.startNs + int64(end),
		IDs:      ids,
		Outcome:  outcome(err),
		Wait:     end - arrive,
	}
	if c.up {
		o.Stream = uint64(client+1)<<32 | uint64(sl.idx)<<16 | uint64(c.incarnation&0xffff)
	}
	r.mu.Lock()
	f := r.mu.v.Observe(o)
	if r.mu.tl != nil {
		r.mu.tl.call(sl, end, ids, err != nil, r.startNs+int64(end), f.Duplicates)
	}
	if r.hist != nil {
		r.hist.write(r, sl, c.incarnation, client, arrive, end, ids, o.Outcome, err)
	}
	if f.Duplicates > 0 && r.opts.FailFast && !r.expectDups {
		r.mu.stopped = true
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.AddChecked(uint64(len(ids)))
		r.metrics.AddDuplicates(uint64(f.Duplicates))
		r.metrics.AddOrderViolations(uint64(f.OrderViolations + f.RestartViolations))
	}
	return f
}

// recordDown records a request to a node that is down.
func (r *run) recordDown(c callee, client int, at time.Duration) {
	r.record(c, client, at, at, nil, fmt.Errorf("%w: %s", target.ErrStopped, c.downReason))
}

// progress reports live progress at offset t.
func (r *run) progress(t time.Duration, force bool) {
	if r.opts.Progress == nil {
		return
	}
	r.mu.Lock()
	p := r.mu.v.Progress()
	var active []string
	for _, f := range r.s.Faults {
		a, b := f.Observed(r.s.Duration)
		if t >= a && t < b {
			active = append(active, f.Name)
		}
	}
	r.mu.Unlock()
	r.opts.Progress(Progress{
		Scenario: r.s.Name, Target: r.st.Name, Elapsed: t, Duration: r.s.Duration,
		Calls: p.Calls, IDs: p.IDs, Duplicates: p.Duplicates, Faults: active, Final: force,
	})
}

// Progress is a live snapshot of a run, for a progress line.
type Progress struct {
	// Scenario and Target name the run.
	Scenario, Target string
	// Elapsed is the run's (simulated or real) time so far, of Duration.
	Elapsed, Duration time.Duration
	// Calls, IDs and Duplicates are the verifier's running totals.
	Calls, IDs, Duplicates uint64
	// Faults are the fault windows open now.
	Faults []string
	// Final is true for the last snapshot of a run.
	Final bool
}

// clockFault converts a scenario fault to a ClockFault.
func (r *run) clockFault(f scenario.Fault) target.ClockFault {
	cf := target.ClockFault{Kind: f.Kind, By: f.By, For: f.For, Window: f.Window, PPM: f.PPM}
	if f.Kind == scenario.KindLeap {
		cf.At = r.start.Add(f.At)
	}
	return cf
}

// applyShadow applies a clock fault to a host's shadow clock.
func applyShadow(c *faults.Clock, f target.ClockFault) {
	_ = f.ApplyTo(c) // the scenario was validated: every kind here is a clock fault
}

// probeDelay is how long after a clock fault the harness measures the
// node's clock offset to confirm it: long enough for the fault's own effect
// to stand well above the measurement tolerance, never past its end.
func (r *run) probeDelay(f scenario.Fault, offset time.Duration) time.Duration {
	need := 20 * r.tol
	var d time.Duration
	switch f.Kind {
	case scenario.KindStep, scenario.KindRevert:
		return 0
	case scenario.KindLeap:
		d = time.Millisecond
		if offset < 0 {
			d += -offset
		}
	case scenario.KindFreeze, scenario.KindPause:
		d = max(need, time.Millisecond)
		if f.For > 0 {
			d = min(d, f.For/2)
		}
	case scenario.KindSmear:
		by := max(f.By, -f.By)
		d = time.Duration(float64(need) * float64(f.Window) / float64(by))
		d = min(max(d, time.Millisecond), f.Window)
	case scenario.KindSlew:
		ppm := f.PPM
		if ppm == 0 {
			ppm = scenario.DefaultPPM
		}
		d = time.Duration(float64(need) * 1e6 / ppm)
		d = min(max(d, time.Millisecond), f.SlewDuration())
	case scenario.KindDrift:
		ppm := max(f.PPM, -f.PPM)
		d = max(time.Duration(float64(need)*1e6/ppm), time.Millisecond)
	}
	return d
}

// confirm compares a node's measured clock offset with its shadow's and
// records the outcome in the fault's result. It returns whether the two
// agree within the tolerance and the fault's effect was measurable.
func (r *run) confirm(fi int, sl *slot, effect time.Duration) {
	detail, ok := r.measure(sl, effect)
	r.mu.Lock()
	fr := &r.mu.faults[fi]
	fr.Detail = append(fr.Detail, sl.name+": "+detail)
	if !ok {
		fr.Confirmed = false
	}
	r.mu.Unlock()
}

// measure reads the node's offset and compares it with the shadow's.
func (r *run) measure(sl *slot, effect time.Duration) (string, bool) {
	if sl.node == nil {
		return "node not running: " + sl.downReason, false
	}
	ctl := sl.node.Clock()
	if ctl == nil {
		return "clock not controllable", false
	}
	got, err := ctl.Offset(r.ctx)
	if err != nil {
		return "offset unreadable: " + err.Error(), false
	}
	want := sl.host.shadow.Offset()
	d := max(got-want, want-got)
	if d > r.tol {
		return fmt.Sprintf("offset %s, want %s", scenario.FormatDuration(got), scenario.FormatDuration(want)), false
	}
	if max(effect, -effect) < 2*r.tol {
		return fmt.Sprintf("offset %s: the fault's effect (%s) is below the measurement tolerance %s", scenario.FormatDuration(got), scenario.FormatDuration(effect), r.tol), false
	}
	return fmt.Sprintf("offset %s (want %s)", scenario.FormatDuration(got), scenario.FormatDuration(want)), true
}

// newSlots creates the declared nodes' slots (not started).
func (r *run) newSlots(mkHost func(at time.Duration) *host) {
	if r.gens != nil {
		// The previous run's nodes stay exported (detached, with their
		// final counters) until this run starts, so a scrape after a run
		// (snowchaos run --metrics-linger) still sees them. Runs with
		// metrics go one at a time, so every node here is a past run's.
		for _, name := range r.gens.Nodes() {
			r.gens.RemoveNode(name)
		}
	}
	for i, n := range r.s.Nodes {
		spec := r.specFor(n)
		sl := &slot{idx: i, name: n.Name, spec: spec, alive: true, host: mkHost(0)}
		sl.host.shadow.Step(spec.ClockOffset)
		if r.gens != nil {
			sl.nm, _ = r.gens.Node(r.s.Name + "/" + r.st.Name + "/" + n.Name)
		}
		r.mu.slots = append(r.mu.slots, sl)
	}
}

// newHostName returns a fresh host name for a node moving hosts.
func (r *run) newHostName(node, why string) string {
	r.hosts++
	return fmt.Sprintf("%s-%s%d", node, why, r.hosts)
}

// finish closes the nodes and assembles the Result.
func (r *run) finish(res *Result, events uint64) {
	var ls target.LeaseStats
	leased := false
	for _, sl := range r.mu.slots {
		if sl.node != nil {
			_ = sl.node.Close()
			if ln, ok := sl.node.(target.LeaseNode); ok {
				ls = ls.Add(ln.LeaseStats())
			}
		}
		leased = leased || sl.spec.Lease == scenario.LeaseMemory
		if sl.nm != nil {
			sl.nm.Detach() // removed when the next run starts
		}
	}
	if re, ok := r.tgt.(target.RunEnder); ok {
		_ = re.EndRun(context.Background(), r.runID) // best effort: leftover state does not change the verdict
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	vr := r.mu.v.Result()
	res.Faults = r.mu.faults
	res.Stopped = r.mu.stopped
	fillFigures(res, vr, r.s, r.startNs)
	res.Figures.RefusedStarts = len(r.lease.refused)
	res.Figures.Rebinds = r.lease.rebinds
	if leased && !r.info.KnownBad {
		res.Lease = &LeaseResult{
			Acquisitions: ls.Acquisitions, AcquireErrors: ls.AcquireErrors,
			RenewOK: ls.RenewOK, RenewFailed: ls.RenewFailed, RenewLost: ls.RenewLost,
			Fenced: ls.Fenced, ClockJumps: ls.ClockJumps, HandoffWaits: ls.HandoffWaits,
			Rebinds: r.lease.rebinds, Refused: r.lease.refused, Rebound: r.lease.rebound,
		}
	}
	if r.mode == scenario.ModeSimulated {
		res.Sim = &SimInfo{Budget: r.plan.budget, Factor: round4(r.plan.factor), Hot: Duration(r.plan.hotLen), HotSpans: len(r.plan.hot), Events: events}
	}
	if r.mu.tl != nil {
		res.Timeline = r.mu.tl.result()
	}
	res.Checks = evaluate(r.s, r.st.Name, vr, res.Faults, res.Figures)
	res.Verdict = Pass
	counted := 0
	for _, c := range res.Checks {
		if !c.Info {
			counted++
			res.Verdict = worse(res.Verdict, c.Verdict)
		}
	}
	if counted == 0 {
		res.Verdict = Unknown
	}
	if r.metrics != nil {
		for _, c := range res.Checks {
			_ = r.metrics.SetVerdict(c.Expr, telemetry.ParseVerdict(string(c.Verdict)))
		}
		r.metrics.End()
	}
}

func round4(f float64) float64 { return float64(int64(f*1e6+0.5)) / 1e6 }

// fillFigures copies the verifier's figures into the result.
func fillFigures(res *Result, vr verify.Result, s *scenario.Scenario, startNs int64) {
	f := &res.Figures
	f.Requests = vr.Calls.Total
	f.IDs = vr.IDs
	f.Duplicates = vr.Duplicates
	f.OrderViolations = vr.OrderViolations
	f.RestartViolations = vr.RestartViolations
	f.Refusals = vr.Calls.Total - vr.Calls.OK
	f.Availability = round4(vr.Calls.Availability())
	f.MaxWait, f.P99Wait = Duration(vr.Wait.Max), Duration(vr.Wait.P99)
	f.MaxLead, f.P99Lead = Duration(vr.Lead.Max), Duration(vr.Lead.P99)
	f.MaxLag, f.P99Lag = Duration(vr.Lag.Max), Duration(vr.Lag.P99)
	for _, is := range vr.Issuers {
		f.LongestGap = max(f.LongestGap, Duration(is.LongestGap))
		res.Nodes = append(res.Nodes, NodeResult{
			Name: is.Name, Incarnation: is.Incarnation, Worker: is.Worker,
			Requests: is.Calls.Total, IDs: is.IDs, Duplicates: is.Duplicates,
			Availability: round4(is.Calls.Availability()), MaxWait: Duration(is.MaxWait), MaxLead: Duration(is.MaxLead),
		})
	}
	for _, w := range vr.Windows {
		res.Windows = append(res.Windows, WindowResult{
			Name: w.Name, Start: Duration(w.Start - startNs), End: Duration(w.End - startNs),
			Requests: w.Calls.Total, Availability: round4(w.Calls.Availability()),
			LongestGap: Duration(w.LongestIssuerGap), Duplicates: w.Duplicates,
			MaxWait: Duration(w.Wait.Max), MaxLead: Duration(w.Lead.Max), MaxLag: Duration(w.Lag.Max),
		})
	}
	for _, d := range vr.DuplicateDetails {
		res.Duplicates = append(res.Duplicates, DuplicateResult{
			ID: d.ID.String(), First: d.First.String(), FirstAt: Duration(d.FirstRefStart - startNs),
			Second: d.Second.String(), SecondAt: Duration(d.SecondRefStart - startNs), Windows: d.Windows,
		})
	}
	sort.SliceStable(res.Nodes, func(i, j int) bool {
		if res.Nodes[i].Name != res.Nodes[j].Name {
			return res.Nodes[i].Name < res.Nodes[j].Name
		}
		return res.Nodes[i].Incarnation < res.Nodes[j].Incarnation
	})
}
