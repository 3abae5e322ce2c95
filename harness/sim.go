package harness

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// The simulated driver is a discrete-event simulation on virtual time.
//
// Every host (a node's machine) has its own virtual clock in auto mode
// under the node's fault clock. Events (request arrivals and the
// lifecycle's events) are processed in time order, ties in the order they
// were scheduled. Before a node handles an event its host's clock is
// advanced to the event's time. A call that must wait (a rewind, an
// exhausted sequence, a start fence, a VM pause) sleeps on the host's
// clock, which advances it: the node stays busy until then, and requests
// that arrive meanwhile are served after it, from the host's later time,
// as if queued. That is exact for waits that all end at the same instant,
// which is how the generator waits; a wait never blocks the process and
// never delays other hosts.
//
// Clients follow the open model: arrivals come from the plan's pacer with
// seeded jitter, whether or not earlier requests were answered. In "max"
// stages a client sends its next request Simulation.Service after the
// previous one was answered (retryAfter after a failure).

// client is one arrival stream: a sequential client of one slot, or of
// the total load (slot -1, each request to any live slot).
type client struct {
	idx  int
	slot int
	rng  *rand.Rand
	sim  *simDriver // simulated mode: the driver its arrivals belong to
}

// simDriver runs a run on virtual time, in one goroutine.
type simDriver struct {
	l       *lifecycle
	q       eventQueue
	seq     uint64
	t       time.Duration
	clients []*client
	buf     *idBuf
	events  uint64
}

var _ driver = (*simDriver)(nil)

func (s *simDriver) now() time.Duration { return s.t }

func (s *simDriver) schedule(at time.Duration, ev event) { s.q.schedule(&s.seq, at, ev) }

func (s *simDriver) newHost(at time.Duration) *hostTruth {
	r := s.l.run
	v := faults.NewVirtual(r.start.Add(at), true)
	return &hostTruth{base: v, virt: v, origin: at, shadow: faults.New(v)}
}

func (s *simDriver) addClients(si int, at time.Duration) {
	r := s.l.run
	for k := 0; k < r.plan.clients; k++ {
		c := &client{idx: len(s.clients), slot: si, sim: s}
		c.rng = r.rng(uint64(c.idx) + 1)
		s.clients = append(s.clients, c)
		if next := r.plan.pace(at, true, c.rng); next >= 0 {
			s.schedule(next, arrivalEvent{c})
		}
	}
}

// storeClock reads the simulation's reference time: the lease store's
// clock. It never sleeps.
type storeClock struct{ s *simDriver }

func (c storeClock) Now() (wall, mono int64) { return c.s.l.startNs + int64(c.s.t), int64(c.s.t) }
func (c storeClock) Sleep(time.Duration)     {}

// runSimulated runs r on virtual time.
func runSimulated(r *run, res *Result) {
	r.start = r.s.Start
	r.startNs = r.start.UnixNano()
	s := &simDriver{buf: newIDBuf(r.kind, r.plan.batch)}
	s.l = &lifecycle{run: r, d: s}
	r.driverNow = s.now
	r.windows()
	if !s.l.setup(res, storeClock{s}) {
		return
	}
	if r.plan.perNode {
		for si := range r.slots {
			s.addClients(si, 0)
		}
	} else {
		s.addClients(-1, 0)
	}
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(queued)
		if e.at >= r.s.Duration {
			break
		}
		s.t = e.at
		s.events++
		r.beat.Add(1)
		if s.events&0x3fff == 0 {
			if err := r.ctx.Err(); err != nil {
				res.Error = "interrupted: " + err.Error()
				break
			}
			r.progress(s.t, false)
		}
		e.ev.apply(s.l)
		if _, arrival := e.ev.(arrivalEvent); !arrival {
			s.l.changed()
		}
		if r.stopped() {
			break
		}
	}
	r.progress(r.s.Duration, true)
	r.finish(res, s.events)
}

// arrival serves one request of client c at the current time.
func (s *simDriver) arrival(c *client) {
	r := s.l.run
	var sl *slot
	if c.slot >= 0 {
		sl = r.slots[c.slot]
	} else {
		sl = r.pick(c.rng)
	}
	if sl == nil || !sl.alive {
		return // a clone that ended: its clients stop
	}
	arrive := s.t
	v := sl.current()
	if v.up {
		sl.host.advance(arrive)
	}
	end, err := r.call(v, c.idx, arrive, s.buf, sl.host.now)
	if sl.armed > 0 && s.l.crashed(sl) {
		// A crash point struck during the call: its client, whose
		// connection broke, sends the request again at once (to the new
		// incarnation when the restart brought it back at once).
		if v := sl.current(); v.up {
			sl.host.advance(end)
			end, err = r.call(v, c.idx, end, s.buf, sl.host.now)
		}
	}
	if errors.Is(err, generator.ErrFenced) {
		// A closed fence wakes the node's lease keeper at once; the
		// periodic event stays.
		s.l.poke(sl)
		s.l.changed()
	}
	if next := r.plan.after(arrive, end, err != nil, c.rng); next >= 0 {
		s.schedule(next, arrivalEvent{c})
	}
}
