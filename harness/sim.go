package harness

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/telemetry"
)

// The simulated driver is a discrete-event simulation on virtual time.
//
// Every host (a node's machine) has its own virtual clock in auto mode
// under the node's fault clock. Events (request arrivals, faults, probes,
// restarts, lease renewals, timeline samples) are processed in time order,
// ties in the order they were scheduled. Before a node handles an event
// its host's clock is advanced to the event's time. A call that must wait
// (a rewind, an exhausted sequence, a start fence, a VM pause) sleeps on
// the host's clock, which advances it: the node stays busy until then, and
// requests that arrive meanwhile are served after it, from the host's later
// time, as if queued. That is exact for waits that all end at the same
// instant, which is how the generator waits; a wait never blocks the
// process and never delays other hosts.
//
// Clients follow the open model: arrivals come from the plan's pacer with
// seeded jitter, whether or not earlier requests were answered. In "max"
// stages a client sends its next request Simulation.Service after the
// previous one was answered (retryAfter after a failure).

type evKind uint8

const (
	evFault evKind = iota
	evProbe
	evUp
	evCloneEnd
	evMaintain
	evSample
	evWindowEnd
	evStoreBack
	evPoke
	evRetryStart
	evArrival
)

type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	a, b int
	c    time.Duration
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simClient is one arrival stream.
type simClient struct {
	idx  int
	slot int // -1: load in total, routed to any live slot
	rng  *rand.Rand
}

// probe is a pending offset measurement confirming fault fi on slot si.
type probe struct {
	fi, si int
	before time.Duration // shadow offset before the fault
}

// sim is the driver of a run: in simulated mode it processes every event
// (arrivals included) in one goroutine on virtual time; in real mode (real
// is set) it processes the lifecycle events in one goroutine on the wall
// clock while each client runs in its own goroutine.
type sim struct {
	*run
	q       eventQueue
	seq     uint64
	t       time.Duration
	clients []*simClient
	probes  []probe
	buf     []generator.ID
	events  uint64
	real    *realDriver
	mkHost  func(at time.Duration) *host
	cuts    map[int][]*storeLink // links a store outage cut, by fault index
}

// globalClock reads the simulation's reference time: the lease store's
// clock. It never sleeps.
type globalClock struct{ s *sim }

func (c globalClock) Now() (wall, mono int64) { return c.s.startNs + int64(c.s.t), int64(c.s.t) }
func (c globalClock) Sleep(time.Duration)     {}

func (s *sim) push(at time.Duration, kind evKind, a, b int) {
	s.seq++
	heap.Push(&s.q, event{at: at, seq: s.seq, kind: kind, a: a, b: b})
}

func (s *sim) newHost(at time.Duration) *host {
	v := faults.NewVirtual(s.start.Add(at), true)
	return &host{base: v, virt: v, origin: at, shadow: faults.New(v)}
}

// runSimulated runs r on virtual time.
func runSimulated(r *run, res *Result) {
	r.start = r.s.Start
	r.startNs = r.start.UnixNano()
	s := &sim{run: r, buf: make([]generator.ID, r.plan.batch)}
	r.now = func() time.Duration { return s.t }
	var leaseClock generator.Clock = globalClock{s}
	if !s.setup(res, s.newHost, leaseClock) {
		return
	}
	if r.plan.perNode {
		for si := range r.mu.slots {
			s.addClients(si, 0)
		}
	} else {
		s.addClients(-1, 0)
	}
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		if e.at >= r.s.Duration {
			break
		}
		s.t = e.at
		s.events++
		if s.events&0x3fff == 0 {
			if err := r.ctx.Err(); err != nil {
				res.Error = "interrupted: " + err.Error()
				break
			}
			r.progress(s.t, false)
		}
		switch e.kind {
		case evArrival:
			s.arrival(e.a)
		default:
			s.handle(e)
		}
		if r.mu.stopped {
			break
		}
	}
	r.progress(r.s.Duration, true)
	r.finish(res, s.events)
}

