package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Defaults of KeeperConfig.
const (
	DefaultTTL         = 10 * time.Second
	DefaultMarginRate  = 0.1
	DefaultMarginAbs   = 50 * time.Millisecond
	DefaultMaxFailures = 3
)

// DefaultCallTimeout is the bound on one store call of a Keeper whose
// KeeperConfig.CallTimeout is zero: a sixth of the TTL.
func DefaultCallTimeout(ttl time.Duration) time.Duration { return ttl / 6 }

// MaxSkewBudget is the largest KeeperConfig.SkewBudget: a new holder waits
// the budget out on every handoff.
const MaxSkewBudget = time.Minute

// KeeperConfig configures a Keeper. Every field but Registry has a safe
// zero value.
type KeeperConfig struct {
	// Registry is the lease store. Required.
	Registry Registry
	// Holder is the node's stable identity; zero: DefaultHolder().
	Holder string
	// Range is the set of worker IDs to lease from; zero ([0,0]):
	// NodeRange(10), the default layout's node field.
	Range Range
	// Prefer lists worker IDs to try, in order, after the holder's
	// previous one (see Request.Prefer).
	Prefer []int64
	// TTL is the lease duration; renewals run every TTL/3. Zero: DefaultTTL.
	TTL time.Duration
	// Clock is the Keeper's time source; nil: generator.SystemClock(). The
	// generator must read the same clock: pass Keeper.Clock() as
	// generator.Settings.Clock.
	Clock generator.Clock
	// MarginRate is the fraction of the TTL kept as a safety margin for
	// clock rate error between this node and the store; zero:
	// DefaultMarginRate, negative: none (with MarginAbs negative too, the
	// fence stays open for the whole TTL: only for negative controls).
	// Must lie below 0.5.
	MarginRate float64
	// MarginAbs is an absolute safety margin on top of MarginRate; zero:
	// DefaultMarginAbs, negative: none.
	//
	// The fence closes at monoWhenRenewalSent + TTL*(1-MarginRate) -
	// MarginAbs unless a later renewal succeeded, so it closes before the
	// store could let anyone else take the worker ID.
	MarginAbs time.Duration
	// MaxFailures is how many renewals in a row may fail before the fence
	// closes early; zero: DefaultMaxFailures.
	MaxFailures int
	// CallTimeout bounds every store call (real time: it bounds network
	// I/O); zero: DefaultCallTimeout(TTL).
	CallTimeout time.Duration
	// RetryInterval is the pause before retrying a failed renewal or
	// acquisition; zero: TTL/10.
	RetryInterval time.Duration
	// SkewBudget is added to the previous holder's stored mark by Load (the
	// handoff guard); zero: none; at most MaxSkewBudget. It covers a stored
	// mark that may lag what its holder issued: one left by a holder that
	// wrote its mark only at renewal (DisableMarkWriteThrough, or a
	// snowchaos release before Registry.Record) and crashed, up to TTL/3
	// of issuing behind. Clock offset between nodes needs no budget: the
	// mark is read off the previous holder's clock, the clock its IDs
	// carry, and is recorded before any ID passes it, so a new holder that
	// waits until its own clock passes the mark issues above every earlier
	// ID however far behind its clock is.
	SkewBudget time.Duration
	// DisableHandoffGuard makes Load return 0, so a new holder starts at
	// once whatever the previous holder issued. Only for negative controls.
	DisableHandoffGuard bool
	// DisableMarkWriteThrough makes Save keep the mark in memory only, to
	// be written with the next renewal or on Release, as before marks were
	// recorded ahead: after a crash the stored mark lags what was issued
	// by up to TTL/3, and a new holder whose clock is behind repeats IDs.
	// Only for negative controls.
	DisableMarkWriteThrough bool
	// PeerClockMaxSkew is how far this node's wall clock may be off the
	// median of its live peers' clocks when the Keeper acquires its first
	// lease (TryAcquire, Acquire, Start): the Keeper lists the store's
	// leases, estimates each live peer's clock from the report its holder
	// made with its last renewal (Lease.EstimatedClock), and, when the
	// median skew exceeds the bound plus the measurement's uncertainty,
	// releases the lease and fails with a *PeerClockSkewError
	// (ErrPeerClockSkew) before the generator issues anything. Without
	// live peers it starts (the Event says so). Zero:
	// DefaultPeerClockMaxSkew; negative: no check (for negative controls);
	// at most MaxPeerClockSkew. Leases the renewal loop acquires again
	// after a loss, while the node runs, are not checked.
	PeerClockMaxSkew time.Duration
	// PauseThreshold is how far the wall clock may jump ahead of the
	// monotonic clock (compared with the last renewal) before the Keeper
	// suspects a VM pause and closes the fence until a fresh renewal
	// succeeds; zero: half the safety margin (TTL*MarginRate+MarginAbs)/2.
	PauseThreshold time.Duration
	// OnChange, if set, is called from the renewal goroutine on every state
	// change. It must not block for long and must not call Release.
	OnChange func(Event)
}

