package harness

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// realDriver runs a run on the wall clock: the lifecycle's events in the
// goroutine that called runReal, at their times; each client in a
// goroutine of its own, sending at the plan's full rate (no sampling). A
// client is one sequential stream: a slow answer delays its next request,
// but the request's reference time is when it was due, so the delay
// counts in its wait (no coordinated omission). Clients see the slots
// only through their published views (see run).
type realDriver struct {
	l     *lifecycle
	clk   generator.Clock
	mono  int64 // monotonic reading at the run's start
	q     eventQueue
	seq   uint64
	nextC int // clients made so far
	wg    sync.WaitGroup
	done  atomic.Bool
}

var _ driver = (*realDriver)(nil)

// now returns the offset from the run's start on the monotonic clock.
func (d *realDriver) now() time.Duration {
	_, m := d.clk.Now()
	return time.Duration(m - d.mono)
}

func (d *realDriver) schedule(at time.Duration, ev event) { d.q.schedule(&d.seq, at, ev) }

func (d *realDriver) newHost(time.Duration) *hostTruth {
	return &hostTruth{base: d.clk, real: d.now, shadow: faults.New(d.clk)}
}

func (d *realDriver) addClients(si int, at time.Duration) {
	r := d.l.run
	for k := 0; k < r.plan.clients; k++ {
		c := &client{idx: d.nextC, slot: si}
		d.nextC++
		c.rng = r.rng(uint64(c.idx) + 1)
		d.spawn(c, at)
	}
}

// sleepUntil sleeps until offset t, in steps so that the end of the run
// or a cancelled context is noticed within 20 ms; false when it should
// stop instead.
func (d *realDriver) sleepUntil(t time.Duration) bool {
	for {
		if d.done.Load() || d.l.ctx.Err() != nil {
			return false
		}
		left := t - d.now()
		if left <= 0 {
			return true
		}
		d.clk.Sleep(min(left, 20*time.Millisecond))
	}
}

// spawn starts client c, whose first request is due after t.
func (d *realDriver) spawn(c *client, t time.Duration) {
	r := d.l.run
	// The slot's view, or the live set, as published now: slots are the
	// driver's, clients read only what it published.
	var own *slot
	if c.slot >= 0 {
		own = r.slots[c.slot]
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		buf := newIDBuf(r.kind, r.plan.batch)
		next := r.plan.pace(t, true, c.rng)
		for next >= 0 && next < r.s.Duration {
			if !d.sleepUntil(next) {
				return
			}
			sl := own
			if sl == nil {
				sl = r.pick(c.rng)
			}
			if sl == nil {
				return
			}
			v := sl.current()
			if own != nil && !v.alive {
				return // a clone that ended: its clients stop
			}
			// The call begins now, which is later than due when the
			// clients fall behind a burst no real client can send in time:
			// its wait and reference span start when it was sent, so that
			// max_wait measures the node, not the harness's backlog (the
			// schedule itself still runs from next).
			end, err := r.call(v, c.idx, max(next, d.now()), buf, d.now)
			if r.stopped() {
				return
			}
			next = r.burstNext(c.slot, end, r.plan.after(next, end, err != nil, c.rng))
		}
	}()
}

// runReal runs r on the wall clock: the nodes' hosts share the system
// clock, each under its own fault clock. The run's time starts once the
// nodes are up (starting child processes, or building them, takes real
// time the scenario's schedule must not lose).
func runReal(r *run, res *Result) {
	clk := generator.SystemClock()
	wall0, mono0 := clk.Now()
	d := &realDriver{clk: clk, mono: mono0}
	d.l = &lifecycle{run: r, d: d}
	r.start, r.startNs = time.Unix(0, wall0).UTC(), wall0
	if !d.l.setup(res, clk) {
		return
	}
	stall := startStallProbe(SystemProber())
	defer stall.stop() // also on the early returns below
	wall0, mono0 = clk.Now()
	d.mono = mono0
	r.start, r.startNs = time.Unix(0, wall0).UTC(), wall0
	r.windows()
	if r.plan.perNode {
		for si := range r.slots {
			d.addClients(si, 0)
		}
	} else {
		d.addClients(-1, 0)
	}
	var events uint64
	lastProgress := time.Duration(0)
	for d.q.Len() > 0 && !r.stopped() {
		r.beat.Add(1)
		e := d.q[0]
		if e.at >= r.s.Duration {
			break
		}
		// Wake at least every 250 ms for progress.
		if wait := e.at - d.now(); wait > 0 {
			if !d.sleepUntil(min(e.at, d.now()+250*time.Millisecond)) {
				break
			}
			if t := d.now(); t-lastProgress >= 250*time.Millisecond {
				lastProgress = t
				r.progress(t, false)
			}
			continue
		}
		heap.Pop(&d.q)
		events++
		e.ev.apply(d.l)
		d.l.changed()
	}
	for !r.stopped() && d.now() < r.s.Duration {
		if !d.sleepUntil(min(r.s.Duration, d.now()+250*time.Millisecond)) {
			break
		}
		r.beat.Add(1)
		r.progress(d.now(), false)
	}
	d.done.Store(true)
	d.wg.Wait()
	if err := r.ctx.Err(); err != nil && res.Error == "" {
		res.Error = "interrupted: " + err.Error()
	}
	r.progress(min(d.now(), r.s.Duration), true)
	r.stall = stall.stop()
	r.finish(res, events)
}