// setup starts the nodes and schedules the lifecycle events; false when a
// node failed to start (res then says why and is final).
func (s *sim) setup(res *Result, mkHost func(time.Duration) *host, leaseClock generator.Clock) bool {
	r := s.run
	s.mkHost = mkHost
	if r.usesLeases() {
		r.leases = lease.NewMemory(leaseClock)
	}
	r.windows()
	if r.opts.Timeline {
		r.mu.tl = newTimeline(r.s, len(r.s.Nodes))
	}
	r.beginMetrics()
	r.newSlots(mkHost)
	for _, sl := range r.mu.slots {
		r.mu.tl.addSeries(sl, 0)
		if err := r.startSlot(sl); err != nil {
			if errors.Is(err, lease.ErrAllTaken) {
				continue // refused a worker ID: down, and counted
			}
			if errors.Is(err, lease.ErrUnavailable) {
				s.retryLater(sl)
				continue
			}
			res.Error = fmt.Sprintf("node %s failed to start: %v", sl.name, err)
			r.finish(res, 0)
			return false
		}
		s.maintain(sl)
	}
	for i, f := range r.s.Faults {
		s.push(f.At, evFault, i, 0)
		if r.metrics != nil {
			_, end := f.Observed(r.s.Duration)
			s.push(end, evWindowEnd, i, 0)
		}
	}
	if r.mu.tl != nil {
		for i := 1; i <= r.mu.tl.n; i++ {
			s.push(min(time.Duration(i)*r.mu.tl.width, r.s.Duration-1), evSample, i-1, 0)
		}
	}
	return true
}

// handle processes a lifecycle event.
func (s *sim) handle(e event) {
	switch e.kind {
	case evFault:
		s.fault(e.a)
	case evProbe:
		s.probe(e.a)
	case evUp:
		s.up(e)
	case evCloneEnd:
		s.cloneEnd(e.a)
	case evMaintain:
		sl := s.mu.slots[e.a]
		if sl.up && sl.gen == e.b {
			advance(sl.host, s.t)
			s.maintain(sl)
		}
	case evSample:
		s.sample(e.a)
	case evWindowEnd:
		f := s.s.Faults[e.a]
		_ = s.metrics.SetWindow(telemetry.FaultWindow{Name: f.Name, Kind: string(f.Kind)}, false)
	case evStoreBack:
		s.storeBack(e.a)
	case evPoke:
		sl := s.mu.slots[e.a]
		if sl.up && sl.gen == e.b {
			advance(sl.host, s.t)
			s.poke(sl)
		}
	case evRetryStart:
		s.retryStart(e)
	}
}

// retryLater has a node whose start could not reach the lease store try
// again after its lease retry interval (a tenth of the TTL), as a node
// waiting for its lease does; it stays down meanwhile.
func (s *sim) retryLater(sl *slot) {
	ttl := sl.spec.LeaseTTL
	if ttl <= 0 {
		ttl = lease.DefaultTTL
	}
	sl.downReason = "waiting for the lease store: " + sl.downReason
	s.push(s.t+ttl/10, evRetryStart, sl.idx, sl.gen)
}

// retryStart starts a node again whose start could not reach the lease
// store (the same incarnation, which issued nothing yet).
func (s *sim) retryStart(e event) {
	sl := s.mu.slots[e.a]
	if sl.up || !sl.alive || sl.gen != e.b {
		return
	}
	advance(sl.host, s.t)
	err := s.restartSlot(sl)
	switch {
	case err == nil:
		s.maintain(sl)
	case errors.Is(err, lease.ErrUnavailable):
		s.retryLater(sl)
	}
}

// addClients creates the clients of slot si (-1: the total load) and
// schedules their first arrivals after t.
func (s *sim) addClients(si int, t time.Duration) {
	for k := 0; k < s.plan.clients; k++ {
		c := &simClient{idx: len(s.clients), slot: si}
		c.rng = s.rng(uint64(c.idx) + 1)
		s.clients = append(s.clients, c)
		if s.real != nil {
			s.real.spawn(s, c, t)
			continue
		}
		if next := s.plan.pace(t, true, c.rng); next >= 0 {
			s.push(next, evArrival, c.idx, 0)
		}
	}
}

