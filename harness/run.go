package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/verify"
)

// run is the state of one scenario x target run, shared by its driver
// (simulated or real, see sim.go and real.go) and, in real mode, the
// client goroutines.
//
// The locking rule: the driver's goroutine owns the lifecycle (the slots
// and everything in them, the hosts, the lease store and its links, the
// fault results, the lease log). Clients never touch it: they read a
// slot's published view (slot.current) and the published list of live
// slots (run.live). What clients and the driver both write, the
// verifier's state and what is derived from each call, sits in r.mu and
// is touched only under it.
type run struct {
	job     *job
	s       *scenario.Scenario
	st      scenario.Target // the target entry with its overrides
	tgt     target.Target
	info    target.Info
	runID   string // Env.Run: scenario/target/seed/sequence
	opts    *Options
	plan    *plan
	ctx     context.Context
	start   time.Time // reference wall time at offset 0
	startNs int64
	// beat counts the driver's steps (events, and waits in real mode)
	// once the nodes are up; drive watches it for a stall.
	beat  atomic.Int64
	tol   time.Duration
	stall *Stall // real mode: the jitter measured while the run ran
	// expectDups is true when the target is expected to issue duplicates
	// (fail-fast then does not stop on them).
	expectDups bool
	metrics    *metrics.Collector
	gens       *telemetry.GeneratorCollector

	// bursts are the fault burst windows by declared node (burst.go).
	bursts [][]burstSpan

	// kind is the kind of ID the nodes issue (target.KindOf), layout
	// the layout of the Snowflake IDs (the first node's).
	kind   verify.Kind
	layout generator.Layout

	mu struct {
		sync.Mutex
		v       *verify.Verifier
		tl      *timeline // nil without Options.Timeline
		hist    *historyWriter
		stopped bool
		// overruns counts IDs issued outside the store's lease (see
		// checkLease); heldOverruns those of them that followed the
		// simulation holding the node's lease keeper back (see
		// holdKeeper), heldMax the longest such hold.
		overruns, heldOverruns uint64
		heldMax                time.Duration
		// held are the spans, by slot index, in which the simulation
		// held a node's lease keeper back.
		held map[int][]heldSpan
		// watches are the clock faults whose reach the IDs must show
		// (evidence.go); inc the incarnations by issuer.
		watches []*reachWatch
		inc     []incStats
		// overlaps are the clones sharing their source's worker ID
		// (overlap.go).
		overlaps []*overlap
		// violations are the protocol violations collected so far (the
		// first maxViolationResults; violated counts them all), and
		// seenViolations how many each node has reported.
		violations     []ViolationResult
		violated       int
		seenViolations map[target.Node]int
		// callErrors counts the calls that failed with each error text
		// (the first maxCallErrors texts; the rest under otherErrors).
		callErrors  map[string]uint64
		otherErrors uint64
	}
	// nwatch counts reach watches, so that calls skip the check without
	// the lock while there are none.
	nwatch atomic.Int64
	// noverlap counts the open overlap watches, for the same reason.
	noverlap atomic.Int64
	// down counts requests sent while their node was down.
	down atomic.Uint64

	// abort is set by the watchdog when the driver stalled: the driver
	// stops at its next step.
	abort atomic.Bool
	// started lists every node the run started, for the watchdog: when
	// the driver stalls, drive closes them from its own goroutine.
	started struct {
		sync.Mutex
		nodes []target.Node
	}

	// live is the published list of slots that take requests (alive
	// ones); the driver replaces it whenever the set changes.
	live atomic.Pointer[[]*slot]

	// Owned by the driver's goroutine.
	slots  []*slot
	faults []FaultResult // by scenario fault index
	leases *lease.Memory
	// storeClock is the lease store's own clock, under the store clock
	// faults; watch records what the store granted (storeclock.go);
	// storeHung is set while every call to the store hangs.
	storeClock *faults.Clock
	watch      *leaseWatch
	storeHung  atomic.Bool
	// driverNow reads the driver's time (set by the simulated driver;
	// nil in real mode, where a call's end is now).
	driverNow func() time.Duration
	lease     leaseLog
	hosts     int // hosts made so far, for names
}

// noteStarted records a node the run started (see started).
func (r *run) noteStarted(n target.Node) {
	r.started.Lock()
	r.started.nodes = append(r.started.nodes, n)
	r.started.Unlock()
}

