package harness

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
)

// A run's lifecycle is a sequence of timed events: the scenario's faults
// and what they set off (probes confirming a clock fault, the end of a
// restart's down time or a handoff's gap, the end of a clone, the store
// coming back), the nodes' periodic lease work, deferred wake-ups and
// retried starts, and the timeline's samples. Each event kind is a type
// with its own handler; the driver (sim.go, real.go) schedules them on one
// queue, ordered by time and then by scheduling order, and calls apply in
// its goroutine, which owns the lifecycle (see run).

// event is one scheduled lifecycle event.
type event interface {
	apply(l *lifecycle)
}

type (
	faultEvent     struct{ fi int }      // scenario fault fi begins
	probeEvent     struct{ pi int }      // measure probe pi
	upEvent        struct{ fi, si int }  // slot si comes back after fault fi
	cloneEndEvent  struct{ si int }      // the clone in slot si ends
	maintainEvent  struct{ si, gen int } // slot si's periodic lease work
	pokeEvent      struct{ si, gen int } // a deferred wake-up of slot si's keeper
	retryEvent     struct{ si, gen int } // slot si tries its start again
	sampleEvent    struct{ bucket int }  // timeline bucket ends
	windowEndEvent struct{ fi int }      // fault fi's window closes (metrics)
	storeBackEvent struct{ fi int }      // store outage fi ends
	arrivalEvent   struct{ c *client }   // simulated: a client's request arrives
)

func (e faultEvent) apply(l *lifecycle)    { l.fault(e.fi) }
func (e probeEvent) apply(l *lifecycle)    { l.probe(e.pi) }
func (e upEvent) apply(l *lifecycle)       { l.up(e.fi, l.slots[e.si]) }
func (e cloneEndEvent) apply(l *lifecycle) { l.cloneEnd(l.slots[e.si]) }
func (e sampleEvent) apply(l *lifecycle)   { l.sample(e.bucket) }
func (e storeBackEvent) apply(l *lifecycle) {
	l.storeBack(e.fi)
}
func (e windowEndEvent) apply(l *lifecycle) {
	f := l.s.Faults[e.fi]
	_ = l.metrics.SetWindow(metrics.FaultWindow{Name: f.Name, Kind: f.Kind}, false)
}
func (e maintainEvent) apply(l *lifecycle) {
	if sl := l.slots[e.si]; sl.up && sl.gen == e.gen {
		sl.host.advance(l.d.now())
		l.maintain(sl)
	}
}
func (e pokeEvent) apply(l *lifecycle) {
	if sl := l.slots[e.si]; sl.up && sl.gen == e.gen {
		sl.host.advance(l.d.now())
		l.poke(sl)
	}
}
func (e retryEvent) apply(l *lifecycle) { l.retryStart(e.si, e.gen) }
func (e arrivalEvent) apply(*lifecycle) { e.c.sim.arrival(e.c) }

// queued is an event with its time and scheduling order.
type queued struct {
	at  time.Duration
	seq uint64
	ev  event
}

// eventQueue orders events by time, ties in scheduling order.
type eventQueue []queued

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// schedule queues ev at offset at.
func (q *eventQueue) schedule(seq *uint64, at time.Duration, ev event) {
	*seq++
	heap.Push(q, queued{at: at, seq: *seq, ev: ev})
}

// driver is what the lifecycle needs from the mode's driver.
type driver interface {
	// now is the run's current offset.
	now() time.Duration
	// schedule queues a lifecycle event at offset at.
	schedule(at time.Duration, ev event)
	// newHost makes a host whose true time starts at offset at.
	newHost(at time.Duration) *hostTruth
	// addClients starts the clients of slot si (-1: the total load), their
	// first requests due after offset at.
	addClients(si int, at time.Duration)
}

// lifecycle applies a run's lifecycle events, in the driver's goroutine.
type lifecycle struct {
	*run
	d      driver
	probes []probe
	cuts   map[int][]*storeLink // links a store outage cut, by fault index
}

// probe is a pending offset measurement confirming fault fi on slot si.
type probe struct {
	fi, si int
	before time.Duration // shadow offset before the fault
	slack  time.Duration // how long applying a time-dependent fault took
}

// changed publishes every slot's state and the live set, after an event
// that may have changed them. A stop and a start also publish at once (so
// a request never goes to a restarted process as the old incarnation's).
func (l *lifecycle) changed() {
	for _, sl := range l.slots {
		sl.publish()
	}
	l.publishLive()
}