// maintain runs the node's periodic work and schedules the next.
//
// A host whose clock ran ahead of the run's time (it waited out a rewind
// or a VM pause for a request, and is busy until then) does its lease work
// only when the run's time reaches its own: the lease store lives on the
// run's time, so a renewal sent "from the future" would reach it early and
// find a lease valid that is long expired by then.
func (s *sim) maintain(sl *slot) {
	if sl.node == nil || !sl.up {
		return
	}
	if ahead := hostNow(sl.host); s.real == nil && ahead > s.t {
		s.push(ahead, evMaintain, sl.idx, sl.gen)
		return
	}
	d := sl.node.Maintain(s.ctx)
	s.followLease(sl)
	if d >= 0 {
		s.push(s.t+max(d, time.Millisecond), evMaintain, sl.idx, sl.gen)
	}
}

// poke wakes the node's lease keeper now, outside its schedule (a closed
// fence), as a real keeper's loop is poked; a host that is ahead (see
// maintain) is poked once when the run's time reaches it.
func (s *sim) poke(sl *slot) {
	if sl.node == nil || !sl.up {
		return
	}
	if ahead := hostNow(sl.host); s.real == nil && ahead > s.t {
		if sl.poked != ahead {
			sl.poked = ahead
			s.push(ahead, evPoke, sl.idx, sl.gen)
		}
		return
	}
	sl.node.Maintain(s.ctx)
	s.followLease(sl)
}

