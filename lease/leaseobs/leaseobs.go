// Package leaseobs feeds a lease.Keeper's lease into the snowflake_lease_*
// metrics (telemetry.LeaseMetrics) and the lease.acquire and lease.renew
// spans (telemetry/tracing).
//
// An Observer wraps the two things a Keeper talks through, so it needs no
// goroutine and no hook inside the Keeper:
//
//   - the Registry (Observer.Registry): every Acquire and Renew runs in a
//     span; every Renew counts by result (ok, error, lost) and a successful
//     one refreshes the expiry gauge with the store's new LeasedUntil;
//   - OnChange (Observer.OnChange): every state change sets the one-hot
//     state gauge and the expiry (zero once the lease is lost or released),
//     and the peer clock check at start sets the peer skew and peer count
//     gauges and counts a refusal;
//   - the generator's Checkpointer (Observer.Checkpointer): a Load that
//     makes the generator wait for the previous holder's last issued time
//     records that wait, with the last lease.acquire span as exemplar.
//
// Observer.NewKeeper does the first two at once:
//
//	obs := leaseobs.New(lc.MustNode(""), "")
//	k, err := obs.NewKeeper(lease.KeeperConfig{Registry: store, OnChange: myHandler, ...})
//	gen, err := generator.New(generator.Settings{Fence: k, Checkpoint: obs.Checkpointer(k), Clock: k.Clock(), ...})
//
// Every method costs a few atomic operations and, for the spans, what the
// global OpenTelemetry provider charges (nothing while tracing is off).
package leaseobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// Observer feeds one lease holder's LeaseMetrics and spans. It is safe for
// concurrent use. A nil *telemetry.LeaseMetrics is allowed (spans only).
type Observer struct {
	m    *telemetry.LeaseMetrics
	node string

	mu struct {
		sync.Mutex
		acquire  trace.SpanContext // of the last successful lease.acquire span
		handoffs uint64            // Keeper.Stats().HandoffWaits seen so far
	}
}

// New returns an Observer feeding m; node is the span attribute
// snowflake.node ("" for a single node).
func New(m *telemetry.LeaseMetrics, node string) *Observer {
	return &Observer{m: m, node: node}
}

// NewKeeper is lease.NewKeeper with cfg.Registry wrapped by o.Registry and
// cfg.OnChange by o.OnChange (the caller's OnChange still runs, after the
// metrics are updated).
func (o *Observer) NewKeeper(cfg lease.KeeperConfig) (*lease.Keeper, error) {
	if cfg.Registry != nil {
		cfg.Registry = o.Registry(cfg.Registry)
	}
	cfg.OnChange = o.OnChange(cfg.OnChange)
	return lease.NewKeeper(cfg)
}

// OnChange returns a KeeperConfig.OnChange that makes the event's state the
// current one, sets the expiry (the event's LeasedUntil; zero when the
// store said the lease is lost or it was released) and then calls next
// (nil: nothing).
func (o *Observer) OnChange(next func(lease.Event)) func(lease.Event) {
	return func(ev lease.Event) {
		o.Event(ev)
		if next != nil {
			next(ev)
		}
	}
}

// Event records one Keeper event (OnChange calls it).
func (o *Observer) Event(ev lease.Event) {
	if s, ok := State(ev.State); ok {
		o.m.SetState(s)
	}
	switch {
	case ev.State == lease.StateReleased, ev.State == lease.StateLost && ev.Reason == lease.ReasonLost:
		o.m.SetExpiry(time.Time{})
	case !ev.Lease.LeasedUntil.IsZero():
		o.m.SetExpiry(ev.Lease.LeasedUntil)
	}
	if pc := ev.PeerCheck; pc != nil {
		o.m.ObservePeerCheck(pc.Skew, len(pc.Peers), pc.Refused)
		if pc.Refused { // the lease acquired for the check was released
			o.m.SetExpiry(time.Time{})
		}
	}
}

// State maps a Keeper state to the state label of snowflake_lease_state;
// false for lease.StateIdle (all series 0).
func State(s lease.State) (telemetry.LeaseState, bool) {
	switch s {
	case lease.StateHeld:
		return telemetry.LeaseHeld, true
	case lease.StateRenewing:
		return telemetry.LeaseRenewing, true
	case lease.StateLost:
		return telemetry.LeaseLost, true
	case lease.StateReleased:
		return telemetry.LeaseReleased, true
	}
	return "", false
}

