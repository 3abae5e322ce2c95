// Package node is the composition of one ID-issuing node: the generator,
// the clock chain it reads, the checkpoints that carry its high-water mark
// across restarts and handoffs, the worker-ID lease keeper that fences it,
// the rebuild of the generator when the keeper acquires a new lease, and the
// observers (metrics and spans).
//
// `snowchaos serve` and every harness target that runs this project's
// generator build their nodes only through New, so a scenario tests the
// wiring production runs. The pieces it composes:
//
//	base clock (system, or the harness's per-host clock)
//	  -> faults.Clock            when Config.FaultClock or ClockOffset is set
//	  -> lease.Keeper.Clock()    with a lease: closes the fence on a suspected VM pause
//	  -> generator               Fence = keeper, Checkpoint = file + keeper (via leaseobs)
//
// A Node is safe for concurrent use: Generator, Issue and the read-only
// methods may be called from any goroutine; New, Run, Maintain and Stop are
// the node's lifecycle and are called by one goroutine at a time (Run's
// loop is its own).
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leaseobs"
	"github.com/snowchaos/snowchaos/telemetry"
)

// Config is what a node is made of. Every field but Settings has a safe
// zero value; Settings' own zero values are the generator's defaults.
type Config struct {
	// Settings configures the generator: Layout, Node (the worker ID; with
	// a Lease, the preferred one), Policy, MaxWait, MaxLead, Reserve and
	// Clock (the base clock; nil: the system clock). Fence, Checkpoint and
	// Observer must be nil: the node sets them from the fields below.
	Settings generator.Settings
	// Checkpoint persists the mark on the node's host (a
	// generator.FileCheckpoint in production); nil: none. With a lease the
	// mark is also kept in the lease store.
	Checkpoint generator.Checkpointer
	// FaultClock puts a faults.Clock over the base clock, so an operator
	// (the admin API) or a harness can inject clock faults.
	FaultClock bool
	// ClockOffset starts the fault clock stepped by this much; non-zero
	// implies FaultClock.
	ClockOffset time.Duration
	// Lease, when set, makes the node lease its worker ID.
	Lease *Lease
	// Metrics receives the generator's events and reads its counters at
	// scrape time; it follows the node onto every new generator. Nil: none.
	Metrics *telemetry.NodeMetrics
	// LeaseMetrics receives the lease's series; nil: lease spans only.
	LeaseMetrics *telemetry.LeaseMetrics
	// Name is the node's name in lease spans ("" for a single node).
	Name string
	// Log receives the node's lifecycle messages; nil: discarded.
	Log *slog.Logger
}

// Lease configures a node's worker-ID lease.
type Lease struct {
	// Registry is the lease store. Required.
	Registry lease.Registry
	// Holder is the node's stable identity; empty: lease.DefaultHolder().
	Holder string
	// Range is the set of worker IDs to lease from; nil: the layout's
	// whole node field. Settings.Node is the preferred one.
	Range *lease.Range
	// TTL is the lease duration; zero: lease.DefaultTTL.
	TTL time.Duration
	// SkewBudget is added to a previous holder's last issued time before
	// this node may issue on its worker ID (see lease.KeeperConfig).
	SkewBudget time.Duration
	// PeerClockMaxSkew bounds how far the node's clock may be off the
	// median of its live peers' clocks at start, or New fails with a
	// lease.PeerClockSkewError (see lease.KeeperConfig); zero:
	// lease.DefaultPeerClockMaxSkew, negative: no check.
	PeerClockMaxSkew time.Duration
	// OneAttempt makes New ask the store once and fail with its error
	// (a simulation decides when to try again); otherwise New retries an
	// unavailable store until ctx is done.
	OneAttempt bool
	// Controls disable safety features. Only for negative controls.
	Controls Controls
}

// Controls switch off one safety feature each, so a harness can show
// that its scenarios catch a node without it. Never set them in
// production.
type Controls struct {
	// NoHandoffGuard starts a new holder at once, whatever the previous
	// holder of its worker ID issued.
	NoHandoffGuard bool
	// NoPauseCheck lets the node issue after a suspected VM pause without
	// first re-validating its lease.
	NoPauseCheck bool
	// NoFence lets the node issue whether it holds its lease or not.
	NoFence bool
	// NoMarkWriteThrough records the node's mark in the lease store only
	// at renewal and release, so after a crash the stored mark lags what
	// was issued.
	NoMarkWriteThrough bool
	// NoPeerClockCheck starts the node whatever its clock reads against
	// its live peers' (Lease.PeerClockMaxSkew negative).
	NoPeerClockCheck bool
	// NoFenceMargin keeps the fence open for the lease's whole TTL by the
	// node's clock, with no safety margin for a store clock that runs
	// fast: the node may issue after the store let its lease go.
	NoFenceMargin bool
}

