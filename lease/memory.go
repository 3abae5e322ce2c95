package lease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

var _ Registry = (*Memory)(nil)

// Memory is an in-process Registry: the default for single-process runs and
// simulated scenarios. Store time is the wall reading of its Clock, so a
// virtual clock drives expiry. Every call costs one mutex and a scan of the
// requested range.
type Memory struct {
	clock generator.Clock
	mu    struct {
		sync.Mutex
		slots map[int64]*memSlot
		down  bool
	}
}

type memSlot struct {
	holder string
	token  int64
	until  int64 // wall ns
	ttl    int64 // ns
	last   int64 // ms
	clock  int64 // the holder's clock report, ms; 0: none
	heard  int64 // wall ns (store time) the report arrived
}

// NewMemory returns an empty in-process registry whose store time is
// clock's wall reading (nil: generator.SystemClock()).
func NewMemory(clock generator.Clock) *Memory {
	if clock == nil {
		clock = generator.SystemClock()
	}
	m := &Memory{clock: clock}
	m.mu.slots = make(map[int64]*memSlot)
	return m
}

// SetAvailable switches the store on or off: while off, every call fails
// with ErrUnavailable and nothing changes (a simulated outage). Time keeps
// running, so leases expire meanwhile.
func (m *Memory) SetAvailable(ok bool) {
	m.mu.Lock()
	m.mu.down = !ok
	m.mu.Unlock()
}

func (m *Memory) now() int64 {
	wall, _ := m.clock.Now()
	return wall
}

func (m *Memory) checkLocked(ctx context.Context) error {
	if m.mu.down {
		return fmt.Errorf("%w: memory store switched off", ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return Unavailable(err)
	}
	return nil
}

func (s *memSlot) lease(id int64) Lease {
	return Lease{WorkerID: id, Holder: s.holder, Token: s.token, LeasedUntil: time.Unix(0, s.until), TTL: time.Duration(s.ttl), LastIssuedMs: s.last, ReportedMs: s.clock}
}

// report records the holder's clock report ms, received at store time now.
func (s *memSlot) report(ms, now int64) {
	s.clock, s.heard = max(ms, 0), now
}

// Acquire implements Registry.
func (m *Memory) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(ctx); err != nil {
		return Lease{}, err
	}
	now := m.now()
	var (
		own, fresh, old int64 = -1, -1, -1
		held            []Lease
	)
	for id := req.Range.Min; id <= req.Range.Max; id++ {
		s := m.mu.slots[id]
		switch {
		case s == nil:
			if fresh < 0 {
				fresh = id
			}
		case s.until > now:
			held = append(held, s.lease(id))
		case s.holder == req.Holder:
			if own < 0 || s.until > m.mu.slots[own].until {
				own = id
			}
		default:
			if old < 0 || s.until < m.mu.slots[old].until {
				old = id
			}
		}
	}
	pick := own
	for _, p := range req.Prefer {
		if pick >= 0 {
			break
		}
		if s := m.mu.slots[p]; req.Range.Contains(p) && (s == nil || s.until <= now) {
			pick = p
		}
	}
	if pick < 0 {
		pick = fresh
	}
	if pick < 0 {
		pick = old
	}
	if pick < 0 {
		return Lease{}, &AllTakenError{Range: req.Range, Holders: held}
	}
	s := m.mu.slots[pick]
	if s == nil {
		s = &memSlot{}
		m.mu.slots[pick] = s
	}
	s.holder = req.Holder
	s.token++
	s.ttl = int64(req.TTL)
	s.until = now + s.ttl
	s.report(req.ClockMs, now)
	return s.lease(pick), nil
}

// heldLocked returns l's slot when l is still the live lease on it.
func (m *Memory) heldLocked(l Lease, now int64) (*memSlot, error) {
	s := m.mu.slots[l.WorkerID]
	if s == nil || s.token != l.Token || s.holder != l.Holder || s.until <= now {
		return nil, fmt.Errorf("%w: worker %d token %d", ErrLost, l.WorkerID, l.Token)
	}
	return s, nil
}

// Renew implements Registry. The TTL is the one the lease was granted with.
func (m *Memory) Renew(ctx context.Context, l Lease, lastIssuedMs int64) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(ctx); err != nil {
		return Lease{}, err
	}
	now := m.now()
	s, err := m.heldLocked(l, now)
	if err != nil {
		return Lease{}, err
	}
	s.until = now + s.ttl
	s.last = max(s.last, lastIssuedMs)
	s.report(l.ReportedMs, now)
	return s.lease(l.WorkerID), nil
}

// Record implements Registry.
func (m *Memory) Record(ctx context.Context, l Lease, lastIssuedMs int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(ctx); err != nil {
		return err
	}
	s, err := m.heldLocked(l, m.now())
	if err != nil {
		return err
	}
	s.last = max(s.last, lastIssuedMs)
	return nil
}

// Release implements Registry.
func (m *Memory) Release(ctx context.Context, l Lease, lastIssuedMs int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(ctx); err != nil {
		return err
	}
	now := m.now()
	s, err := m.heldLocked(l, now)
	if err != nil {
		return err
	}
	s.until = now
	s.last = max(s.last, lastIssuedMs)
	return nil
}

// List implements Registry. Report ages are exact (store time is the
// clock's wall reading).
func (m *Memory) List(ctx context.Context) ([]Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(ctx); err != nil {
		return nil, err
	}
	now := m.now()
	out := make([]Lease, 0, len(m.mu.slots))
	for id, s := range m.mu.slots {
		l := s.lease(id)
		switch {
		case s.until <= now:
			l.ReportedMs = 0
		case s.clock > 0:
			l.ReportAge = time.Duration(now - s.heard)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Lease) int { return int(a.WorkerID - b.WorkerID) })
	return out, nil
}