// closeStarted closes every node the run started, each in its own
// goroutine, and waits for them within limit: the watchdog's teardown of a
// stalled run (a process target's node is killed, which also ends a call
// hung on it). It reports how many closes had not returned.
func (r *run) closeStarted(limit time.Duration) int {
	r.started.Lock()
	nodes := slices.Clone(r.started.nodes)
	r.started.Unlock()
	var pending atomic.Int64
	pending.Store(int64(len(nodes)))
	done := make(chan struct{})
	for _, n := range nodes {
		go func() {
			_ = n.Close() // best effort: the run has already failed
			if pending.Add(-1) == 0 {
				close(done)
			}
		}()
	}
	if len(nodes) == 0 {
		return 0
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return int(pending.Load())
}

// realTolerance is the least offset tolerance in real mode.
const realTolerance = time.Millisecond

// newRun prepares job's run; the driver then starts the nodes.
func newRun(ctx context.Context, j *job, o *Options) (*run, error) {
	s := j.s
	p, err := newPlan(s, j.mode == scenario.ModeSimulated)
	if err != nil {
		return nil, err
	}
	r := &run{job: j, s: s, st: j.b.rt, tgt: j.b.tgt, info: j.b.info, opts: o, plan: p, ctx: ctx,
		metrics: o.Metrics, gens: o.Generators}
	r.runID = fmt.Sprintf("%s/%s/%d/%d", s.Name, j.b.rt.Name, j.seed, runSeq.Add(1))
	r.tol = r.info.Caps.OffsetTolerance
	if r.tol <= 0 {
		r.tol = target.DefaultOffsetTolerance
	}
	if j.mode == scenario.ModeReal {
		// The node's offset and its shadow's are read at slightly
		// different real instants.
		r.tol = max(r.tol, realTolerance)
	}
	for _, e := range s.ChecksFor(j.b.t.Name) {
		if e.Expected && e.Metric == scenario.MetricDuplicates && !e.Holds(0) { // "> 0", "> 100": stopping at the first would fail it
			r.expectDups = true
		}
	}
	layout := generator.DefaultLayout()
	var spec target.NodeSpec
	if len(s.Nodes) > 0 {
		layout = s.Nodes[0].Layout
		spec = target.SpecOf(r.st.Apply(s.Nodes[0]))
	}
	r.kind = target.KindOf(r.tgt, spec)
	r.layout = layout
	r.mu.v = verify.New(verify.Config{Kind: r.kind, Layout: layout, MaxDetails: 20})
	r.bursts = burstSpans(s)
	r.faults = make([]FaultResult, len(s.Faults))
	for i, f := range s.Faults {
		r.faults[i] = FaultResult{Name: f.Name, Kind: string(f.Kind), At: Duration(f.At)}
	}
	return r, nil
}

// rng returns a deterministic generator for stream k of the run.
func (r *run) rng(k uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(r.job.seed), k*0x9e3779b97f4a7c15+1))
}

// simulated reports whether the run is on virtual time.
func (r *run) simulated() bool { return r.job.mode == scenario.ModeSimulated }

// windows registers the fault windows with the verifier.
func (r *run) windows() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.s.Faults {
		a, b := f.Observed(r.s.Duration)
		r.mu.v.FaultWindow(f.Name, r.startNs+int64(a), r.startNs+int64(b))
	}
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
		if _, sc := f.Kind.StoreClock(); sc || f.Kind == faults.KindStoreOutage {
			return true
		}
	}
	return false
}

// storeOf returns the host's link to the run's lease store (nil when the
// run has none).
func (r *run) storeOf(h *hostTruth) *storeLink {
	if r.leases == nil {
		return nil
	}
	if h.store == nil {
		h.store = &storeLink{Registry: r.watch, whole: &r.storeHung}
	}
	return h.store
}

// leaseLog records what the run's leases did: starts the lease refused and
// generators rebuilt on a new lease.
type leaseLog struct {
	refused []string
	rebound []string
	rebinds uint64
	// gone sums the counters of nodes a handoff replaced (finish sums
	// the nodes still in their slots).
	gone lease.Counters
	// counted is true once a node whose keeper the run can read
	// (target.LeaseNode) has started.
	counted bool
}

// stopped reports whether the run was stopped (fail-fast).
func (r *run) stopped() bool {
	if r.abort.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.stopped
}

// slot returns the declared slot with the given name.
func (r *run) slot(name string) *slot {
	for _, sl := range r.slots {
		if sl.name == name && !sl.clone {
			return sl
		}
	}
	return nil
}

// hasSlot reports whether any slot has the name.
func (r *run) hasSlot(name string) bool {
	for _, sl := range r.slots {
		if sl.name == name {
			return true
		}
	}
	return false
}