// RenewalResult classifies a Registry.Renew error as the Keeper does: nil
// is ok, lease.ErrLost is lost, anything else (unavailable, timeout) error.
func RenewalResult(err error) telemetry.RenewalResult {
	switch {
	case err == nil:
		return telemetry.RenewalOK
	case errors.Is(err, lease.ErrLost):
		return telemetry.RenewalLost
	}
	return telemetry.RenewalError
}

// Registry wraps r: Acquire and Renew run in lease.acquire and lease.renew
// spans (children of the span in ctx, if any, recording the error), Renew
// counts in snowflake_lease_renewals_total by result, and a successful
// Renew or Acquire sets the expiry to the store's new LeasedUntil. Release
// and List pass through.
func (o *Observer) Registry(r lease.Registry) lease.Registry {
	return &registry{Registry: r, o: o}
}

type registry struct {
	lease.Registry
	o *Observer
}

var _ lease.Registry = (*registry)(nil)

func (r *registry) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	ctx, span := tracing.StartLeaseAcquire(ctx, r.o.node, -1)
	l, err := r.Registry.Acquire(ctx, req)
	if err == nil {
		span.SetAttributes(tracing.AttrWorkerID.Int64(l.WorkerID))
		r.o.mu.Lock()
		r.o.mu.acquire = span.SpanContext()
		r.o.mu.Unlock()
		r.o.m.SetExpiry(l.LeasedUntil)
	}
	tracing.End(span, err)
	return l, err
}

func (r *registry) Renew(ctx context.Context, l lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	ctx, span := tracing.StartLeaseRenew(ctx, r.o.node, l.WorkerID)
	nl, err := r.Registry.Renew(ctx, l, lastIssuedMs)
	tracing.End(span, err)
	r.o.m.ObserveRenewal(RenewalResult(err))
	if err == nil {
		r.o.m.SetExpiry(nl.LeasedUntil)
	}
	return nl, err
}

// Checkpointer wraps the Keeper's Checkpointer side: Load calls k.Load and,
// when that made the Keeper count a handoff wait (the previous holder's
// last issued time lay ahead of this node's clock), observes the wait in
// snowflake_lease_handoff_wait_seconds with the last lease.acquire span as
// exemplar. Save passes through. Pass it as generator.Settings.Checkpoint
// (alone, or beside a file checkpoint) with k as the Fence.
func (o *Observer) Checkpointer(k *lease.Keeper) generator.Checkpointer {
	o.mu.Lock()
	o.mu.handoffs = k.Stats().HandoffWaits
	o.mu.Unlock()
	return checkpointer{k: k, o: o}
}

type checkpointer struct {
	k *lease.Keeper
	o *Observer
}

var _ generator.Checkpointer = checkpointer{}

func (c checkpointer) Load() (int64, error) {
	mark, err := c.k.Load()
	if err != nil {
		return mark, err
	}
	c.o.syncHandoffs(c.k.Stats())
	return mark, nil
}

func (c checkpointer) Save(ctx context.Context, mark int64) error { return c.k.Save(ctx, mark) }

// syncHandoffs observes the handoff waits the Keeper counted since the
// last call (each with the last wait it recorded).
func (o *Observer) syncHandoffs(st lease.KeeperStats) {
	o.mu.Lock()
	n := st.HandoffWaits - o.mu.handoffs
	if st.HandoffWaits < o.mu.handoffs {
		n = 0
	}
	o.mu.handoffs = st.HandoffWaits
	sc := o.mu.acquire
	o.mu.Unlock()
	ctx := context.Background()
	if sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	for range n {
		o.m.ObserveHandoffWaitContext(ctx, st.HandoffWait)
	}
}

// Sync sets the state and expiry from k.Stats(): for a Keeper whose events
// were missed (an Observer attached late). It counts nothing.
func (o *Observer) Sync(k *lease.Keeper) {
	st := k.Stats()
	if s, ok := State(st.State); ok {
		o.m.SetState(s)
	}
	o.m.SetExpiry(st.LeasedUntil)
}