// setup starts the nodes and schedules the lifecycle events; false when a
// node failed to start (res then says why and is final). leaseClock is the
// lease store's clock (reference time). The driver registers the fault
// windows (run.windows) once the run's start is fixed.
func (l *lifecycle) setup(res *Result, leaseClock generator.Clock) bool {
	r := l.run
	if r.usesLeases() {
		r.storeClock = faults.New(leaseClock)
		r.leases = lease.NewMemory(r.storeClock)
		r.watch = newLeaseWatch(r.leases, r.storeClock)
	}
	if r.opts.Timeline {
		r.mu.tl = newTimeline(r.s, len(r.s.Nodes))
	}
	r.beginMetrics()
	l.newSlots()
	for _, sl := range r.slots {
		l.addSeries(sl, 0)
		if err := l.startSlot(sl); err != nil {
			if refusedStart(err) {
				continue // refused by the lease: down, and counted
			}
			if errors.Is(err, lease.ErrUnavailable) {
				l.retryLater(sl)
				continue
			}
			res.Error = fmt.Sprintf("node %s failed to start: %v", sl.name, err)
			l.changed()
			r.finish(res, 0)
			return false
		}
		l.maintain(sl)
	}
	for i, f := range r.s.Faults {
		l.d.schedule(f.At, faultEvent{i})
		if r.metrics != nil {
			_, end := f.Observed(r.s.Duration)
			l.d.schedule(end, windowEndEvent{i})
		}
	}
	if tl := r.mu.tl; tl != nil {
		for i := 1; i <= tl.n; i++ {
			l.d.schedule(min(time.Duration(i)*tl.width, r.s.Duration-1), sampleEvent{i - 1})
		}
	}
	l.changed()
	return true
}

// addSeries gives the slot its timeline series from offset at.
func (l *lifecycle) addSeries(sl *slot, at time.Duration) {
	l.mu.Lock()
	l.mu.tl.addSeries(sl, at)
	l.mu.Unlock()
}

// newSlots creates the declared nodes' slots (not started).
func (l *lifecycle) newSlots() {
	r := l.run
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
		spec := target.SpecOf(r.st.Apply(n))
		sl := &slot{idx: i, name: n.Name, spec: spec, alive: true, host: l.d.newHost(0)}
		sl.host.shadow.Step(spec.ClockOffset)
		if r.gens != nil {
			sl.nm, _ = r.gens.Node(r.s.Name + "/" + r.st.Name + "/" + n.Name)
		}
		r.slots = append(r.slots, sl)
	}
}

// newHostName returns a fresh host name for a node moving hosts.
func (l *lifecycle) newHostName(node, why string) string {
	l.hosts++
	return fmt.Sprintf("%s-%s%d", node, why, l.hosts)
}

// startSlot starts the slot's node on its host (a fresh Start), registers
// its issuer and reports the error; the slot is down on error.
func (l *lifecycle) startSlot(sl *slot) error {
	env := target.Env{Base: sl.host.base, Metrics: sl.nm, Run: l.runID}
	if st := l.storeOf(sl.host); st != nil {
		env.Leases = st
	}
	sl.startedAt = l.d.now()
	n, err := l.tgt.Start(l.ctx, sl.spec, env)
	sl.readyAt = l.d.now()
	sl.node = n
	if n != nil {
		l.noteStarted(n)
	}
	l.afterStart(sl, err)
	return err
}

// restartSlot starts a stopped node again on the same host.
func (l *lifecycle) restartSlot(sl *slot) error {
	if sl.node == nil {
		return l.startSlot(sl)
	}
	sl.startedAt = l.d.now()
	err := sl.node.Start(l.ctx)
	sl.readyAt = l.d.now()
	l.afterStart(sl, err)
	return err
}

func (l *lifecycle) afterStart(sl *slot, err error) {
	worker := sl.spec.Worker
	if err == nil {
		sl.up, sl.downReason = true, ""
		if w := sl.node.Worker(); w >= 0 {
			worker = w
		}
		if ln, ok := sl.node.(target.LeaseNode); ok {
			sl.rebinds = ln.LeaseStats().Rebinds
			l.lease.counted = true
		}
	} else {
		sl.up, sl.downReason = false, err.Error()
		if refusedStart(err) {
			l.lease.refused = append(l.lease.refused, refusedStartText(sl, l.d.now(), err))
			sl.downReason = "refused a worker ID: " + err.Error()
			if errors.Is(err, lease.ErrPeerClockSkew) {
				sl.downReason = "refused by the peer clock check: " + err.Error()
			}
		}
	}
	if err == nil && sl.pending && worker != sl.worker {
		// A start that failed registered this incarnation with the
		// worker it asked for; the lease gave another: a new issuer.
		sl.incarnation++
	}
	sl.pending = err != nil
	sl.worker = worker
	l.register(sl)
	sl.publish() // requests from now on go to this incarnation
}

// stopSlot stops the slot's node.
func (l *lifecycle) stopSlot(sl *slot, o target.StopOptions, reason string) error {
	sl.up, sl.downReason = false, reason
	sl.gen++
	// Requests from now on find the node down; only those already sent
	// may still reach the old process (as they would a real one).
	sl.publish()
	if sl.nm != nil {
		sl.nm.Detach()
	}
	if sl.node == nil {
		return nil
	}
	err := sl.node.Stop(l.ctx, o)
	l.collectViolations(sl.node, sl.name, sl.incarnation)
	return err
}

