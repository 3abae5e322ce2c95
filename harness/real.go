package harness

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// realDriver runs the clients of a real-mode run: one goroutine each, on
// the wall clock, sending at the plan's full rate (no sampling). A client
// is one sequential stream: a slow answer delays its next request, but the
// request's reference time is when it was due, so the delay counts in its
// wait (no coordinated omission).
type realDriver struct {
	clk  generator.Clock
	mono int64 // monotonic reading at the run's start
	wg   sync.WaitGroup
	done atomic.Bool
}

// now returns the offset from the run's start on the monotonic clock.
func (d *realDriver) now() time.Duration {
	_, m := d.clk.Now()
	return time.Duration(m - d.mono)
}

// sleepUntil sleeps until offset t, in steps so that the end of the run
// or a cancelled context is noticed within 20 ms; false when it should
// stop instead.
func (d *realDriver) sleepUntil(s *sim, t time.Duration) bool {
	for {
		if d.done.Load() || s.ctx.Err() != nil {
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
func (d *realDriver) spawn(s *sim, c *simClient, t time.Duration) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		buf := make([]generator.ID, s.plan.batch)
		next := s.plan.pace(t, true, c.rng)
		for next >= 0 && next < s.s.Duration {
			if !d.sleepUntil(s, next) {
				return
			}
			s.life.RLock()
			var cal callee
			alive := false
			if c.slot >= 0 {
				sl := s.mu.slots[c.slot]
				cal, alive = sl.callee(), sl.alive
			} else if sl := s.pick(c.rng); sl != nil {
				cal, alive = sl.callee(), true
			}
			s.life.RUnlock()
			if !alive {
				return
			}
			arrive := next
			var end time.Duration
			failed := false
			if !cal.up {
				s.recordDown(cal, c.idx, arrive)
				end, failed = arrive, true
			} else {
				n, err := cal.node.Issue(s.ctx, buf)
				end = d.now()
				s.record(cal, c.idx, arrive, end, buf[:n], err)
				failed = err != nil
			}
			s.mu.Lock()
			stop := s.mu.stopped
			s.mu.Unlock()
			if stop {
				return
			}
			next = s.plan.after(arrive, end, failed, c.rng)
		}
	}()
}

// runReal runs r on the wall clock: the nodes' hosts share the system
// clock, each under its own fault clock; the lifecycle events run in this
// goroutine at their times, the clients in their own.
func runReal(r *run, res *Result) {
	clk := generator.SystemClock()
	wall0, mono0 := clk.Now()
	d := &realDriver{clk: clk, mono: mono0}
	r.start = time.Unix(0, wall0).UTC()
	r.startNs = wall0
	r.now = d.now
	s := &sim{run: r, real: d}
	mk := func(time.Duration) *host { return &host{base: clk, real: d.now, shadow: faults.New(clk)} }
	s.life.Lock()
	ok := s.setup(res, mk, clk)
	if ok {
		if r.plan.perNode {
			for si := range r.mu.slots {
				s.addClients(si, 0)
			}
		} else {
			s.addClients(-1, 0)
		}
	}
	s.life.Unlock()
	if !ok {
		return
	}
	lastProgress := time.Duration(0)
	for s.q.Len() > 0 {
		e := s.q[0]
		if e.at >= r.s.Duration {
			break
		}
		// Wake at least every 250 ms for progress.
		if wait := e.at - d.now(); wait > 0 {
			if !d.sleepUntil(s, min(e.at, d.now()+250*time.Millisecond)) {
				break
			}
			if t := d.now(); t-lastProgress >= 250*time.Millisecond {
				lastProgress = t
				r.progress(t, false)
			}
			continue
		}
		heap.Pop(&s.q)
		s.life.Lock()
		s.t = d.now()
		s.events++
		s.handle(e)
		s.life.Unlock()
		s.mu.Lock()
		stop := s.mu.stopped
		s.mu.Unlock()
		if stop {
			break
		}
	}
	for {
		s.mu.Lock()
		stop := s.mu.stopped
		s.mu.Unlock()
		if stop || !d.sleepUntil(s, min(r.s.Duration, d.now()+250*time.Millisecond)) || d.now() >= r.s.Duration {
			break
		}
		r.progress(d.now(), false)
	}
	d.done.Store(true)
	d.wg.Wait()
	if err := r.ctx.Err(); err != nil && res.Error == "" {
		res.Error = "interrupted: " + err.Error()
	}
	r.progress(min(d.now(), r.s.Duration), true)
	r.finish(res, s.events)
}