// publishLive publishes the slots that take requests.
func (r *run) publishLive() {
	live := make([]*slot, 0, len(r.slots))
	for _, sl := range r.slots {
		if sl.alive {
			live = append(live, sl)
		}
	}
	r.live.Store(&live)
}

// pick returns the slot a total-load request goes to: any live slot,
// uniformly; nil when there is none.
func (r *run) pick(rng *rand.Rand) *slot {
	live := *r.live.Load()
	if len(live) == 0 {
		return nil
	}
	return live[rng.IntN(len(live))]
}

// register registers the slot's current incarnation with the verifier.
func (r *run) register(sl *slot) {
	r.mu.Lock()
	sl.issuer = r.mu.v.Register(verify.IssuerSpec{Name: sl.name, Incarnation: sl.incarnation, Worker: sl.worker, Layout: sl.spec.Layout})
	r.noteStartLocked(sl.issuer, sl)
	r.mu.Unlock()
}

// outcome classifies a call's error for the verifier.
func outcome(err error) verify.Outcome {
	switch {
	case errors.Is(err, target.ErrStopped):
		return verify.OutcomeError
	case errors.Is(err, target.ErrRefused):
		return verify.OutcomeRefused
	}
	return verify.OutcomeOf(err)
}

// ownOffset is the node's own clock offset as the harness's shadow of it
// reads now (0 without a host).
func ownOffset(c *view) time.Duration {
	if c.host == nil {
		return 0
	}
	return c.host.shadow.Offset()
}

// record feeds one call to the verifier, the timeline, the history and the
// metrics. arrive and end are offsets from the start; client is the
// client's index; ids holds the call's IDs (nil: none); own is the node's
// own clock offset max_lead_own is measured against: the larger of its
// offsets at the call's start and end, since the node may have read its
// clock before a step back that landed during the call (only on the wall
// clock can one land there).
func (r *run) record(c *view, client int, arrive, end time.Duration, ids *idBuf, err error, own time.Duration) verify.Found {
	sl := c.sl
	o := verify.Observation{
		Issuer:    c.issuer,
		RefStart:  r.startNs + int64(arrive),
		RefEnd:    r.startNs + int64(end),
		Outcome:   outcome(err),
		Wait:      end - arrive,
		OwnOffset: own,
	}
	if c.up {
		o.Stream = uint64(client+1)<<32 | uint64(sl.idx)<<16 | uint64(c.incarnation&0xffff)
	}
	r.mu.Lock()
	f := ids.observe(r.mu.v, o)
	if err != nil && !errors.Is(err, target.ErrStopped) {
		r.noteErrorLocked(err)
	}
	if ids.len() > 0 {
		r.noteIDsLocked(c.issuer, o.RefStart, o.RefEnd)
	}
	if r.mu.tl != nil {
		r.mu.tl.call(sl, end, ids, err != nil, r.startNs+int64(end), f.Duplicates)
	}
	if r.mu.hist != nil {
		r.mu.hist.write(r, sl, c.incarnation, client, arrive, end, ids, o.Outcome, err)
	}
	if f.Duplicates > 0 && r.opts.FailFast && !r.expectDups {
		r.mu.stopped = true
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.AddChecked(uint64(ids.len()))
		r.metrics.AddDuplicates(uint64(f.Duplicates))
		r.metrics.AddOrderViolations(uint64(f.OrderViolations + f.RestartViolations))
	}
	return f
}

// recordDown records a request to a node that is down.
func (r *run) recordDown(c *view, client int, at time.Duration) {
	r.down.Add(1)
	r.record(c, client, at, at, nil, fmt.Errorf("%w: %s", target.ErrStopped, c.downReason), ownOffset(c))
}

// call sends one request to the slot as its view shows it and records
// it, its IDs in buf; now reads the run's offset after the call. It
// reports whether the call failed.
func (r *run) call(c *view, client int, arrive time.Duration, buf *idBuf, now func() time.Duration) (end time.Duration, err error) {
	if !c.up {
		r.recordDown(c, client, arrive)
		return arrive, target.ErrStopped
	}
	own := ownOffset(c)
	err = buf.issue(target.WithClient(r.ctx, client), c.node)
	end = now()
	own2 := ownOffset(c)
	r.checkLease(c, end, buf)
	if errors.Is(err, target.ErrStopped) {
		r.down.Add(1) // the node went down during the call (a kill -9 the harness sent)
	}
	r.record(c, client, arrive, end, buf, err, max(own, own2))
	if r.nwatch.Load() > 0 {
		r.observeReach(c, arrive, end, buf, own, own2)
	}
	if r.noverlap.Load() > 0 {
		r.observeOverlap(c, buf)
	}
	if err != nil && protocolError(err) {
		r.collectViolations(c.node, c.sl.name, c.incarnation)
	}
	return end, err
}