// followLease notes a node whose lease keeper lost its lease and whose
// generator was rebuilt on a new one (in Maintain): a new worker ID makes
// a new incarnation, so the verifier checks it as the worker's new issuer.
func (l *lifecycle) followLease(sl *slot) {
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
	l.lease.rebinds += n - sl.rebinds
	sl.rebinds = n
	w := sl.node.Worker()
	at := Duration(l.d.now())
	if w < 0 || w == sl.worker {
		l.lease.rebound = append(l.lease.rebound, fmt.Sprintf("%s at %s: lease lost and acquired again: new generator on worker %d", sl.name, at, w))
		return
	}
	l.lease.rebound = append(l.lease.rebound, fmt.Sprintf("%s at %s: lease lost: new generator on worker %d (was %d), incarnation %d", sl.name, at, w, sl.worker, sl.incarnation+1))
	sl.incarnation++
	sl.worker = w
	sl.startedAt, sl.readyAt = l.d.now(), l.d.now()
	l.register(sl)
}

// retryLater has a node whose start could not reach the lease store try
// again after its lease retry interval (a tenth of the TTL), as a node
// waiting for its lease does; it stays down meanwhile.
func (l *lifecycle) retryLater(sl *slot) {
	sl.downReason = "waiting for the lease store: " + sl.downReason
	l.d.schedule(l.d.now()+sl.leaseTTL()/10, retryEvent{sl.idx, sl.gen})
}

// retryStart starts a node again whose start could not reach the lease
// store (the same incarnation, which issued nothing yet).
func (l *lifecycle) retryStart(si, gen int) {
	sl := l.slots[si]
	if sl.up || !sl.alive || sl.gen != gen {
		return
	}
	sl.host.advance(l.d.now())
	err := l.restartSlot(sl)
	switch {
	case err == nil:
		l.maintain(sl)
	case errors.Is(err, lease.ErrUnavailable):
		l.retryLater(sl)
	}
}

// maintain runs the node's periodic work and schedules the next.
//
// A simulated host whose clock ran ahead of the run's time (it waited out
// a rewind or a VM pause for a request, and is busy until then) does its
// lease work only when the run's time reaches its own: the lease store
// lives on the run's time, so a renewal sent "from the future" would reach
// it early and find a lease valid that is long expired by then.
func (l *lifecycle) maintain(sl *slot) {
	if sl.node == nil || !sl.up {
		return
	}
	now := l.d.now()
	if ahead := sl.host.now(); l.simulated() && ahead > now {
		l.holdKeeper(sl, now, ahead)
		l.d.schedule(ahead, maintainEvent{sl.idx, sl.gen})
		return
	}
	if l.simulated() && l.hangs(sl) {
		l.hangCall(sl)
		return
	}
	d := sl.node.Maintain(l.ctx)
	l.followLease(sl)
	if d >= 0 {
		l.d.schedule(now+max(d, time.Millisecond), maintainEvent{sl.idx, sl.gen})
	}
}

// poke wakes the node's lease keeper now, outside its schedule (a closed
// fence), as a real keeper's loop is poked; a simulated host that is ahead
// (see maintain) is poked once when the run's time reaches it.
func (l *lifecycle) poke(sl *slot) {
	if sl.node == nil || !sl.up {
		return
	}
	if ahead := sl.host.now(); l.simulated() && ahead > l.d.now() {
		l.holdKeeper(sl, l.d.now(), ahead)
		if sl.poked != ahead {
			sl.poked = ahead
			l.d.schedule(ahead, pokeEvent{sl.idx, sl.gen})
		}
		return
	}
	if sl.hungUntil > l.d.now() {
		return // the keeper is stuck in a store call
	}
	sl.node.Maintain(l.ctx)
	l.followLease(sl)
}