// ErrStopped is returned by Issue on a node that is stopped.
var ErrStopped = errors.New("node: stopped")

// StartMark is the stored high-water mark a node's generator loaded when
// it was built (by New, or by the last rebind): no ID is issued until the
// clock passes it.
type StartMark struct {
	// Ms is the largest mark stored, Unix ms; 0: none.
	Ms int64
	// Source is where Ms is stored: MarkFromCheckpoint (Config.Checkpoint)
	// or MarkFromLease (the lease store: this node's own record or the
	// previous holder's, with the skew budget); "" when Ms is 0.
	Source string
	// Ahead is how far Ms was ahead of the node's clock when it was
	// loaded: how long it holds the node. Zero or negative: not at all
	// (the mark a stop or an earlier run left behind the clock).
	Ahead time.Duration
}

// Where a StartMark is stored.
const (
	MarkFromCheckpoint = "checkpoint"
	MarkFromLease      = "lease"
)

// Holds reports whether the mark holds the node: it was ahead of the
// clock when loaded.
func (m StartMark) Holds() bool { return m.Ahead > 0 }

// Node is one running node. Build it with New.
type Node struct {
	cfg    Config
	clock  generator.Clock // the generator's clock, end of the chain
	fault  *faults.Clock   // nil without a fault clock
	keeper *lease.Keeper   // nil without a lease
	obs    *leaseobs.Observer
	log    *slog.Logger

	// gen is the generator serving now; nil once stopped.
	gen       atomic.Pointer[generator.Generator]
	rebindDue atomic.Bool

	// file and leased record the marks the generator loads from the
	// checkpoint and the lease store (nil without one).
	file, leased *markRecorder

	// mu serialises the lifecycle: rebuilding the generator on a new lease
	// and stopping. settings is the current generator's, for a rebuild;
	// start the mark it loaded.
	mu struct {
		sync.Mutex
		settings generator.Settings
		start    StartMark
		stopped  bool
		cancel   context.CancelFunc // ends Run's goroutines; nil when not running
	}
	bg sync.WaitGroup // Run's goroutines
}

// New builds a node: its clock chain, its lease (acquired before New
// returns) and its generator, which loads the stored marks and so waits
// out (or refuses) a clock that has not passed them. The node issues at
// once; with a lease, call Run (a goroutine keeping the lease) or Maintain
// (a simulation's step) to keep it.
//
// Errors name the part that failed: an invalid setting, a lease the store
// refused (wrapping lease.ErrAllTaken) or could not grant (wrapping
// lease.ErrUnavailable), a clock too far off the live peers' (wrapping
// lease.ErrPeerClockSkew: the lease was released), a checkpoint that could
// not be read.
func New(ctx context.Context, cfg Config) (*Node, error) {
	s := cfg.Settings
	if s.Fence != nil || s.Checkpoint != nil || s.Observer != nil {
		return nil, fmt.Errorf("%w: node: Settings.Fence, Checkpoint and Observer are set by the node", generator.ErrInvalidSettings)
	}
	n := &Node{cfg: cfg, log: cfg.Log}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	clock := s.Clock
	if clock == nil {
		clock = generator.SystemClock()
	}
	if cfg.FaultClock || cfg.ClockOffset != 0 {
		n.fault = faults.New(clock)
		n.fault.Step(cfg.ClockOffset)
		clock = n.fault
	}
	s.Clock = clock
	if cfg.Metrics != nil {
		s.Observer = cfg.Metrics
	}
	if cfg.Checkpoint != nil {
		n.file = &markRecorder{Checkpointer: cfg.Checkpoint}
		s.Checkpoint = n.file
	}
	if cfg.Lease != nil {
		if err := n.acquire(ctx, &s); err != nil {
			return nil, err
		}
	}
	n.clock = s.Clock
	g, err := generator.New(s)
	if err != nil {
		if n.keeper != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.keeper.Config().CallTimeout)
			_ = n.keeper.Release(rctx)
			cancel()
		}
		return nil, err
	}
	n.mu.settings = g.Settings()
	n.mu.start = n.loaded()
	n.reserve(ctx, g)
	n.serve(g)
	return n, nil
}

// markRecorder is a Checkpointer that keeps the last mark it loaded.
type markRecorder struct {
	generator.Checkpointer
	ms atomic.Int64
}