// pick returns the slot a total-load request goes to: any live slot,
// uniformly.
func (s *sim) pick(rng *rand.Rand) *slot {
	var live []*slot
	for _, sl := range s.mu.slots {
		if sl.alive {
			live = append(live, sl)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rng.IntN(len(live))]
}

func (s *sim) arrival(ci int) {
	c := s.clients[ci]
	var sl *slot
	if c.slot >= 0 {
		sl = s.mu.slots[c.slot]
	} else {
		sl = s.pick(c.rng)
	}
	if sl == nil || !sl.alive {
		return // a clone that ended: its clients stop
	}
	arrive := s.t
	var end time.Duration
	failed := false
	if !sl.up {
		s.recordDown(sl.callee(), c.idx, arrive)
		end, failed = arrive, true
	} else {
		advance(sl.host, arrive)
		n, err := sl.node.Issue(s.ctx, s.buf)
		end = hostNow(sl.host)
		s.record(sl.callee(), c.idx, arrive, end, s.buf[:n], err)
		failed = err != nil
		if errors.Is(err, generator.ErrFenced) {
			// A closed fence wakes the node's lease keeper at once; the
			// periodic event stays.
			s.poke(sl)
		}
	}
	if next := s.plan.after(arrive, end, failed, c.rng); next >= 0 {
		s.push(next, evArrival, ci, 0)
	}
}

// fault applies scenario fault fi now.
func (s *sim) fault(fi int) {
	f := s.s.Faults[fi]
	s.mu.faults[fi].Confirmed = true
	if s.metrics != nil {
		s.metrics.FaultInjected(string(f.Kind))
		_ = s.metrics.SetWindow(telemetry.FaultWindow{Name: f.Name, Kind: string(f.Kind)}, true)
	}
	switch f.Kind {
	case scenario.KindRestart:
		for _, name := range f.Nodes {
			sl := s.slot(name)
			advance(sl.host, s.t)
			if err := s.stopSlot(sl, target.StopOptions{Wipe: !f.KeepCheckpoint}, "restarting"); err != nil {
				s.stopFailed(fi, sl, err)
			}
			if f.OffsetWhileDown != 0 {
				step := target.ClockFault{Kind: scenario.KindStep, By: f.OffsetWhileDown}
				applyShadow(sl.host.shadow, step)
				if ctl := s.clockOf(sl); ctl != nil {
					_ = ctl.Apply(s.ctx, step)
				}
			}
			if f.For == 0 {
				s.bringUp(fi, sl)
			} else {
				s.push(s.t+f.For, evUp, fi, sl.idx)
			}
		}
	case scenario.KindHandoff:
		sl := s.slot(f.Nodes[0])
		advance(sl.host, s.t)
		stop, why := target.StopOptions{Graceful: true}, "handing off"
		if f.Crash { // kill -9: no final mark, the lease left to expire
			stop, why = target.StopOptions{}, "crashed; handing off"
		}
		if err := s.stopSlot(sl, stop, why); err != nil {
			s.stopFailed(fi, sl, err)
		}
		if f.Gap == 0 {
			s.handoff(fi, sl)
		} else {
			s.push(s.t+f.Gap, evUp, fi, sl.idx)
		}
	case scenario.KindClone:
		for _, name := range f.Nodes {
			s.clone(fi, s.slot(name))
		}
	case scenario.KindStoreOutage:
		s.storeOutage(fi)
	default:
		cf := s.clockFault(f)
		for _, name := range f.Nodes {
			sl := s.slot(name)
			advance(sl.host, s.t)
			before := sl.host.shadow.Offset()
			applyShadow(sl.host.shadow, cf)
			ctl := s.clockOf(sl)
			if ctl == nil {
				s.unconfirmed(fi, sl.name+": clock not controllable")
				continue
			}
			if err := ctl.Apply(s.ctx, cf); err != nil {
				s.unconfirmed(fi, sl.name+": "+err.Error())
				continue
			}
			d := s.probeDelay(f, before)
			s.probes = append(s.probes, probe{fi: fi, si: sl.idx, before: before})
			if s.real == nil && (f.Kind == scenario.KindFreeze || f.Kind == scenario.KindPause) {
				// A freeze or pause ends: measure it now, before a request
				// that waits it out carries the host past its end. Moving
				// the host's time on by d is what the fault does anyway (a
				// paused node serves nothing meanwhile) or costs requests
				// arriving in those few microseconds that much latency.
				advance(sl.host, hostNow(sl.host)+d)
				s.probe(len(s.probes) - 1)
			} else if d == 0 {
				s.probe(len(s.probes) - 1)
			} else {
				s.push(min(s.t+d, s.s.Duration-1), evProbe, len(s.probes)-1, 0)
			}
		}
	}
}

// stopFailed notes a stop that returned an error. A lease the store could
// not be asked to release (it is unreachable) is a fact of the run, not a
// fault that failed: the lease expires instead. Anything else leaves the
// fault unconfirmed.
func (s *sim) stopFailed(fi int, sl *slot, err error) {
	if errors.Is(err, lease.ErrUnavailable) {
		fr := &s.mu.faults[fi]
		fr.Detail = append(fr.Detail, sl.name+": lease not released (store unreachable): it expires instead")
		return
	}
	s.unconfirmed(fi, sl.name+": stop failed: "+err.Error())
}

func (s *sim) clockOf(sl *slot) target.ClockControl {
	if sl.node == nil {
		return nil
	}
	return sl.node.Clock()
}

func (s *sim) unconfirmed(fi int, detail string) {
	fr := &s.mu.faults[fi]
	fr.Confirmed = false
	fr.Detail = append(fr.Detail, detail)
}

func (s *sim) probe(pi int) {
	p := s.probes[pi]
	sl := s.mu.slots[p.si]
	advance(sl.host, s.t)
	s.confirm(p.fi, sl, sl.host.shadow.Offset()-p.before)
}

// storeOutage cuts the lease store off: for everyone, or for the named
// nodes' hosts (a partition). It is confirmed when the store (or the
// host's link to it) answers unavailable.
func (s *sim) storeOutage(fi int) {
	f := s.s.Faults[fi]
	if s.leases == nil {
		s.unconfirmed(fi, "the run has no lease store")
		return
	}
	var cut []*storeLink
	if f.Partition {
		for _, name := range f.Nodes {
			link := s.storeOf(s.slot(name).host)
			link.cut.Store(true)
			cut = append(cut, link)
		}
	} else {
		s.leases.SetAvailable(false)
		cut = append(cut, &storeLink{Registry: s.leases})
	}
	for _, link := range cut {
		if _, err := link.List(s.ctx); !errors.Is(err, lease.ErrUnavailable) {
			s.unconfirmed(fi, fmt.Sprintf("lease store still answers: %v", err))
		}
	}
	what := "lease store down"
	if f.Partition {
		what = strings.Join(f.Nodes, ", ") + " cut off from the lease store"
	}
	s.mu.faults[fi].Detail = append(s.mu.faults[fi].Detail, fmt.Sprintf("%s for %s", what, scenario.FormatDuration(f.For)))
	if s.cuts == nil {
		s.cuts = map[int][]*storeLink{}
	}
	s.cuts[fi] = cut
	s.push(s.t+f.For, evStoreBack, fi, 0)
}

// storeBack ends store outage fi.
func (s *sim) storeBack(fi int) {
	if !s.s.Faults[fi].Partition {
		s.leases.SetAvailable(true)
	}
	for _, link := range s.cuts[fi] {
		link.cut.Store(false)
		if _, err := link.List(s.ctx); err != nil {
			s.unconfirmed(fi, "lease store did not come back: "+err.Error())
			return
		}
	}
	s.mu.faults[fi].Detail = append(s.mu.faults[fi].Detail, fmt.Sprintf("back at %s", Duration(s.t)))
}

// up handles the end of a restart's down time or a handoff's gap.
func (s *sim) up(e event) {
	f := s.s.Faults[e.a]
	sl := s.mu.slots[e.b]
	if f.Kind == scenario.KindHandoff {
		s.handoff(e.a, sl)
		return
	}
	s.bringUp(e.a, sl)
}

// bringUp restarts a node on its host.
func (s *sim) bringUp(fi int, sl *slot) {
	advance(sl.host, s.t)
	sl.incarnation++
	if err := s.restartSlot(sl); err != nil {
		fr := &s.mu.faults[fi]
		switch {
		case errors.Is(err, lease.ErrAllTaken):
			fr.Detail = append(fr.Detail, fmt.Sprintf("%s: restart refused a worker ID by the lease", sl.name))
		case errors.Is(err, lease.ErrUnavailable):
			fr.Detail = append(fr.Detail, fmt.Sprintf("%s: restarted, waiting for the lease store", sl.name))
			s.retryLater(sl)
		default:
			s.unconfirmed(fi, sl.name+": restart failed: "+err.Error())
		}
		return
	}
	s.maintain(sl)
	f := s.s.Faults[fi]
	if f.OffsetWhileDown != 0 {
		s.confirm(fi, sl, f.OffsetWhileDown)
	} else {
		fr := &s.mu.faults[fi]
		fr.Detail = append(fr.Detail, fmt.Sprintf("%s: restarted as incarnation %d (worker %d)", sl.name, sl.incarnation, sl.node.Worker()))
	}
}

// handoff starts a node's worker ID on a new host whose clock is Behind
// (after the old host stopped, gracefully or by a crash).
func (s *sim) handoff(fi int, sl *slot) {
	f := s.s.Faults[fi]
	if sl.node != nil {
		_ = sl.node.Close()
	}
	sl.host = s.mkHost(s.t)
	sl.spec.Host = s.newHostName(sl.name, "host")
	sl.spec.ClockOffset = -f.Behind
	sl.host.shadow.Step(-f.Behind)
	sl.incarnation++
	sl.gen++
	if err := s.startSlot(sl); err != nil {
		if errors.Is(err, lease.ErrUnavailable) {
			fr := &s.mu.faults[fi]
			fr.Detail = append(fr.Detail, fmt.Sprintf("%s: started on %s, waiting for the lease store", sl.name, sl.spec.Host))
			s.retryLater(sl)
			return
		}
		s.unconfirmed(fi, fmt.Sprintf("%s: start on %s failed: %v", sl.name, sl.spec.Host, err))
		return
	}
	s.maintain(sl)
	s.confirmStart(fi, sl, -f.Behind)
}

// confirmStart confirms a node started on a new host with the given clock
// offset (zero offsets are confirmed by the start alone).
func (s *sim) confirmStart(fi int, sl *slot, offset time.Duration) {
	if offset != 0 {
		s.confirm(fi, sl, offset)
		return
	}
	fr := &s.mu.faults[fi]
	fr.Detail = append(fr.Detail, fmt.Sprintf("%s: started on host %s (worker %d)", sl.name, sl.spec.Host, sl.node.Worker()))
}

// clone starts a second node with src's spec on a new host.
func (s *sim) clone(fi int, src *slot) {
	f := s.s.Faults[fi]
	name := src.name + "-clone"
	for n := 2; s.hasSlot(name); n++ {
		name = fmt.Sprintf("%s-clone%d", src.name, n)
	}
	sl := &slot{idx: len(s.mu.slots), name: name, spec: src.spec, clone: true, alive: true, host: s.mkHost(s.t)}
	sl.spec.Name, sl.spec.Host = name, name
	same := ""
	if f.SameHolder {
		sl.spec.Host = src.spec.Host // a copy with the original's host or pod name
		same = " with " + src.name + "'s identity"
	}
	sl.host.shadow.Step(sl.spec.ClockOffset)
	if s.gens != nil {
		sl.nm, _ = s.gens.Node(s.s.Name + "/" + s.st.Name + "/" + name)
	}
	s.mu.slots = append(s.mu.slots, sl)
	s.mu.tl.addSeries(sl, s.t)
	err := s.startSlot(sl)
	fr := &s.mu.faults[fi]
	switch {
	case err == nil:
		s.maintain(sl)
		note := ""
		if sl.node.Worker() != src.spec.Worker {
			note = " (the lease gave it another)"
		}
		fr.Detail = append(fr.Detail, fmt.Sprintf("%s: clone of %s%s started with worker %d%s", name, src.name, same, sl.node.Worker(), note))
	case errors.Is(err, lease.ErrAllTaken):
		fr.Detail = append(fr.Detail, fmt.Sprintf("%s: clone of %s%s refused a worker ID by the lease", name, src.name, same))
	case errors.Is(err, lease.ErrUnavailable):
		fr.Detail = append(fr.Detail, fmt.Sprintf("%s: clone of %s%s started, waiting for the lease store", name, src.name, same))
		s.retryLater(sl)
	default:
		s.unconfirmed(fi, fmt.Sprintf("%s: clone of %s failed to start: %v", name, src.name, err))
	}
	if s.plan.perNode {
		s.addClients(sl.idx, s.t)
	}
	if f.For > 0 {
		s.push(s.t+f.For, evCloneEnd, sl.idx, 0)
	}
}

func (s *sim) hasSlot(name string) bool {
	for _, sl := range s.mu.slots {
		if sl.name == name {
			return true
		}
	}
	return false
}

func (s *sim) cloneEnd(si int) {
	sl := s.mu.slots[si]
	advance(sl.host, s.t)
	_ = s.stopSlot(sl, target.StopOptions{}, "clone ended")
	sl.alive = false
}

// sample records every node's clock offset at the end of timeline bucket i.
func (s *sim) sample(i int) {
	tl := s.mu.tl
	for _, sl := range s.mu.slots {
		if sl.series == nil {
			continue
		}
		if !sl.up || sl.node == nil || !sl.alive {
			continue
		}
		ctl := sl.node.Clock()
		if ctl == nil {
			continue
		}
		advance(sl.host, s.t)
		if off, err := ctl.Offset(s.ctx); err == nil {
			tl.offset(sl, i, off)
		}
	}
}

// beginMetrics declares the run to the harness metrics.
func (r *run) beginMetrics() {
	if r.metrics == nil {
		return
	}
	info := telemetry.ScenarioInfo{Scenario: r.s.Name, Target: r.st.Name}
	for _, f := range r.s.Faults {
		info.Windows = append(info.Windows, telemetry.FaultWindow{Name: f.Name, Kind: string(f.Kind)})
	}
	for _, e := range r.s.ChecksFor(r.st.Name) {
		info.Invariants = append(info.Invariants, e.Text)
	}
	r.metrics.Begin(info)
}