// fault applies scenario fault fi now.
func (l *lifecycle) fault(fi int) {
	f := l.s.Faults[fi]
	now := l.d.now()
	l.faults[fi].Confirmed = true
	if late := now - f.At; f.Kind.Clock() && late > l.lateness() {
		// The driver was held up (a node's start blocks it): the clock
		// fault's window, measured from its instant, would judge time it
		// did not cover. (A restart or clone that lands late is still the
		// fault it was; its incarnations must serve all the same.)
		l.unconfirmed(fi, fmt.Sprintf("the fault landed %s after its instant: the run's driver was held up (by a node's start, which lasts until the node is ready, a slow measurement, or the machine's scheduler)", Duration(late)))
	}
	if l.metrics != nil {
		l.metrics.FaultInjected(f.Kind)
		_ = l.metrics.SetWindow(metrics.FaultWindow{Name: f.Name, Kind: f.Kind}, true)
	}
	switch f.Kind {
	case faults.KindRestart:
		for _, name := range f.Nodes {
			sl := l.slot(name)
			sl.host.advance(now)
			if f.Point != "" && l.armCrash(fi, sl) {
				continue // crashes inside a later call (crash.go)
			}
			l.restartNode(fi, sl)
		}
	case faults.KindHandoff:
		sl := l.slot(f.Nodes[0])
		sl.host.advance(now)
		stop, why := target.StopOptions{Graceful: true}, "handing off"
		if f.Crash { // kill -9: no final mark, the lease left to expire
			stop, why = target.StopOptions{}, "crashed; handing off"
		}
		if err := l.stopSlot(sl, stop, why); err != nil {
			l.stopFailed(fi, sl, err)
		}
		if f.Gap == 0 {
			l.handoff(fi, sl)
		} else {
			l.d.schedule(now+f.Gap, upEvent{fi, sl.idx})
		}
	case faults.KindClone:
		for _, name := range f.Nodes {
			l.clone(fi, l.slot(name))
		}
	case faults.KindStoreOutage:
		l.storeOutage(fi)
	case faults.KindStoreStep, faults.KindStoreDrift, faults.KindStorePause:
		l.storeClockFault(fi)
	default:
		l.clockFault(fi)
	}
}

// restartNode stops the slot's node now (a crash, or a graceful stop)
// and brings it back as restart fault fi says.
func (l *lifecycle) restartNode(fi int, sl *slot) {
	f := l.s.Faults[fi]
	if err := l.stopSlot(sl, target.StopOptions{Graceful: f.Graceful, Wipe: f.WipeCheckpoint}, "restarting"); err != nil {
		l.stopFailed(fi, sl, err)
	}
	if f.OffsetWhileDown != 0 {
		step := faults.Fault{Kind: faults.KindStep, By: f.OffsetWhileDown}
		applyShadow(sl.host.shadow, step)
		if ctl := clockOf(sl); ctl != nil {
			_ = ctl.Apply(l.ctx, step)
		}
	}
	if f.For == 0 {
		l.bringUp(fi, sl)
	} else {
		l.d.schedule(l.d.now()+f.For, upEvent{fi, sl.idx})
	}
}

// clockFault applies clock fault fi to its nodes and schedules the probes
// that confirm it.
func (l *lifecycle) clockFault(fi int) {
	f := l.s.Faults[fi]
	now := l.d.now()
	cf := f.Fault
	if f.Kind == faults.KindLeap {
		cf.At = l.start.Add(f.At)
	}
	for _, name := range f.Nodes {
		sl := l.slot(name)
		sl.host.advance(now)
		ctl := clockOf(sl)
		if ctl == nil {
			// No node runs on the host (its start is pending): the next
			// one starts with the host's first offset, so the shadow
			// keeps that too, or it would judge the node's IDs against a
			// clock the node never had.
			why := "clock not controllable"
			if sl.node == nil {
				why = "no node is running (" + sl.downReason + "): the fault reached no process"
			}
			l.unconfirmed(fi, sl.name+": "+why)
			continue
		}
		before := sl.host.shadow.Offset()
		applyShadow(sl.host.shadow, cf)
		sent := l.d.now()
		if err := ctl.Apply(l.ctx, cf); err != nil {
			l.unconfirmed(fi, sl.name+": "+err.Error())
			continue
		}
		// A fault whose offset grows with time (a freeze, pause, smear,
		// slew or drift) landed on the node at some instant during the
		// call, the shadow's at its start: the measurement allows for
		// the call's length (zero in simulated time).
		var slack time.Duration
		switch f.Kind {
		case faults.KindFreeze, faults.KindPause, faults.KindSmear, faults.KindSlew, faults.KindDrift:
			slack = l.d.now() - sent
		}
		d := l.probeDelay(f, before)
		l.probes = append(l.probes, probe{fi: fi, si: sl.idx, before: before, slack: slack})
		switch {
		case l.simulated() && (f.Kind == faults.KindFreeze || f.Kind == faults.KindPause):
			// A freeze or pause ends: measure it now, before a request
			// that waits it out carries the host past its end. Moving the
			// host's time on by d is what the fault does anyway (a paused
			// node serves nothing meanwhile) or costs requests arriving in
			// those few microseconds that much latency.
			sl.host.advance(sl.host.now() + d)
			l.probe(len(l.probes) - 1)
		case d == 0:
			l.probe(len(l.probes) - 1)
		default:
			l.d.schedule(min(now+d, l.s.Duration-1), probeEvent{len(l.probes) - 1})
		}
	}
}