// Load loads the mark and keeps it.
func (r *markRecorder) Load() (int64, error) {
	ms, err := r.Checkpointer.Load()
	if err == nil {
		r.ms.Store(ms)
	}
	return ms, err
}

// loaded describes the mark the generator just built loaded, against the
// clock now.
func (n *Node) loaded() StartMark {
	var m StartMark
	for _, r := range []struct {
		rec    *markRecorder
		source string
	}{{n.file, MarkFromCheckpoint}, {n.leased, MarkFromLease}} {
		if r.rec != nil && r.rec.ms.Load() > m.Ms {
			m.Ms, m.Source = r.rec.ms.Load(), r.source
		}
	}
	if m.Ms > 0 {
		wall, _ := n.clock.Now()
		m.Ahead = time.Duration(m.Ms*int64(time.Millisecond) - wall)
	}
	return m
}

// reserve writes the generator's first mark before the node serves, so
// that its first requests do not spend their MaxWait on the disk. A
// failure is logged, not fatal: the generator keeps it, Ready reports it,
// and the next call that needs the mark writes it again.
func (n *Node) reserve(ctx context.Context, g *generator.Generator) {
	if err := g.Reserve(ctx); err != nil {
		n.log.Warn("the first checkpoint write failed; the node refuses until a write succeeds", "err", err)
	}
}

// acquire builds the lease keeper, acquires the first lease and puts the
// keeper into the settings: the worker ID, the fence, the pause-checking
// clock and the lease checkpoint.
func (n *Node) acquire(ctx context.Context, s *generator.Settings) error {
	lc := n.cfg.Lease
	if lc.Registry == nil {
		return fmt.Errorf("%w: node: lease without a registry", lease.ErrInvalidConfig)
	}
	layout := s.Layout.Normalize()
	kc := lease.KeeperConfig{
		Registry:                lc.Registry,
		Holder:                  lc.Holder,
		Range:                   lease.NodeRange(layout.NodeBits),
		Prefer:                  []int64{s.Node},
		TTL:                     lc.TTL,
		Clock:                   s.Clock,
		SkewBudget:              lc.SkewBudget,
		PeerClockMaxSkew:        lc.PeerClockMaxSkew,
		DisableHandoffGuard:     lc.Controls.NoHandoffGuard,
		DisableMarkWriteThrough: lc.Controls.NoMarkWriteThrough,
		OnChange:                n.leaseChanged,
	}
	if lc.Range != nil {
		kc.Range = *lc.Range
	}
	if lc.Controls.NoPauseCheck {
		kc.PauseThreshold = time.Duration(math.MaxInt64)
	}
	if lc.Controls.NoPeerClockCheck {
		kc.PeerClockMaxSkew = -1
	}
	if lc.Controls.NoFenceMargin {
		kc.MarginRate, kc.MarginAbs = -1, -1
	}
	n.obs = leaseobs.New(n.cfg.LeaseMetrics, n.cfg.Name)
	k, err := n.obs.NewKeeper(kc)
	if err != nil {
		return err
	}
	var l lease.Lease
	if lc.OneAttempt {
		l, err = k.TryAcquire(ctx)
	} else {
		l, err = k.Acquire(ctx)
	}
	if err != nil {
		return err
	}
	n.keeper = k
	s.Node = l.WorkerID
	s.Clock = k.Clock()
	if !lc.Controls.NoFence {
		s.Fence = k
	}
	n.leased = &markRecorder{Checkpointer: n.obs.Checkpointer(k)}
	lcp := generator.Checkpointer(n.leased)
	if s.Checkpoint != nil {
		s.Checkpoint = generator.Checkpoints(s.Checkpoint, lcp)
	} else {
		s.Checkpoint = lcp
	}
	n.log.Info("lease acquired", "worker", l.WorkerID, "token", l.Token, "until", l.LeasedUntil)
	return nil
}

// serve makes g the generator callers get, with the metrics following it.
func (n *Node) serve(g *generator.Generator) {
	if old := n.gen.Swap(g); old != nil && n.cfg.Metrics != nil {
		n.cfg.Metrics.Detach()
	}
	if n.cfg.Metrics != nil {
		n.cfg.Metrics.Attach(g)
	}
}