// State is the Keeper's view of its lease.
type State int32

// Keeper states.
const (
	// StateIdle: no lease acquired yet.
	StateIdle State = iota
	// StateHeld: a lease is held and the fence is open.
	StateHeld
	// StateRenewing: renewals are failing; the fence is still open within
	// the safety margin.
	StateRenewing
	// StateLost: the fence is closed (renewals failed MaxFailures times,
	// the margin was reached, a clock jump is being re-validated, or the
	// store said the lease is lost); the Keeper keeps renewing or
	// re-acquiring.
	StateLost
	// StateReleased: Release was called; the Keeper is done.
	StateReleased
)

// String returns "idle", "held", "renewing", "lost" or "released".
func (s State) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateHeld:
		return "held"
	case StateRenewing:
		return "renewing"
	case StateLost:
		return "lost"
	case StateReleased:
		return "released"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// FenceReason says why the fence is closed.
type FenceReason uint8

// Reasons a Keeper refuses.
const (
	// ReasonNotAcquired: no lease has been acquired yet.
	ReasonNotAcquired FenceReason = iota
	// ReasonMarginReached: the lease's validity by the local monotonic
	// clock, less the safety margin, ran out before a renewal succeeded.
	ReasonMarginReached
	// ReasonRenewFailures: MaxFailures renewals in a row failed.
	ReasonRenewFailures
	// ReasonLost: the store said the lease is lost.
	ReasonLost
	// ReasonChanged: the Keeper now holds a different lease (a new token,
	// perhaps a new worker ID); the generator must be rebuilt on it after
	// Rebind.
	ReasonChanged
	// ReasonReleased: the lease was released.
	ReasonReleased
	// ReasonClockJump: the wall clock jumped ahead of the monotonic clock
	// (a suspected VM pause); issuing resumes after a fresh renewal.
	ReasonClockJump
)

// String returns a short description, e.g. "renewals failing".
func (r FenceReason) String() string {
	switch r {
	case ReasonNotAcquired:
		return "no lease acquired"
	case ReasonMarginReached:
		return "lease validity margin reached"
	case ReasonRenewFailures:
		return "renewals failing"
	case ReasonLost:
		return "lease lost"
	case ReasonChanged:
		return "lease changed: rebuild the generator"
	case ReasonReleased:
		return "lease released"
	case ReasonClockJump:
		return "clock jumped ahead (suspected pause): re-validating lease"
	}
	return "unknown"
}

// FenceError is what Keeper.Check, Load and Save return while the fence is
// closed. It wraps generator.ErrFenced and, when there is one, the store
// error that caused it.
type FenceError struct {
	// Reason says why.
	Reason FenceReason
	// WorkerID is the worker ID of the lease concerned (-1 when none).
	WorkerID int64
	// Err is the cause (for example an ErrUnavailable or ErrLost error), or nil.
	Err error
}

