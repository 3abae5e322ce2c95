package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/verify"
)

// The run's lease store has a clock of its own (run.storeClock, a
// faults.Clock over the reference time), which decides lease expiry: the
// store clock faults (store_step, store_drift, store_pause) act on it, so
// the store and the nodes disagree on how long a lease lasts, as a
// Postgres host whose clock runs fast does. The lease watch records, by
// that clock, which holder the store lets hold each worker ID until when,
// and every answered request of a leasing node is checked against it: an
// ID issued while the store held no unexpired lease of the node's on its
// worker ID is a lease overrun (lease_overruns), whether or not anyone
// else took the worker ID meanwhile. A fence without a safety margin
// overruns as soon as the store's clock runs faster than the node's.

// leaseWatch wraps the run's lease store and records, from the store's
// own answers, each worker ID's holder and the store time its lease ends.
type leaseWatch struct {
	lease.Registry
	clock generator.Clock // the store's clock
	mu    struct {
		sync.Mutex
		held map[int64]watched
	}
}

// watched is a worker ID's lease as the store last granted it.
type watched struct {
	holder string
	until  int64 // store wall ns
}

func newLeaseWatch(r lease.Registry, clock generator.Clock) *leaseWatch {
	w := &leaseWatch{Registry: r, clock: clock}
	w.mu.held = map[int64]watched{}
	return w
}

func (w *leaseWatch) note(l lease.Lease) {
	w.mu.Lock()
	w.mu.held[l.WorkerID] = watched{holder: l.Holder, until: l.LeasedUntil.UnixNano()}
	w.mu.Unlock()
}

// Acquire implements lease.Registry.
func (w *leaseWatch) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := w.Registry.Acquire(ctx, req)
	if err == nil {
		w.note(l)
	}
	return l, err
}

// Renew implements lease.Registry.
func (w *leaseWatch) Renew(ctx context.Context, l lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	nl, err := w.Registry.Renew(ctx, l, lastIssuedMs)
	if err == nil {
		w.note(nl)
	}
	return nl, err
}

// Release implements lease.Registry.
func (w *leaseWatch) Release(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	err := w.Registry.Release(ctx, l, lastIssuedMs)
	if err == nil {
		now, _ := w.clock.Now()
		w.mu.Lock()
		if h, ok := w.mu.held[l.WorkerID]; ok && h.holder == l.Holder {
			h.until = min(h.until, now)
			w.mu.held[l.WorkerID] = h
		}
		w.mu.Unlock()
	}
	return err
}

// holds reports whether, at store wall time at, the store let holder hold
// an unexpired lease on worker.
func (w *leaseWatch) holds(holder string, worker, at int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.mu.held[worker]
	return ok && h.holder == holder && at < h.until
}

// checkLease counts the IDs of an answered request of a leasing node that
// the store did not cover: issued at offset end while, by the store's
// clock, the node's holder held no unexpired lease on the worker ID they
// carry. The worker is read from the IDs, not from the view the call
// started with: on the wall clock a rebind can land while a call is in
// flight, and its IDs then carry the new worker ID.
func (r *run) checkLease(c *view, end time.Duration, buf *idBuf) {
	n := buf.len()
	if r.watch == nil || !c.leased || n == 0 || r.info.KnownBad {
		return
	}
	worker := c.worker
	if r.kind == verify.KindSnowflake {
		worker = r.layout.Decode(buf.sf[0]).Node
	}
	if r.watch.holds(c.holder, worker, r.storeAt(end)) {
		return
	}
	r.mu.Lock()
	r.mu.overruns += uint64(n)
	if h := r.heldBefore(c.sl, end); h > 0 {
		r.mu.heldOverruns += uint64(n)
		r.mu.heldMax = max(r.mu.heldMax, h)
	}
	r.mu.Unlock()
}

// heldSpan is a span of run offsets in which the simulation held a
// node's lease keeper back.
type heldSpan struct{ from, to time.Duration }

// maxHeldSpans bounds the spans kept per slot (the latest are kept).
const maxHeldSpans = 64

// holdKeeper records that the simulation holds slot sl's lease keeper
// back from offset from to offset to: its host is busy with a call that
// waits until then (see lifecycle.maintain).
func (r *run) holdKeeper(sl *slot, from, to time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.held == nil {
		r.mu.held = map[int][]heldSpan{}
	}
	spans := r.mu.held[sl.idx]
	if n := len(spans); n > 0 && from <= spans[n-1].to {
		spans[n-1].to = max(spans[n-1].to, to)
	} else {
		if n == maxHeldSpans {
			spans = append(spans[:0], spans[1:]...)
		}
		spans = append(spans, heldSpan{from, to})
	}
	r.mu.held[sl.idx] = spans
}

// heldBefore returns the longest hold of slot sl's keeper longer than a
// renewal interval (TTL/3) within the lease's TTL before offset at; 0:
// none. The caller holds r.mu.
func (r *run) heldBefore(sl *slot, at time.Duration) time.Duration {
	ttl := sl.leaseTTL()
	var longest time.Duration
	for _, h := range r.mu.held[sl.idx] {
		if d := r.heldOutsidePauses(sl, h); d > ttl/3 && h.from <= at && h.to > at-ttl {
			longest = max(longest, d)
		}
	}
	return longest
}