// leaseChanged is the keeper's OnChange: it logs the change (INFO when the
// lease is held or released, WARN while renewals fail and when it is lost:
// the node then refuses IDs until it holds one again) and the peer clock
// check at start, and, when the keeper acquired a lease the generator is
// not bound to, has the generator rebuilt (Maintain does it, or Run, in a
// goroutine of its own).
func (n *Node) leaseChanged(ev lease.Event) {
	if pc := ev.PeerCheck; pc != nil {
		n.logPeerCheck(pc)
		if pc.Refused {
			return // New fails with the error, which names the peers
		}
	}
	level, msg := slog.LevelInfo, "lease state"
	attrs := []any{"state", ev.State.String(), "worker", ev.Lease.WorkerID}
	switch ev.State {
	case lease.StateRenewing:
		level, msg = slog.LevelWarn, "lease renewals failing: the node issues within the safety margin"
	case lease.StateLost:
		level, msg = slog.LevelWarn, "lease lost: the node refuses IDs until it holds a lease again"
		attrs = append(attrs, "reason", ev.Reason.String())
	}
	if ev.Err != nil {
		attrs = append(attrs, "err", ev.Err)
	}
	if ev.Rebind {
		attrs = append(attrs, "rebind", true)
	}
	n.log.Log(context.Background(), level, msg, attrs...)
	if !ev.Rebind {
		return
	}
	n.mu.Lock()
	running := n.mu.cancel != nil && !n.mu.stopped
	n.mu.Unlock()
	if running {
		n.spawnRebind()
		return
	}
	n.rebindDue.Store(true)
}

// logPeerCheck logs the peer clock check made at start.
func (n *Node) logPeerCheck(pc *lease.PeerCheck) {
	switch {
	case len(pc.Peers) == 0:
		n.log.Info("peer clock check: no live peer reports a clock through the lease store; starting without a comparison")
	case pc.Refused:
		n.log.Error("peer clock check refused the start: the clock is off the median of the live peers", "skew", pc.Skew,
			"peers", len(pc.Peers), "bound", pc.Bound, "uncertainty", pc.Uncertainty)
	default:
		n.log.Info("peer clock check passed", "skew", pc.Skew, "peers", len(pc.Peers), "bound", pc.Bound, "uncertainty", pc.Uncertainty)
	}
}

// Generator returns the generator serving now, nil once the node stopped.
// It changes when the node is rebuilt on a new lease.
func (n *Node) Generator() *generator.Generator { return n.gen.Load() }

// Issue fills dst with IDs from the current generator and returns how
// many it issued (a prefix of dst) and why it stopped short. One ID is
// asked of generator.NextContext, more of NextNContext: serve's HTTP API
// and every harness target call Issue, so both paths production serves
// are the ones tested.
//
// A call never meets a generator the node closed under it: a call that
// raced a rebind goes on with the new generator, or, while the rebind is
// still building it, fails with a *lease.FenceError (ReasonChanged,
// wrapping generator.ErrFenced), the refusal the lease change causes. A
// stopped node fails with ErrStopped.
func (n *Node) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	g := n.gen.Load()
	for {
		if g == nil {
			return 0, ErrStopped
		}
		var k int
		var err error
		if len(dst) == 1 {
			var id generator.ID
			if id, err = g.NextContext(ctx); err == nil {
				dst[0], k = id, 1
			}
		} else {
			k, err = g.NextNContext(ctx, dst)
		}
		if err == nil || !errors.Is(err, generator.ErrClosed) {
			return k, err
		}
		next, cerr := n.closed(g)
		if k > 0 || cerr != nil {
			return k, cerr
		}
		g = next
	}
}

// Ready reports whether a call to Issue would be served now: nil, or why
// not (generator.Generator.Ready's reasons, the lease change under way
// as Issue reports it, ErrStopped). It reads the clock.
func (n *Node) Ready() error {
	g := n.gen.Load()
	for {
		if g == nil {
			return ErrStopped
		}
		err := g.Ready()
		if err == nil || !errors.Is(err, generator.ErrClosed) {
			return err
		}
		if g, err = n.closed(g); err != nil {
			return err
		}
	}
}

// closed explains why g, which a call got from the node, is closed: the
// node stopped (ErrStopped), or a rebind closed it and is building its
// successor (a *lease.FenceError with ReasonChanged), or the successor
// serves now (returned, with a nil error, for the call to go on with).
func (n *Node) closed(g *generator.Generator) (*generator.Generator, error) {
	next := n.gen.Load()
	switch {
	case next == nil:
		return nil, ErrStopped
	case next != g:
		return next, nil
	}
	return nil, &lease.FenceError{Reason: lease.ReasonChanged, WorkerID: g.Settings().Node}
}

// Settings returns the settings of the node's generator (the current
// one's: the worker ID changes on a rebind) with every default filled in
// and the clock chain, fence, checkpoints and observer the node put in;
// after Stop, the last generator's.
func (n *Node) Settings() generator.Settings {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.settings
}

