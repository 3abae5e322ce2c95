package harness

import (
	"context"
	"fmt"
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

// slot is one node position of a run: a declared node, or a clone. It
// keeps its name across restarts and handoffs (new incarnations). Its
// fields belong to the driver's goroutine; clients see a slot only
// through its published view.
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
	poked       time.Duration // simulated: when a deferred poke is due (see lifecycle.poke)
	hungUntil   time.Duration // when the keeper's hung store call ends (0: none; see lifecycle.hangCall)
	gen         int           // lifecycle generation: stale events are dropped
	host        *hostTruth
	series      *NodeSeries
	nm          *telemetry.NodeMetrics
	downReason  string
	armed       int // restart fault index + 1 whose crash point is armed; 0: none
	// startedAt and readyAt are the offsets at which the current
	// incarnation's start began and returned.
	startedAt, readyAt time.Duration

	view atomic.Pointer[view]
}

// leaseTTL is the node's lease TTL: its spec's, else lease.DefaultTTL.
func (sl *slot) leaseTTL() time.Duration {
	if sl.spec.LeaseTTL > 0 {
		return sl.spec.LeaseTTL
	}
	return lease.DefaultTTL
}

// view is what a request sees of its slot when it is sent: an immutable
// snapshot the driver publishes after every change (publish), so clients
// in other goroutines read it without a lock.
type view struct {
	sl          *slot
	node        target.Node
	up          bool
	alive       bool
	issuer      verify.IssuerID
	incarnation int
	downReason  string
	host        *hostTruth // the slot's host when published (a handoff moves it)
	// leased, holder and worker say whose lease covers the IDs it
	// issues: the holder identity and worker ID of a memory lease.
	leased bool
	holder string
	worker int64
}

// publish makes the slot's current state what requests see.
func (sl *slot) publish() {
	sl.view.Store(&view{sl: sl, node: sl.node, up: sl.up, alive: sl.alive, issuer: sl.issuer, incarnation: sl.incarnation, downReason: sl.downReason, host: sl.host,
		leased: sl.spec.Lease == scenario.LeaseMemory, holder: sl.spec.Host, worker: sl.worker})
}

// current returns the slot's published view.
func (sl *slot) current() *view { return sl.view.Load() }

// hostTruth is the harness's side of a node's host: its true-time base
// clock, the shadow clock that applies the same faults to true time (so
// the harness knows what the node's clock should read), and the host's
// link to the run's lease store. The target's side of the same machine is
// whatever its node runs on (target.Host for in-process nodes, a child
// process's fault clock for the process target).
type hostTruth struct {
	base   generator.Clock
	virt   *faults.Virtual // simulated mode
	origin time.Duration   // simulated: run offset at which virt started
	real   func() time.Duration
	shadow *faults.Clock
	store  *storeLink // the host's way to the run's lease store; nil until a node leases
}

// now is the host's true time as an offset from the run's start.
func (h *hostTruth) now() time.Duration {
	if h.virt == nil {
		return h.real()
	}
	return h.origin + h.virt.Elapsed()
}

// advance brings a simulated host's clock up to t (never back); real
// hosts need nothing.
func (h *hostTruth) advance(t time.Duration) {
	if h.virt == nil {
		return
	}
	if d := t - h.now(); d > 0 {
		h.virt.Advance(d)
	}
}

// storeLink is one host's connection to the run's lease store. A partition
// cuts it: the host's calls fail as unavailable while other hosts still
// reach the store.
type storeLink struct {
	lease.Registry
	cut   atomic.Bool  // calls do not reach the store
	deaf  atomic.Bool  // calls reach the store and take effect; the answers are lost
	hang  atomic.Bool  // calls get no answer until the caller's timeout
	whole *atomic.Bool // the whole store hangs (an outage that hangs, a store pause)
}

// hanging reports whether the host's calls hang.
func (l *storeLink) hanging() bool {
	return l.hang.Load() || (l.whole != nil && l.whole.Load())
}

var _ lease.Registry = (*storeLink)(nil)

func (l *storeLink) check() error {
	if l.cut.Load() {
		return fmt.Errorf("%w: host partitioned from the lease store", lease.ErrUnavailable)
	}
	if l.hanging() {
		return fmt.Errorf("%w: no answer from the lease store before the call's timeout", lease.ErrUnavailable)
	}
	return nil
}

// answer returns err, or, while the store's answers are lost, an
// unavailable error in its place.
func (l *storeLink) answer(err error) error {
	if l.deaf.Load() {
		return fmt.Errorf("%w: the lease store's answer was lost (one-way partition)", lease.ErrUnavailable)
	}
	return err
}

func (l *storeLink) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := l.check(); err != nil {
		return lease.Lease{}, err
	}
	le, err := l.Registry.Acquire(ctx, req)
	if err = l.answer(err); err != nil {
		return lease.Lease{}, err
	}
	return le, nil
}

func (l *storeLink) Renew(ctx context.Context, le lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	if err := l.check(); err != nil {
		return lease.Lease{}, err
	}
	nl, err := l.Registry.Renew(ctx, le, lastIssuedMs)
	if err = l.answer(err); err != nil {
		return lease.Lease{}, err
	}
	return nl, nil
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
	return l.answer(l.Registry.Release(ctx, le, lastIssuedMs))
}

func (l *storeLink) List(ctx context.Context) ([]lease.Lease, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	ls, err := l.Registry.List(ctx)
	if err = l.answer(err); err != nil {
		return nil, err
	}
	return ls, nil
}