// lateness is how late after its instant a fault may land in real mode and
// still count as landing there: the calibrated timing tolerance, at least
// 20 ms. Simulated faults land on time.
func (l *lifecycle) lateness() time.Duration {
	if l.simulated() {
		return 0
	}
	d := 20 * time.Millisecond
	if c := l.opts.Calibration; c != nil {
		d = max(d, 2*time.Duration(c.Tolerance))
	}
	return d
}

// applyShadow applies a clock fault to a host's shadow clock.
func applyShadow(c *faults.Clock, f faults.Fault) {
	_ = f.ApplyTo(c) // the scenario was validated: every kind here is a clock fault
}

// clockOf returns the controls of the slot's node's clock, nil when it has
// no node or none.
func clockOf(sl *slot) target.ClockControl {
	if sl.node == nil {
		return nil
	}
	return sl.node.Clock()
}

// stopFailed notes a stop that returned an error. A lease the store could
// not be asked to release (it is unreachable) is a fact of the run, not a
// fault that failed: the lease expires instead. Anything else leaves the
// fault unconfirmed.
func (l *lifecycle) stopFailed(fi int, sl *slot, err error) {
	if errors.Is(err, lease.ErrUnavailable) {
		l.detail(fi, sl.name+": lease not released (store unreachable): it expires instead")
		return
	}
	l.unconfirmed(fi, sl.name+": stop failed: "+err.Error())
}

// detail adds a line to fault fi's result.
func (r *run) detail(fi int, s string) {
	fr := &r.faults[fi]
	fr.Detail = append(fr.Detail, s)
}

// unconfirmed marks fault fi unconfirmed, saying why.
func (r *run) unconfirmed(fi int, detail string) {
	r.faults[fi].Confirmed = false
	r.faults[fi].failed = true
	r.detail(fi, detail)
}

// probeDelay is how long after a clock fault the harness measures the
// node's clock offset to confirm it: long enough for the fault's own effect
// to stand well above the measurement tolerance, never past its end.
func (l *lifecycle) probeDelay(f scenario.Fault, offset time.Duration) time.Duration {
	need := 20 * l.tol
	var d time.Duration
	switch f.Kind {
	case faults.KindStep, faults.KindRevert:
		// The offset holds from the instant on: a real-mode measurement
		// waits out the fault burst, so as not to compete with its calls.
		if !l.simulated() {
			return l.s.Load.FaultBurst
		}
		return 0
	case faults.KindLeap:
		d = time.Millisecond
		if offset < 0 {
			d += -offset
		}
	case faults.KindFreeze, faults.KindPause:
		d = max(need, time.Millisecond)
		if f.For > 0 {
			d = min(d, f.For/2)
		}
	case faults.KindSmear:
		by := max(f.By, -f.By)
		d = time.Duration(float64(need) * float64(f.Window) / float64(by))
		d = min(max(d, time.Millisecond), f.Window)
	case faults.KindSlew:
		ppm := f.PPM
		if ppm == 0 {
			ppm = faults.DefaultSlewPPM
		}
		d = time.Duration(float64(need) * 1e6 / ppm)
		d = min(max(d, time.Millisecond), f.SlewDuration())
	case faults.KindDrift:
		ppm := max(f.PPM, -f.PPM)
		d = max(time.Duration(float64(need)*1e6/ppm), time.Millisecond)
	}
	return d
}

// probe measures probe pi.
func (l *lifecycle) probe(pi int) {
	p := l.probes[pi]
	sl := l.slots[p.si]
	sl.host.advance(l.d.now())
	l.confirmWithin(p.fi, sl, p.before, sl.host.shadow.Offset()-p.before, p.slack)
}

// confirm compares a node's measured clock offset with its shadow's and
// records the outcome in fault fi's result: unconfirmed unless the two
// agree within the tolerance and the fault's effect was measurable.
func (l *lifecycle) confirm(fi int, sl *slot, effect time.Duration) {
	l.confirmWithin(fi, sl, sl.host.shadow.Offset()-effect, effect, 0)
}

// confirmWithin is confirm with slack added to the tolerance; before is
// the node's shadow offset before the fault. A node that offers no clock
// reading of its own leaves the fault to be confirmed by the time its IDs
// carry (watchReach).
func (l *lifecycle) confirmWithin(fi int, sl *slot, before, effect, slack time.Duration) {
	m := l.measure(sl, effect, slack)
	switch m.state {
	case reached:
		l.detail(fi, sl.name+": "+m.detail)
		if m.process && l.kind.Timed() {
			// The process's reading is one piece of evidence; the time its
			// IDs carry must not contradict it.
			l.watchReach(fi, sl, before, "", "", true)
		}
	case pendingReach:
		l.watchReach(fi, sl, before, m.detail, m.diag, false)
	default:
		d := sl.name + ": " + m.detail
		if m.diag != "" {
			d += "; diagnostic, not evidence: " + m.diag
		}
		l.unconfirmed(fi, d)
		l.faults[fi].Artifact = l.faults[fi].Artifact || m.artifact
	}
}