// StartMark returns the stored mark the node's current generator loaded
// when it was built.
func (n *Node) StartMark() StartMark {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.start
}

// FaultClock returns the node's fault clock, nil without one.
func (n *Node) FaultClock() *faults.Clock { return n.fault }

// Clock returns the clock the generator reads (the end of the chain).
func (n *Node) Clock() generator.Clock { return n.clock }

// Keeper returns the lease keeper, nil without a lease.
func (n *Node) Keeper() *lease.Keeper { return n.keeper }

// Worker returns the worker ID the node issues with, -1 once stopped.
func (n *Node) Worker() int64 {
	if g := n.gen.Load(); g != nil {
		return g.Settings().Node
	}
	return -1
}

// LeaseStats returns the keeper's state and counters (zero without a
// lease); Counters.Rebinds counts the generators rebuilt on a new lease.
func (n *Node) LeaseStats() lease.KeeperStats {
	if n.keeper == nil {
		return lease.KeeperStats{WorkerID: -1}
	}
	return n.keeper.Stats()
}

// Maintain does the lease work due now (lease.Keeper.Tick) and any rebind
// it made due, and returns how long until work is due again; negative
// without a lease or once stopped. A simulation calls it on virtual time
// instead of Run.
func (n *Node) Maintain(ctx context.Context) time.Duration {
	if n.keeper == nil || n.gen.Load() == nil {
		return -1
	}
	d := n.keeper.Tick(ctx)
	if n.rebindDue.Swap(false) {
		n.rebind()
	}
	return d
}

// Run keeps the lease in goroutines (the keeper's renewal loop, and a
// rebind whenever it acquires a new lease) until ctx is done or the node
// stops. Without a lease it does nothing.
func (n *Node) Run(ctx context.Context) {
	if n.keeper == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.stopped || n.mu.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	n.mu.cancel = cancel
	if n.rebindDue.Swap(false) {
		n.spawnRebind()
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		_ = n.keeper.Run(ctx) // its end shows in the keeper's state
	}()
}

// spawnRebind rebinds in a goroutine of its own: the keeper calls OnChange
// from its renewal loop, which a rebind must not hold up.
func (n *Node) spawnRebind() {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		n.rebind()
	}()
}

// rebind closes the generator bound to the lost lease, binds the keeper to
// its new lease and serves a new generator with the new worker ID. While
// that fails the node keeps refusing (the fence stays closed on the old
// binding); the keeper's next acquisition asks for another rebind.
func (n *Node) rebind() {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.gen.Load()
	if n.mu.stopped || old == nil {
		return
	}
	_ = old.Close() // its final mark cannot reach the lost lease: Save is fenced
	l, err := n.keeper.Rebind()
	if err != nil {
		n.log.Error("lease rebind failed; the node keeps refusing", "err", err)
		return
	}
	s := n.mu.settings
	s.Node = l.WorkerID
	g, err := generator.New(s)
	if err != nil {
		n.log.Error("new generator after a lease change failed; the node keeps refusing", "err", err)
		return
	}
	n.mu.settings = g.Settings()
	n.mu.start = n.loaded()
	rctx, cancel := context.WithTimeout(context.Background(), n.keeper.Config().CallTimeout)
	n.reserve(rctx, g)
	cancel()
	n.serve(g)
	n.log.Info("serving a new generator after a lease change", "worker", l.WorkerID, "token", l.Token)
}

// Stop stops the node. A graceful stop closes the generator, which
// persists its final mark (into the lease too), then releases the lease;
// a crash (graceful false) drops everything as a killed process would:
// nothing more is written, and the lease expires in the store. Either
// way Issue fails with ErrStopped afterwards. Stop returns the first error
// of closing and releasing; it is idempotent.
func (n *Node) Stop(ctx context.Context, graceful bool) error {
	n.mu.Lock()
	if n.mu.stopped {
		n.mu.Unlock()
		return nil
	}
	n.mu.stopped = true
	cancel := n.mu.cancel
	n.mu.Unlock()
	g := n.gen.Swap(nil)
	if n.cfg.Metrics != nil {
		n.cfg.Metrics.Detach()
	}
	if cancel != nil {
		cancel()
	}
	n.bg.Wait()
	if !graceful {
		return nil
	}
	var err error
	if g != nil {
		err = g.Close()
	}
	if n.keeper != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), n.keeper.Config().CallTimeout)
		if e := n.keeper.Release(rctx); e != nil && err == nil {
			err = e
		}
		rcancel()
	}
	return err
}