// Error returns e.g. "generator: fenced: worker 3: renewals failing: lease: store unavailable: ...".
func (e *FenceError) Error() string {
	s := fmt.Sprintf("%v: worker %d: %v", generator.ErrFenced, e.WorkerID, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns generator.ErrFenced and the cause.
func (e *FenceError) Unwrap() []error {
	if e.Err == nil {
		return []error{generator.ErrFenced}
	}
	return []error{generator.ErrFenced, e.Err}
}

// Event reports a change of the Keeper's state.
type Event struct {
	// State is the new state.
	State State
	// Lease is the current lease (zero when none).
	Lease Lease
	// Reason is why the fence closed (for StateLost).
	Reason FenceReason
	// Err is the store error behind the change, if any.
	Err error
	// Rebind is true when a new lease was acquired that the generator is
	// not bound to: close the generator, call Rebind, and build a new one
	// with Node = Lease.WorkerID.
	Rebind bool
	// PeerCheck is the peer clock check made on this acquisition (the
	// first one), nil when none was made. A refused start is reported by
	// an event with State StateIdle, no Lease, Err the
	// *PeerClockSkewError and PeerCheck.Refused set.
	PeerCheck *PeerCheck
}

// KeeperStats are the Keeper's counters, for metrics. Reading them costs
// a few atomic loads.
type KeeperStats struct {
	State       State         // current state (as State reports it)
	WorkerID    int64         // -1 when no lease is held
	Token       int64         // fencing token of the current lease
	LeasedUntil time.Time     // store expiry of the current lease
	ValidUntil  int64         // monotonic ns at which the fence closes (0 when closed)
	HandoffWait time.Duration // the last handoff wait (how long the generator had to wait)
	MarkMs      int64         // highest mark given to Save
	Counters
}

// Counters are a Keeper's cumulative counts: the one shape of lease
// statistics, summed over keepers with Add (a node's restarts, a run's
// nodes) and reported as they are.
type Counters struct {
	// Acquisitions and AcquireErrors count acquisitions and failed
	// attempts (first starts, restarts, re-acquisitions after a loss).
	Acquisitions  uint64 `json:"acquisitions"`
	AcquireErrors uint64 `json:"acquire_errors"`
	// RenewOK, RenewFailed and RenewLost count renewals by result:
	// succeeded, failed (unavailable, timeout), the store said lost.
	RenewOK     uint64 `json:"renew_ok"`
	RenewFailed uint64 `json:"renew_failed"`
	RenewLost   uint64 `json:"renew_lost"`
	// Records and RecordErrors count the marks Save wrote to the store and
	// the writes that failed (the generator then refuses past its old mark).
	Records      uint64 `json:"records"`
	RecordErrors uint64 `json:"record_errors"`
	// Fenced counts early fence closures (renewals failing, the lease
	// lost, a clock jump); ClockJumps the suspected pauses among them.
	Fenced     uint64 `json:"fenced"`
	ClockJumps uint64 `json:"clock_jumps"`
	// HandoffWaits counts Loads whose mark lay ahead of the wall clock: a
	// generator start that had to wait for a previous holder's last
	// issued time.
	HandoffWaits uint64 `json:"handoff_waits"`
	// Rebinds counts bindings to a new lease after the previous one was
	// lost (each a generator rebuilt on it).
	Rebinds uint64 `json:"rebinds"`
}

// Add returns the sum of c and o.
func (c Counters) Add(o Counters) Counters {
	return Counters{
		Acquisitions: c.Acquisitions + o.Acquisitions, AcquireErrors: c.AcquireErrors + o.AcquireErrors,
		RenewOK: c.RenewOK + o.RenewOK, RenewFailed: c.RenewFailed + o.RenewFailed, RenewLost: c.RenewLost + o.RenewLost,
		Records: c.Records + o.Records, RecordErrors: c.RecordErrors + o.RecordErrors,
		Fenced: c.Fenced + o.Fenced, ClockJumps: c.ClockJumps + o.ClockJumps,
		HandoffWaits: c.HandoffWaits + o.HandoffWaits, Rebinds: c.Rebinds + o.Rebinds,
	}
}

type grant struct {
	workerID, token int64
	validUntil      atomic.Int64 // mono ns; math.MinInt64 when closed
	stored          atomic.Int64 // a mark the store is known to hold for the worker ID
	mu              struct {
		sync.Mutex
		epoch  uint64 // bumped on each early close
		reason FenceReason
		err    error
		lease  Lease
	}
}

func (g *grant) leaseNow() Lease {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.lease
}

// closeFence closes g for reason; it reports whether it was open.
func (g *grant) closeFence(reason FenceReason, err error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.validUntil.Load() != math.MinInt64
	g.mu.epoch++
	g.mu.reason, g.mu.err = reason, err
	g.validUntil.Store(math.MinInt64)
	return was
}

// Keeper holds one worker-ID lease for a node and fences its generator: it
// implements generator.Fence (Check), generator.FenceWord (OpenUntil: the
// generator's fast path then compares its reading with the bound lease's
// validity end and calls Check only past it) and generator.Checkpointer
// (Load, Save). Check costs three atomic loads and a compare.
//
// The generator is bound to one lease: the one Acquire or Start got, or
// the one the last Rebind returned. If the Keeper loses its lease and
// acquires another, Check refuses with ReasonChanged until the caller has
// closed the old generator, called Rebind and built a new one.
type Keeper struct {
	cfg       KeeperConfig
	clock     generator.Clock
	validity  int64 // ns: TTL less the safety margin
	interval  int64 // ns between renewals
	retry     int64
	threshold int64

	cur, bound atomic.Pointer[grant]
	mark       atomic.Int64
	offset     atomic.Int64 // wall-mono at the last good renewal; noOffset when unset
	force      atomic.Bool
	state      atomic.Int32
	wake       chan struct{}
	stop       chan struct{}
	stopOnce   sync.Once
	loopDone   chan struct{}
	running    atomic.Bool

	tick struct { // serialises store calls
		sync.Mutex
		next     int64 // mono ns when the next renewal is due
		failures int
		released bool
	}

	nAcq, nAcqErr, nOK, nFail, nLost, nFenced, nJumps, nHandoff atomic.Uint64
	nRecord, nRecordErr, nRebind                                atomic.Uint64
	handoffWait                                                 atomic.Int64
}

const noOffset = math.MinInt64

// NewKeeper checks cfg and returns a Keeper holding no lease yet. Errors
// wrap ErrInvalidConfig.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	if cfg.Registry == nil {
		return nil, fmt.Errorf("%w: no registry", ErrInvalidConfig)
	}
	if cfg.Holder == "" {
		cfg.Holder = DefaultHolder()
	}
	if cfg.Range == (Range{}) {
		cfg.Range = NodeRange(10)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = generator.SystemClock()
	}
	switch {
	case cfg.MarginRate == 0:
		cfg.MarginRate = DefaultMarginRate
	case cfg.MarginRate < 0:
		cfg.MarginRate = 0
	}
	switch {
	case cfg.MarginAbs == 0:
		cfg.MarginAbs = DefaultMarginAbs
	case cfg.MarginAbs < 0:
		cfg.MarginAbs = 0
	}
	if cfg.MaxFailures == 0 {
		cfg.MaxFailures = DefaultMaxFailures
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout(cfg.TTL)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = cfg.TTL / 10
	}
	margin := time.Duration(float64(cfg.TTL)*cfg.MarginRate) + cfg.MarginAbs
	if cfg.PauseThreshold == 0 {
		cfg.PauseThreshold = margin / 2
	}
	if cfg.PeerClockMaxSkew == 0 {
		cfg.PeerClockMaxSkew = DefaultPeerClockMaxSkew
	}
	req := Request{Holder: cfg.Holder, Range: cfg.Range, TTL: cfg.TTL, Prefer: cfg.Prefer}
	if err := req.Validate(); err != nil {
		return nil, requestConfigError{err}
	}
	switch {
	case cfg.MarginRate >= 0.5:
		return nil, fmt.Errorf("%w: margin rate %v outside [0, 0.5)", ErrInvalidConfig, cfg.MarginRate)
	case cfg.MaxFailures < 0:
		return nil, fmt.Errorf("%w: max failures %d", ErrInvalidConfig, cfg.MaxFailures)
	case cfg.CallTimeout <= 0 || cfg.RetryInterval <= 0 || cfg.SkewBudget < 0 || cfg.PauseThreshold < 0:
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case cfg.SkewBudget > MaxSkewBudget:
		return nil, fmt.Errorf("%w: skew budget %v above %v", ErrInvalidConfig, cfg.SkewBudget, MaxSkewBudget)
	case cfg.PeerClockMaxSkew > MaxPeerClockSkew:
		return nil, fmt.Errorf("%w: peer clock max skew %v above %v", ErrInvalidConfig, cfg.PeerClockMaxSkew, MaxPeerClockSkew)
	case cfg.TTL-margin <= cfg.TTL/3+cfg.CallTimeout:
		return nil, fmt.Errorf("%w: ttl %v less margin %v leaves no room for a renewal every %v taking up to %v",
			ErrInvalidConfig, cfg.TTL, margin, cfg.TTL/3, cfg.CallTimeout)
	}
	k := &Keeper{
		cfg:       cfg,
		clock:     cfg.Clock,
		validity:  int64(cfg.TTL - margin),
		interval:  int64(cfg.TTL / 3),
		retry:     int64(cfg.RetryInterval),
		threshold: int64(cfg.PauseThreshold),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	k.offset.Store(noOffset)
	return k, nil
}

// Config returns the Keeper's configuration with defaults filled in.
func (k *Keeper) Config() KeeperConfig { return k.cfg }

// Check implements generator.Fence: nil while the bound lease is the
// current one and mono is before its validity end; otherwise a
// *FenceError wrapping generator.ErrFenced.
func (k *Keeper) Check(mono int64) error {
	g := k.bound.Load()
	if g != nil && g == k.cur.Load() && mono < g.validUntil.Load() {
		return nil
	}
	return k.fenceErr(g)
}

// OpenUntil implements generator.FenceWord: the validity end (a monotonic
// reading) of the lease the generator is bound to, nil before one is. A
// lease stops being the current one only after its fence is closed
// (closeFence stores math.MinInt64 first), and only the current lease is
// renewed (its validity end raised), so while a reading is below the word
// the bound lease is the current one and valid: Check would be nil.
func (k *Keeper) OpenUntil() *atomic.Int64 {
	if g := k.bound.Load(); g != nil {
		return &g.validUntil
	}
	return nil
}

func (k *Keeper) fenceErr(g *grant) *FenceError {
	if g == nil {
		if k.State() == StateReleased {
			return &FenceError{Reason: ReasonReleased, WorkerID: -1}
		}
		return &FenceError{Reason: ReasonNotAcquired, WorkerID: -1}
	}
	if c := k.cur.Load(); c != g {
		if c == nil && k.State() == StateReleased {
			return &FenceError{Reason: ReasonReleased, WorkerID: g.workerID}
		}
		if c == nil {
			return &FenceError{Reason: ReasonLost, WorkerID: g.workerID}
		}
		return &FenceError{Reason: ReasonChanged, WorkerID: g.workerID}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.validUntil.Load() == math.MinInt64 {
		return &FenceError{Reason: g.mu.reason, WorkerID: g.workerID, Err: g.mu.err}
	}
	return &FenceError{Reason: ReasonMarginReached, WorkerID: g.workerID}
}

// Load implements generator.Checkpointer: the bound lease's last issued
// time as the previous holder left it, plus SkewBudget (0 when the worker
// ID was never used or the guard is disabled), or this Keeper's own later
// mark. The generator's start fence waits until its clock passes it.
func (k *Keeper) Load() (int64, error) {
	g := k.bound.Load()
	if g == nil || g != k.cur.Load() {
		return 0, k.fenceErr(g)
	}
	var mark int64
	if l := g.leaseNow(); l.LastIssuedMs > 0 && !k.cfg.DisableHandoffGuard {
		mark = l.LastIssuedMs + (k.cfg.SkewBudget + time.Millisecond - 1).Milliseconds()
	}
	mark = max(mark, k.mark.Load())
	wall, _ := k.clock.Now()
	if lead := mark*1e6 - wall; mark > 0 && lead > 0 {
		k.nHandoff.Add(1)
		k.handoffWait.Store(lead)
	}
	return mark, nil
}

// Save implements generator.Checkpointer: it records mark in the store
// (Registry.Record, bounded by ctx and CallTimeout) before returning, so
// that the mark a new holder reads is never below an ID this node issued.
// A mark at or below one the store already holds costs no I/O; the
// generator calls Save about once per Reserve/2. It fails with a
// *FenceError when the generator is not bound to the current lease, and
// with the store's error (ErrUnavailable, ErrLost) when the store did not
// take the mark; after ErrLost the fence is closed at once. With
// DisableMarkWriteThrough it only keeps the mark for the next renewal.
func (k *Keeper) Save(ctx context.Context, mark int64) error {
	g := k.bound.Load()
	if g == nil || g != k.cur.Load() {
		return k.fenceErr(g)
	}
	raise(&k.mark, mark)
	if k.cfg.DisableMarkWriteThrough || mark <= g.stored.Load() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	err := k.cfg.Registry.Record(cctx, g.leaseNow(), mark)
	cancel()
	if err != nil {
		k.nRecordErr.Add(1)
		if errors.Is(err, ErrLost) {
			if g.closeFence(ReasonLost, err) {
				k.nFenced.Add(1)
			}
			k.force.Store(true) // the next Tick finds out and re-acquires
			k.poke()
		}
		return fmt.Errorf("worker %d: recording mark %d: %w", g.workerID, mark, err)
	}
	k.nRecord.Add(1)
	raise(&g.stored, mark)
	return nil
}

// raise sets v to x when x is greater.
func raise(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// Clock returns the Keeper's clock wrapped so that every reading also
// checks for a suspected VM pause (the wall clock jumping ahead of the
// monotonic clock by more than PauseThreshold since the last renewal),
// closing the fence before the generator can use that reading. Pass it as
// generator.Settings.Clock. It costs one atomic load per reading.
func (k *Keeper) Clock() generator.Clock { return keeperClock{k} }

type keeperClock struct{ k *Keeper }

func (c keeperClock) Now() (wall, mono int64) {
	wall, mono = c.k.clock.Now()
	c.k.observe(wall, mono)
	return wall, mono
}

func (c keeperClock) Sleep(d time.Duration) { c.k.clock.Sleep(d) }

// observe closes the fence when wall-mono moved ahead by more than the
// threshold since the last good renewal.
func (k *Keeper) observe(wall, mono int64) {
	base := k.offset.Load()
	if base == noOffset || (wall-mono)-base <= k.threshold {
		return
	}
	if !k.offset.CompareAndSwap(base, noOffset) {
		return
	}
	k.nJumps.Add(1)
	if g := k.cur.Load(); g != nil && g.closeFence(ReasonClockJump, nil) {
		k.nFenced.Add(1)
	}
	k.force.Store(true)
	k.poke()
}

func (k *Keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Rebind binds the generator to the current lease and returns it; call it
// after closing the generator built on the previous lease, then build the
// new one with Node = Lease.WorkerID. The mark saved under the previous
// lease is kept when the new lease is on the same worker ID (the old
// generator's IDs still bound the new one's) and dropped otherwise. It
// fails with a *FenceError when no lease is held.
func (k *Keeper) Rebind() (Lease, error) {
	g := k.cur.Load()
	if g == nil {
		return Lease{}, k.fenceErr(k.bound.Load())
	}
	old := k.bound.Swap(g)
	if old != nil && old != g {
		k.nRebind.Add(1)
	}
	if old != g && (old == nil || old.workerID != g.workerID) {
		k.mark.Store(0)
	}
	return g.leaseNow(), nil
}

// Lease returns the current lease, and false when none is held.
func (k *Keeper) Lease() (Lease, bool) {
	g := k.cur.Load()
	if g == nil {
		return Lease{}, false
	}
	return g.leaseNow(), true
}

// State returns the Keeper's state, reading the clock to report a lease
// whose validity margin has run out as StateLost.
func (k *Keeper) State() State {
	s := State(k.state.Load())
	if s == StateHeld || s == StateRenewing {
		if g := k.cur.Load(); g != nil {
			if _, mono := k.clock.Now(); mono >= g.validUntil.Load() {
				return StateLost
			}
		}
	}
	return s
}

// Stats returns the Keeper's counters.
func (k *Keeper) Stats() KeeperStats {
	s := KeeperStats{
		State:       k.State(),
		WorkerID:    -1,
		HandoffWait: time.Duration(k.handoffWait.Load()),
		MarkMs:      k.mark.Load(),
		Counters: Counters{
			Acquisitions:  k.nAcq.Load(),
			AcquireErrors: k.nAcqErr.Load(),
			RenewOK:       k.nOK.Load(),
			RenewFailed:   k.nFail.Load(),
			RenewLost:     k.nLost.Load(),
			Records:       k.nRecord.Load(),
			RecordErrors:  k.nRecordErr.Load(),
			Fenced:        k.nFenced.Load(),
			ClockJumps:    k.nJumps.Load(),
			HandoffWaits:  k.nHandoff.Load(),
			Rebinds:       k.nRebind.Load(),
		},
	}
	if g := k.cur.Load(); g != nil {
		l := g.leaseNow()
		s.WorkerID, s.Token, s.LeasedUntil = l.WorkerID, l.Token, l.LeasedUntil
		if v := g.validUntil.Load(); v != math.MinInt64 {
			s.ValidUntil = v
		}
	}
	return s
}

func (k *Keeper) request() Request {
	return Request{Holder: k.cfg.Holder, Range: k.cfg.Range, TTL: k.cfg.TTL, Prefer: k.cfg.Prefer}
}

// Acquire acquires the first lease, retrying unavailability every
// RetryInterval until ctx is done, and binds the generator to it. It fails
// at once on ErrAllTaken or ErrInvalidRequest. A peer clock check that
// would refuse is made again on the peers' next reports, up to TTL/3 plus
// CallTimeout later (see PeerCheck.Fresh), so that a refusal never rests
// on a report sent with an acquisition. It starts no goroutine: call Run
// (or Tick, in simulation) to keep the lease.
func (k *Keeper) Acquire(ctx context.Context) (Lease, error) {
	for {
		l, err := k.tryAcquire(ctx, true)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return Lease{}, err
		}
		if !k.sleep(ctx, time.Duration(k.retry)) {
			return Lease{}, fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}
}

// TryAcquire is Acquire without the retries and without waiting for
// fresh peer reports: one attempt, whose ErrUnavailable the caller handles
// (a simulation, whose store comes back only when its own loop moves time
// on, must not wait for it here).
func (k *Keeper) TryAcquire(ctx context.Context) (Lease, error) {
	return k.tryAcquire(ctx, false)
}

// tryAcquire is TryAcquire; with fresh, a peer clock check that refuses
// is made again on the peers' next reports (awaitFreshLocked) before the
// refusal stands.
func (k *Keeper) tryAcquire(ctx context.Context, fresh bool) (Lease, error) {
	k.tick.Lock()
	if k.tick.released {
		k.tick.Unlock()
		return Lease{}, ErrReleased
	}
	if g := k.cur.Load(); g != nil {
		k.tick.Unlock()
		return k.Rebind()
	}
	ev, err := k.acquireLocked(ctx)
	if err == nil && k.cfg.PeerClockMaxSkew > 0 {
		var pc PeerCheck
		pc, err = k.checkPeersLocked(ctx, ev.Lease, fresh)
		switch {
		case err != nil:
			k.abandonLocked(ctx)
		case pc.Refused:
			err = &PeerClockSkewError{Check: pc, Lease: ev.Lease}
			k.abandonLocked(ctx)
			ev = &Event{State: StateIdle, Err: err, PeerCheck: &pc}
		default:
			ev.PeerCheck = &pc
		}
	}
	k.tick.Unlock()
	if err != nil {
		if ev != nil && ev.PeerCheck != nil {
			k.emit(*ev)
		}
		return Lease{}, err
	}
	l, _ := k.Rebind()
	ev.Rebind = false
	k.emit(*ev)
	return l, nil
}

// abandonLocked gives up the lease TryAcquire just acquired, before the
// generator used it: the Keeper holds no lease again (StateIdle) and
// releases it in the store (best effort: if that fails it expires).
func (k *Keeper) abandonLocked(ctx context.Context) {
	g := k.cur.Load()
	if g == nil {
		return
	}
	g.closeFence(ReasonNotAcquired, nil)
	k.cur.Store(nil)
	k.bound.CompareAndSwap(g, nil)
	k.offset.Store(noOffset)
	k.state.Store(int32(StateIdle))
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	_ = k.cfg.Registry.Release(cctx, g.leaseNow(), 0)
	cancel()
}

// Start acquires the first lease (as Acquire) and then keeps it in a
// goroutine (as Run) until ctx is done or Release is called.
func (k *Keeper) Start(ctx context.Context) (Lease, error) {
	l, err := k.Acquire(ctx)
	if err != nil {
		return Lease{}, err
	}
	go k.Run(ctx) //nolint:errcheck // the loop's end shows in State
	return l, nil
}

// Run keeps the lease: it renews every TTL/3, re-validates after a
// suspected pause, and re-acquires after a loss, sleeping on the Keeper's
// clock in between. It returns ctx.Err() when ctx is done, or ErrReleased
// after Release. Only one Run may be active.
func (k *Keeper) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run called twice", ErrInvalidConfig)
	}
	defer close(k.loopDone)
	for {
		wait := k.Tick(ctx)
		if wait < 0 {
			return ErrReleased
		}
		if !k.sleep(ctx, wait) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return ErrReleased
		}
	}
}

// sleep waits d on the Keeper's clock, returning early (true) on a poke,
// and false when ctx is done or the Keeper stops. The sleeping goroutine
// may outlive an early return by at most d.
func (k *Keeper) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-k.stop:
		return false
	default:
	}
	if d <= 0 {
		return true
	}
	done := make(chan struct{})
	go func() {
		k.clock.Sleep(d)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-k.wake:
		return true
	case <-ctx.Done():
		return false
	case <-k.stop:
		return false
	}
}