// reachState is what a node's own evidence says of a fault.
type reachState int

const (
	// notReached: the evidence shows the fault did not reach the node,
	// or cannot be had.
	_ reachState = iota
	// reached: the node's own clock reading shows the fault.
	reached
	// pendingReach: the node offers no reading of its own; its IDs decide.
	pendingReach
)

// measurement is the outcome of measuring a fault on a node.
type measurement struct {
	state  reachState
	detail string
	diag   string // what a probe beside the node reads (not evidence)
	// artifact: the fault may have shown the node a clock the scenario
	// did not ask for (see target.ErrArtifact).
	artifact bool
	// process: the reading came from a round trip to the node's process
	// (target.Bracketed).
	process bool
}

// measure reads the node's offset and compares it with the shadow's,
// within the tolerance plus slack plus the reading's own half-width.
func (l *lifecycle) measure(sl *slot, effect, slack time.Duration) measurement {
	if sl.node == nil {
		return measurement{detail: "node not running: " + sl.downReason}
	}
	ctl := sl.node.Clock()
	if ctl == nil {
		return measurement{detail: "clock not controllable"}
	}
	diagnose := func() string {
		if d, ok := ctl.(target.Diagnoser); ok {
			return d.Diagnose(l.ctx)
		}
		return ""
	}
	// The node reads its offset at some instant during the call: in real
	// mode, while a pause or freeze moves the offset, the shadow's offsets
	// at the call's start and end bracket what it may answer.
	first := sl.host.shadow.Offset()
	var got, half time.Duration
	var err error
	if b, ok := ctl.(target.Bracketed); ok {
		got, half, err = b.OffsetWithin(l.ctx)
	} else {
		got, err = ctl.Offset(l.ctx)
	}
	switch {
	case errors.Is(err, target.ErrArtifact):
		return measurement{detail: strings.TrimPrefix(err.Error(), "target: "), artifact: true}
	case errors.Is(err, target.ErrNotReached):
		return measurement{detail: strings.TrimPrefix(err.Error(), "target: "), diag: diagnose()}
	case errors.Is(err, target.ErrNoReading):
		return measurement{state: pendingReach, detail: strings.TrimPrefix(err.Error(), target.ErrNoReading.Error()+": "), diag: diagnose()}
	case err != nil && l.info.Caps.Simulated:
		return measurement{detail: "offset unreadable: " + err.Error()}
	case err != nil:
		// A process whose reading failed may still show the fault in its
		// IDs; the failure itself (a hang, a violation) is judged apart.
		return measurement{state: pendingReach, detail: "its clock reading failed: " + err.Error(), diag: diagnose()}
	}
	want := sl.host.shadow.Offset()
	lo, hi := min(first, want), max(first, want)
	var d time.Duration
	switch {
	case got < lo:
		d = lo - got
	case got > hi:
		d = got - hi
	}
	tol := l.tol + half
	within := ""
	if half > 0 {
		within = " ±" + scenario.FormatDuration(half)
	}
	if d > tol+slack {
		msg := fmt.Sprintf("the process reads offset %s%s, want %s: the fault did not reach it as modelled", scenario.FormatDuration(got), within, scenario.FormatDuration(want))
		if lo != hi {
			msg = fmt.Sprintf("the process reads offset %s%s, want %s to %s: the fault did not reach it as modelled", scenario.FormatDuration(got), within, scenario.FormatDuration(lo), scenario.FormatDuration(hi))
		}
		return measurement{detail: msg, diag: diagnose()}
	}
	if half > 0 {
		// A reading with an interval of its own (a process's round trip)
		// must tell the faulted clock from the unfaulted one: it lies
		// farther from where the clock would read without the fault than
		// the tolerance.
		if u := want - effect; max(got-u, u-got) <= tol+slack {
			return measurement{detail: fmt.Sprintf("offset %s%s: as close to the unfaulted clock (%s) as to the fault's, within the tolerance %s", scenario.FormatDuration(got), within, scenario.FormatDuration(u), tol+slack)}
		}
	} else if max(effect, -effect) < 2*tol {
		return measurement{detail: fmt.Sprintf("offset %s%s: the fault's effect (%s) is below the measurement tolerance %s", scenario.FormatDuration(got), within, scenario.FormatDuration(effect), tol)}
	}
	return measurement{state: reached, process: half > 0, detail: fmt.Sprintf("offset %s%s (want %s)", scenario.FormatDuration(got), within, scenario.FormatDuration(want))}
}