// progress reports live progress at offset t.
func (r *run) progress(t time.Duration, force bool) {
	if r.opts.Progress == nil {
		return
	}
	var active []string
	for _, f := range r.s.Faults {
		a, b := f.Observed(r.s.Duration)
		if t >= a && t < b {
			active = append(active, f.Name)
		}
	}
	r.mu.Lock()
	p := r.mu.v.Progress()
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

// beginMetrics declares the run to the harness metrics.
func (r *run) beginMetrics() {
	if r.metrics == nil {
		return
	}
	info := metrics.ScenarioInfo{Scenario: r.s.Name, Target: r.st.Name}
	for _, f := range r.s.Faults {
		info.Windows = append(info.Windows, metrics.FaultWindow{Name: f.Name, Kind: f.Kind})
	}
	for _, e := range r.s.ChecksFor(r.st.Name) {
		info.Invariants = append(info.Invariants, e.Text)
	}
	r.metrics.Begin(info)
}

// finish closes the nodes and assembles the Result; events is how many
// events the driver handled.
func (r *run) finish(res *Result, events uint64) {
	ls := r.lease.gone
	leased := false
	read := r.lease.counted
	for _, sl := range r.slots {
		if sl.node != nil {
			_ = sl.node.Close()
			r.collectViolations(sl.node, sl.name, sl.incarnation)
			if ln, ok := sl.node.(target.LeaseNode); ok {
				ls = ls.Add(ln.LeaseStats())
				read = true
			}
		}
		leased = leased || sl.spec.Lease == scenario.LeaseMemory
		if sl.nm != nil {
			sl.nm.Detach() // removed when the next run starts
		}
	}
	judged := r.judge()
	r.settleReach()
	r.settleOverlap()
	if re, ok := r.tgt.(target.RunEnder); ok {
		_ = re.EndRun(context.Background(), r.runID) // best effort: leftover state does not change the verdict
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	vr := r.mu.v.Result()
	if vr.Kind != verify.KindSnowflake {
		res.IDKind = vr.Kind.String()
	}
	res.Faults = r.faults
	res.Stopped = r.mu.stopped
	fillFigures(res, vr, r.startNs)
	fillIncarnations(res, r.mu.inc, r.startNs)
	res.Figures.Down = r.down.Load()
	res.Figures.RefusedStarts = len(r.lease.refused)
	res.Figures.Rebinds = r.lease.rebinds
	res.Figures.LeaseOverruns = r.mu.overruns
	res.Figures.LeaseOverrunsHeld = r.mu.heldOverruns
	res.Figures.KeeperHeld = Duration(r.mu.heldMax)
	if leased && !r.info.KnownBad {
		ls.Rebinds = r.lease.rebinds
		res.Lease = &LeaseResult{Counters: ls, Refused: r.lease.refused, Rebound: r.lease.rebound, CountersNA: !read}
	}
	if r.simulated() {
		res.Sim = &SimInfo{Budget: r.plan.budget, Factor: round4(r.plan.factor), Hot: Duration(r.plan.hotLen), HotSpans: len(r.plan.hot), Events: events}
	}
	if r.mu.tl != nil {
		res.Timeline = r.mu.tl.result()
	}
	var cal *Calibration
	if !r.simulated() && r.opts.Calibration != nil {
		cal = r.opts.Calibration.during(r.stall)
		res.Real = &RealInfo{Stall: r.stall, Tolerance: cal.Tolerance, TooNoisy: cal.TooNoisy, Wanted: cal.Wanted, Raised: cal.Tolerance > r.opts.Calibration.Tolerance}
	}
	res.Checks = evaluate(r.s, r.st.Name, r.job.mode, vr, res.Faults, res.Figures, cal)
	if judged != nil {
		res.Checks = append(res.Checks, judgeCheck(*judged, res.Figures))
	}
	res.CallErrors = callErrors(r.mu.callErrors, r.mu.otherErrors)
	judgeEvidence(res, r.mu.violated, r.mu.violations)
	res.Verdict = Pass
	counted := 0
	for _, c := range res.Checks {
		if !c.Info && c.Verdict != NA {
			counted++
			res.Verdict = worse(res.Verdict, c.Verdict)
		}
	}
	if counted == 0 || len(res.Unknown) > 0 {
		res.Verdict = worse(res.Verdict, Unknown)
	}
	if vr.IDs == 0 && res.Error == "" {
		// Every invariant holds vacuously over no IDs: that proves nothing.
		res.Error = "no ID was issued in the whole run: every check is vacuous"
		res.Verdict = worse(res.Verdict, Unknown)
	}
	if r.metrics != nil {
		for _, c := range res.Checks {
			if c.Verdict != NA {
				_ = r.metrics.SetVerdict(c.Expr, string(c.Verdict))
			}
		}
		r.metrics.End()
	}
}

func round4(f float64) float64 { return float64(int64(f*1e6+0.5)) / 1e6 }

// availability is a node incarnation's availability, nil without a
// request (an incarnation asked nothing proved nothing).
func availability(c verify.Calls) *float64 {
	if c.Total == 0 {
		return nil
	}
	a := round4(c.Availability())
	return &a
}

// fillIncarnations adds what the harness knows of each node incarnation
// beyond its calls (inc, by issuer) to the result's node rows.
func fillIncarnations(res *Result, inc []incStats, startNs int64) {
	type key struct {
		name string
		inc  int
	}
	byRef := make(map[key]incStats, len(inc))
	for _, st := range inc {
		byRef[key{st.name, st.incarnation}] = st
	}
	for i := range res.Nodes {
		nr := &res.Nodes[i]
		st, ok := byRef[key{nr.Name, nr.Incarnation}]
		if !ok {
			continue
		}
		nr.Started, nr.StartedAt, nr.ReadyAfter = st.started, Duration(st.startedAt), Duration(st.readyAt-st.startedAt)
		if st.firstID != 0 {
			f, l := Duration(st.firstID-startNs), Duration(st.lastID-startNs)
			nr.FirstID, nr.LastID = &f, &l
		}
	}
}

// fillFigures copies the verifier's figures into the result.
func fillFigures(res *Result, vr verify.Result, startNs int64) {
	f := &res.Figures
	f.Requests = vr.Calls.Total
	f.IDs = vr.IDs
	f.Duplicates = vr.Duplicates
	f.OrderViolations = vr.OrderViolations
	f.RestartViolations = vr.RestartViolations
	f.Refusals = vr.Calls.Total - vr.Calls.OK
	f.Refused = vr.Calls.Refused
	f.Availability = round4(vr.Calls.Availability())
	f.MaxWait, f.P99Wait = Duration(vr.Wait.Max), Duration(vr.Wait.P99)
	f.MaxLead, f.P99Lead = Duration(vr.Lead.Max), Duration(vr.Lead.P99)
	f.MaxLeadOwn = Duration(vr.MaxLeadOwn)
	f.MaxLag, f.P99Lag = Duration(vr.Lag.Max), Duration(vr.Lag.P99)
	for _, is := range vr.Issuers {
		f.LongestGap = max(f.LongestGap, Duration(is.LongestGap))
		res.Nodes = append(res.Nodes, NodeResult{
			Name: is.Name, Incarnation: is.Incarnation, Worker: is.Worker,
			Requests: is.Calls.Total, IDs: is.IDs, Duplicates: is.Duplicates,
			Availability: availability(is.Calls), MaxWait: Duration(is.MaxWait), MaxLead: Duration(is.MaxLead),
			MaxLeadOwn: Duration(is.MaxLeadOwn),
		})
	}
	for _, w := range vr.Windows {
		res.Windows = append(res.Windows, WindowResult{
			Name: w.Name, Start: Duration(w.Start - startNs), End: Duration(w.End - startNs),
			Requests: w.Calls.Total, Availability: round4(w.Calls.Availability()),
			LongestGap: Duration(w.LongestIssuerGap), Duplicates: w.Duplicates,
			MaxWait: Duration(w.Wait.Max), MaxLead: Duration(w.Lead.Max), MaxLeadOwn: Duration(w.MaxLeadOwn), MaxLag: Duration(w.Lag.Max),
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

// refusedStart reports whether err is a start the lease refused: every
// worker ID of the range held, or the node's clock off its live peers'
// (the peer clock check). The node stays down; the run counts it.
func refusedStart(err error) bool {
	return errors.Is(err, lease.ErrAllTaken) || errors.Is(err, lease.ErrPeerClockSkew)
}

// refusedStartText is how the lease log names a start the lease refused.
func refusedStartText(sl *slot, at time.Duration, err error) string {
	msg := strings.TrimPrefix(err.Error(), "node "+sl.name+": ")
	return fmt.Sprintf("%s at %s: %s", sl.name, Duration(at), msg)
}