// Tick does whatever is due now (acquire, renew, re-validate) and returns
// how long until it is next due; negative after Release. Run calls it in
// a loop; a simulation may call it directly instead.
func (k *Keeper) Tick(ctx context.Context) time.Duration {
	k.tick.Lock()
	if k.tick.released {
		k.tick.Unlock()
		return -1
	}
	wait, ev := k.tickLocked(ctx)
	k.tick.Unlock()
	if ev != nil {
		k.emit(*ev)
	}
	return wait
}

// requestConfigError reports a KeeperConfig whose Request fields are out of
// range: "lease: invalid config: holder ..." (one prefix, not the config's
// and the request's), matching both ErrInvalidConfig and ErrInvalidRequest.
type requestConfigError struct{ err error }

func (e requestConfigError) Error() string {
	return ErrInvalidConfig.Error() + strings.TrimPrefix(e.err.Error(), ErrInvalidRequest.Error())
}

func (e requestConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

func (k *Keeper) emit(ev Event) {
	if k.cfg.OnChange != nil {
		k.cfg.OnChange(ev)
	}
}

func (k *Keeper) setState(s State) bool { return State(k.state.Swap(int32(s))) != s }

func (k *Keeper) tickLocked(ctx context.Context) (time.Duration, *Event) {
	wall, mono := k.clock.Now()
	k.observe(wall, mono)
	g := k.cur.Load()
	if g == nil {
		ev, err := k.acquireLocked(ctx)
		if err != nil {
			return time.Duration(k.retry), ev
		}
		return time.Duration(k.interval), ev
	}
	forced := k.force.Swap(false)
	if !forced && mono < k.tick.next {
		var ev *Event
		// The validity margin may run out between ticks while renewals
		// fail: report it once.
		v := g.validUntil.Load()
		if mono >= v && State(k.state.Load()) == StateRenewing {
			k.setState(StateLost)
			ev = &Event{State: StateLost, Lease: g.leaseNow(), Reason: ReasonMarginReached}
		}
		wait := k.tick.next - mono
		if v > mono && v-mono < wait {
			wait = v - mono
		}
		return time.Duration(wait), ev
	}
	return k.renewLocked(ctx, g)
}

// renewLocked renews g once.
func (k *Keeper) renewLocked(ctx context.Context, g *grant) (time.Duration, *Event) {
	g.mu.Lock()
	epoch := g.mu.epoch
	l := g.mu.lease
	g.mu.Unlock()
	wall, sent := k.clock.Now()
	l.ReportedMs = clockMs(wall)
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	nl, err := k.cfg.Registry.Renew(cctx, l, k.mark.Load())
	cancel()
	switch {
	case err == nil:
		k.nOK.Add(1)
		k.tick.failures = 0
		raise(&g.stored, nl.LastIssuedMs)
		g.mu.Lock()
		g.mu.lease = nl
		reopened := g.mu.epoch == epoch
		if reopened {
			g.validUntil.Store(sent + k.validity)
			g.mu.err = nil
			k.offset.Store(wall - sent)
		}
		g.mu.Unlock()
		if !reopened { // closed meanwhile (clock jump): renew again at once
			k.force.Store(true)
			return 0, nil
		}
		k.tick.next = sent + k.interval
		if k.setState(StateHeld) {
			return time.Duration(k.interval), &Event{State: StateHeld, Lease: nl}
		}
		return time.Duration(k.interval), nil
	case errors.Is(err, ErrLost):
		k.nLost.Add(1)
		if g.closeFence(ReasonLost, err) {
			k.nFenced.Add(1)
		}
		k.cur.Store(nil)
		k.offset.Store(noOffset)
		k.setState(StateLost)
		k.tick.failures = 0
		// Try to acquire a new lease at once; report the loss if that fails.
		ev, aerr := k.acquireLocked(ctx)
		if aerr != nil {
			return time.Duration(k.retry), &Event{State: StateLost, Lease: l, Reason: ReasonLost, Err: err}
		}
		return time.Duration(k.interval), ev
	default:
		k.nFail.Add(1)
		k.tick.failures++
		k.tick.next = sent + k.retry
		if k.tick.failures >= k.cfg.MaxFailures {
			if g.closeFence(ReasonRenewFailures, err) {
				k.nFenced.Add(1)
			}
			if k.setState(StateLost) {
				return time.Duration(k.retry), &Event{State: StateLost, Lease: l, Reason: ReasonRenewFailures, Err: err}
			}
			return time.Duration(k.retry), nil
		}
		if k.setState(StateRenewing) {
			return time.Duration(k.retry), &Event{State: StateRenewing, Lease: l, Err: err}
		}
		return time.Duration(k.retry), nil
	}
}

// clockMs is a wall reading (Unix ns) as a clock report (Unix ms, at
// least 1: a clock before 1970 still reports, as the earliest time).
func clockMs(wall int64) int64 { return max(wall/1e6, 1) }

// acquireLocked asks the store for a new lease and makes it current.
func (k *Keeper) acquireLocked(ctx context.Context) (*Event, error) {
	wall, sent := k.clock.Now()
	req := k.request()
	req.ClockMs = clockMs(wall)
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	l, err := k.cfg.Registry.Acquire(cctx, req)
	cancel()
	if err != nil {
		k.nAcqErr.Add(1)
		if k.bound.Load() != nil && k.setState(StateLost) {
			return &Event{State: StateLost, Reason: ReasonLost, Err: err}, err
		}
		return nil, err
	}
	k.nAcq.Add(1)
	g := &grant{workerID: l.WorkerID, token: l.Token}
	g.stored.Store(l.LastIssuedMs)
	g.mu.lease = l
	g.validUntil.Store(sent + k.validity)
	k.offset.Store(wall - sent)
	k.tick.next = sent + k.interval
	k.tick.failures = 0
	k.cur.Store(g)
	k.setState(StateHeld)
	first := k.bound.CompareAndSwap(nil, g)
	return &Event{State: StateHeld, Lease: l, Rebind: !first}, nil
}

// Release stops the renewal goroutine, closes the fence, and releases the
// lease in the store, writing the last mark given to Save (close the
// generator first so that its final mark is included). Later Checks fail
// with ReasonReleased. It returns the store's error, if any (ErrLost when
// the lease had already been lost).
func (k *Keeper) Release(ctx context.Context) error {
	k.stopOnce.Do(func() { close(k.stop) })
	if k.running.Load() {
		<-k.loopDone
	}
	k.tick.Lock()
	if k.tick.released {
		k.tick.Unlock()
		return nil
	}
	k.tick.released = true
	g := k.cur.Load()
	k.state.Store(int32(StateReleased))
	if g == nil {
		k.tick.Unlock()
		return nil
	}
	g.closeFence(ReasonReleased, nil)
	k.cur.Store(nil)
	k.offset.Store(noOffset)
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	l := g.leaseNow()
	err := k.cfg.Registry.Release(cctx, l, k.mark.Load())
	cancel()
	k.tick.Unlock()
	k.emit(Event{State: StateReleased, Lease: l, Reason: ReasonReleased, Err: err})
	return err
}

var (
	_ generator.Fence        = (*Keeper)(nil)
	_ generator.FenceWord    = (*Keeper)(nil)
	_ generator.Checkpointer = (*Keeper)(nil)
)