// storeOutage cuts the lease store off: for everyone, or for the named
// nodes' hosts (a partition). It is confirmed when the store (or the
// host's link to it) answers unavailable.
func (l *lifecycle) storeOutage(fi int) {
	f := l.s.Faults[fi]
	if sf, ok := l.tgt.(target.StoreFaulter); ok {
		l.cutTargetStore(sf, fi)
		return
	}
	if l.leases == nil {
		l.unconfirmed(fi, "the run has no lease store")
		return
	}
	var cut []*storeLink
	if f.Partition {
		for _, name := range f.Nodes {
			link := l.storeOf(l.slot(name).host)
			switch {
			case f.Hang:
				link.hang.Store(true)
			case f.Direction == "inbound":
				link.deaf.Store(true)
			default:
				link.cut.Store(true)
			}
			cut = append(cut, link)
		}
	} else if f.Hang {
		l.storeHung.Store(true)
		cut = append(cut, &storeLink{Registry: l.watch, whole: &l.storeHung})
	} else {
		l.leases.SetAvailable(false)
		cut = append(cut, &storeLink{Registry: l.leases})
	}
	for _, link := range cut {
		if _, err := link.List(l.ctx); !errors.Is(err, lease.ErrUnavailable) {
			l.unconfirmed(fi, fmt.Sprintf("lease store still answers: %v", err))
		}
	}
	what := "lease store down"
	if f.Partition {
		what = strings.Join(f.Nodes, ", ") + " cut off from the lease store"
		if f.Direction != "" && f.Direction != "both" {
			what += " (" + f.Direction + " only)"
		}
	}
	if f.Hang {
		what += ", calls hanging until their timeout"
	}
	l.detail(fi, fmt.Sprintf("%s for %s", what, scenario.FormatDuration(f.For)))
	if l.cuts == nil {
		l.cuts = map[int][]*storeLink{}
	}
	l.cuts[fi] = cut
	l.d.schedule(l.d.now()+f.For, storeBackEvent{fi})
}

// storeBack ends store outage fi.
func (l *lifecycle) storeBack(fi int) {
	if sf, ok := l.tgt.(target.StoreFaulter); ok {
		l.healTargetStore(sf, fi)
		return
	}
	f := l.s.Faults[fi]
	if f.Kind == faults.KindStorePause || (f.Hang && !f.Partition) {
		l.storeHung.Store(false)
		l.detail(fi, fmt.Sprintf("back at %s", Duration(l.d.now())))
		l.resumeHung()
		return
	}
	if !f.Partition {
		l.leases.SetAvailable(true)
	}
	defer l.resumeHung()
	for _, link := range l.cuts[fi] {
		link.cut.Store(false)
		link.deaf.Store(false)
		link.hang.Store(false)
		if _, err := link.List(l.ctx); err != nil {
			l.unconfirmed(fi, "lease store did not come back: "+err.Error())
			return
		}
	}
	l.detail(fi, fmt.Sprintf("back at %s", Duration(l.d.now())))
}

// up handles the end of a restart's down time or a handoff's gap.
func (l *lifecycle) up(fi int, sl *slot) {
	if l.s.Faults[fi].Kind == faults.KindHandoff {
		l.handoff(fi, sl)
		return
	}
	l.bringUp(fi, sl)
}

// bringUp restarts a node on its host.
func (l *lifecycle) bringUp(fi int, sl *slot) {
	sl.host.advance(l.d.now())
	sl.incarnation++
	if err := l.restartSlot(sl); err != nil {
		switch {
		case errors.Is(err, lease.ErrAllTaken):
			l.detail(fi, fmt.Sprintf("%s: restart refused a worker ID by the lease", sl.name))
		case errors.Is(err, lease.ErrPeerClockSkew):
			l.detail(fi, fmt.Sprintf("%s: restart refused by the peer clock check", sl.name))
		case errors.Is(err, lease.ErrUnavailable):
			l.detail(fi, fmt.Sprintf("%s: restarted, waiting for the lease store", sl.name))
			l.retryLater(sl)
		default:
			l.unconfirmed(fi, sl.name+": restart failed: "+err.Error())
		}
		return
	}
	l.maintain(sl)
	if f := l.s.Faults[fi]; f.OffsetWhileDown != 0 {
		l.confirm(fi, sl, f.OffsetWhileDown)
	} else {
		l.detail(fi, fmt.Sprintf("%s: restarted as incarnation %d (worker %d)", sl.name, sl.incarnation, sl.node.Worker()))
	}
}