// heldOutsidePauses returns how much of hold h falls outside the VM
// pauses of sl's node: a paused VM's keeper does not run either, so that
// part of a hold is what a real host does.
func (r *run) heldOutsidePauses(sl *slot, h heldSpan) time.Duration {
	d := h.to - h.from
	for _, f := range r.s.Faults {
		if f.Kind != faults.KindPause || !slices.Contains(f.Nodes, sl.name) {
			continue
		}
		if lo, hi := max(h.from, f.At), min(h.to, f.At+f.For); hi > lo {
			d -= hi - lo
		}
	}
	return d
}

// storeAt reads the store's clock for offset at: now, moved on by how far
// at lies ahead of the driver's time (a simulated host busy ahead of it).
func (r *run) storeAt(at time.Duration) int64 {
	wall, _ := r.storeClock.Now()
	if r.driverNow != nil {
		if ahead := at - r.driverNow(); ahead > 0 {
			wall += int64(ahead)
		}
	}
	return wall
}

// storeClockFault applies store clock fault fi to the store's clock; a
// store pause also makes every call hang until it ends.
func (l *lifecycle) storeClockFault(fi int) {
	f := l.s.Faults[fi]
	kind, _ := f.Kind.StoreClock()
	if l.storeClock == nil {
		l.unconfirmed(fi, "the run has no simulated lease store whose clock the harness controls")
		return
	}
	before := l.storeClock.Offset()
	cf := f.Fault
	cf.Kind = kind
	if err := cf.ApplyTo(l.storeClock); err != nil {
		l.unconfirmed(fi, "lease store clock: "+err.Error())
		return
	}
	switch f.Kind {
	case faults.KindStoreStep:
		l.detail(fi, fmt.Sprintf("lease store clock offset %s (was %s)", scenario.FormatDuration(l.storeClock.Offset()), scenario.FormatDuration(before)))
	case faults.KindStoreDrift:
		l.detail(fi, fmt.Sprintf("lease store clock runs at %+g ppm from %s", f.PPM, scenario.FormatDuration(before)))
	case faults.KindStorePause:
		l.storeHung.Store(true)
		link := &storeLink{Registry: l.watch, whole: &l.storeHung}
		if _, err := link.List(l.ctx); err == nil {
			l.unconfirmed(fi, "lease store still answers")
		}
		l.detail(fi, fmt.Sprintf("lease store paused for %s: its clock stands still, calls hang", scenario.FormatDuration(f.For)))
		l.d.schedule(l.d.now()+f.For, storeBackEvent{fi})
	}
}

// hangs reports whether the slot's calls to the lease store hang now.
func (l *lifecycle) hangs(sl *slot) bool {
	if sl.spec.Lease != scenario.LeaseMemory {
		return false
	}
	link := l.storeOf(sl.host)
	return link != nil && link.hanging()
}

// hangCall models the node's lease keeper sending a call that hangs: it
// is stuck in it for its call timeout (lease.DefaultCallTimeout of the
// node's TTL; the in-process node sets no other), during which it counts
// no failure and cannot be woken, while the node goes on issuing. The
// call's outcome is decided when it ends (hungEvent): at its timeout, or
// sooner when the store comes back.
func (l *lifecycle) hangCall(sl *slot) {
	if sl.hungUntil > l.d.now() {
		return
	}
	sl.hungUntil = l.d.now() + lease.DefaultCallTimeout(sl.leaseTTL())
	l.d.schedule(sl.hungUntil, hungEvent{sl.idx, sl.gen, sl.hungUntil})
}

// hungEvent ends slot si's hung store call (the one that was to end at
// until), which then fails or, the store being back, is answered.
type hungEvent struct {
	si, gen int
	until   time.Duration
}

func (e hungEvent) apply(l *lifecycle) {
	sl := l.slots[e.si]
	if sl.hungUntil != e.until || sl.gen != e.gen || !sl.up {
		return
	}
	l.endHang(sl)
}

// endHang ends the slot's hung call now: the keeper's tick runs against
// the store as it is (failing while it still hangs).
func (l *lifecycle) endHang(sl *slot) {
	sl.hungUntil = 0
	if sl.node == nil || !sl.up {
		return
	}
	sl.host.advance(l.d.now())
	now := l.d.now()
	d := sl.node.Maintain(l.ctx)
	l.followLease(sl)
	if d >= 0 {
		l.d.schedule(now+max(d, time.Millisecond), maintainEvent{sl.idx, sl.gen})
	}
}

// resumeHung answers the hung calls of every slot the store stopped
// hanging for.
func (l *lifecycle) resumeHung() {
	for _, sl := range l.slots {
		if sl.hungUntil > l.d.now() && !l.hangs(sl) {
			l.endHang(sl)
		}
	}
}