// handoff starts a node's worker ID on a new host whose clock is Behind
// (after the old host stopped, gracefully or by a crash).
func (l *lifecycle) handoff(fi int, sl *slot) {
	f := l.s.Faults[fi]
	if sl.node != nil {
		_ = sl.node.Close()
		l.collectViolations(sl.node, sl.name, sl.incarnation)
		if ln, ok := sl.node.(target.LeaseNode); ok {
			l.lease.gone = l.lease.gone.Add(ln.LeaseStats())
		}
	}
	sl.host = l.d.newHost(l.d.now())
	host := l.newHostName(sl.name, "host")
	if n, ok := l.s.Node(sl.name); !ok || n.Holder == "" {
		sl.spec.Host = host // else the node keeps its sticky identity (a StatefulSet pod on a new machine)
	}
	sl.spec.ClockOffset = -f.Behind
	sl.host.shadow.Step(-f.Behind)
	sl.incarnation++
	sl.gen++
	if err := l.startSlot(sl); err != nil {
		if errors.Is(err, lease.ErrUnavailable) {
			l.detail(fi, fmt.Sprintf("%s: started on %s, waiting for the lease store", sl.name, host))
			l.retryLater(sl)
			return
		}
		if errors.Is(err, lease.ErrPeerClockSkew) {
			l.detail(fi, fmt.Sprintf("%s: start on %s refused by the peer clock check", sl.name, host))
			return
		}
		l.unconfirmed(fi, fmt.Sprintf("%s: start on %s failed: %v", sl.name, host, err))
		return
	}
	l.maintain(sl)
	if f.Behind != 0 {
		l.confirm(fi, sl, -f.Behind)
		return
	}
	l.detail(fi, fmt.Sprintf("%s: started on host %s (worker %d)", sl.name, host, sl.node.Worker()))
}

// clone starts a second node with src's spec on a new host.
func (l *lifecycle) clone(fi int, src *slot) {
	f := l.s.Faults[fi]
	now := l.d.now()
	name := src.name + "-clone"
	for n := 2; l.hasSlot(name); n++ {
		name = fmt.Sprintf("%s-clone%d", src.name, n)
	}
	sl := &slot{idx: len(l.slots), name: name, spec: src.spec, clone: true, alive: true, host: l.d.newHost(now)}
	sl.spec.Name, sl.spec.Host = name, name
	same := ""
	if f.SameHolder {
		sl.spec.Host = src.spec.Host // a copy with the original's host or pod name
		same = " with " + src.name + "'s identity"
	}
	sl.host.shadow.Step(sl.spec.ClockOffset)
	if l.gens != nil {
		sl.nm, _ = l.gens.Node(l.s.Name + "/" + l.st.Name + "/" + name)
	}
	l.slots = append(l.slots, sl)
	l.addSeries(sl, now)
	err := l.startSlot(sl)
	switch {
	case err == nil:
		l.maintain(sl)
		note := ""
		if sl.node.Worker() != src.spec.Worker {
			note = " (the lease gave it another)"
		}
		l.detail(fi, fmt.Sprintf("%s: clone of %s%s started with worker %d%s", name, src.name, same, sl.node.Worker(), note))
		if sl.worker == src.worker && scenario.LeaseKind(sl.spec.Lease) == scenario.LeaseNone {
			// Without a lease nothing is meant to keep the two apart;
			// with one, keeping them out of each other's ticks is the
			// lease's work (fencing, the handoff guard), not a gap in
			// the evidence.
			l.watchOverlap(fi, src, sl)
		}
	case errors.Is(err, lease.ErrAllTaken):
		l.detail(fi, fmt.Sprintf("%s: clone of %s%s refused a worker ID by the lease", name, src.name, same))
	case errors.Is(err, lease.ErrPeerClockSkew):
		l.detail(fi, fmt.Sprintf("%s: clone of %s%s refused by the peer clock check", name, src.name, same))
	case errors.Is(err, lease.ErrUnavailable):
		l.detail(fi, fmt.Sprintf("%s: clone of %s%s started, waiting for the lease store", name, src.name, same))
		l.retryLater(sl)
	default:
		l.unconfirmed(fi, fmt.Sprintf("%s: clone of %s failed to start: %v", name, src.name, err))
	}
	l.changed()
	if l.plan.perNode {
		l.d.addClients(sl.idx, now)
	}
	if f.For > 0 {
		// The clone serves for its whole span once ready: a process that
		// takes a while to start does not lose it (in simulated time
		// starts take none).
		l.d.schedule(max(now, sl.readyAt)+f.For, cloneEndEvent{sl.idx})
	}
}

// cloneEnd stops the clone in sl for good.
func (l *lifecycle) cloneEnd(sl *slot) {
	sl.host.advance(l.d.now())
	sl.alive = false // published with the stop: its clients end, sending nothing more
	l.endOverlap(sl.idx)
	_ = l.stopSlot(sl, target.StopOptions{}, "clone ended")
}

// sample records every node's clock offset at the end of timeline bucket i.
func (l *lifecycle) sample(i int) {
	for _, sl := range l.slots {
		if sl.series == nil || !sl.up || sl.node == nil || !sl.alive {
			continue
		}
		ctl := sl.node.Clock()
		if ctl == nil {
			continue
		}
		sl.host.advance(l.d.now())
		if off, err := ctl.Offset(l.ctx); err == nil {
			l.mu.Lock()
			l.mu.tl.offset(sl, i, off)
			l.mu.Unlock()
		}
	}
}
