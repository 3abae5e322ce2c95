package ntpcheck

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Monitor runs Check periodically in the background, feeds a Collector and
// answers readiness: a node should stop issuing IDs while its clock is
// further from NTP time than the budget, because the correction that is
// bound to come will step it. Safe for concurrent use.
type Monitor struct {
	cfg      Config
	interval time.Duration
	col      *Collector

	mu struct {
		sync.Mutex
		last         Report
		have         bool
		ready        error     // verdict of the last check with a usable server
		leapMidnight time.Time // carried into the next check
	}
}

// NewMonitor returns a Monitor that checks cfg's servers every interval
// (zero: DefaultInterval) once Run is called.
func NewMonitor(cfg Config, interval time.Duration) *Monitor {
	if interval <= 0 {
		interval = DefaultInterval
	}
	cfg = cfg.withDefaults()
	return &Monitor{cfg: cfg, interval: interval, col: NewCollector(cfg.Servers...)}
}

// Collector returns the monitor's metrics collector, for registering.
func (m *Monitor) Collector() *Collector { return m.col }

// Run checks at once and then every interval until ctx is done, calling
// each (if not nil) with every report. It returns ctx.Err().
func (m *Monitor) Run(ctx context.Context, each func(Report)) error {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		r := m.CheckNow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if each != nil {
			each(r)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// CheckNow runs one check, records it and returns it.
func (m *Monitor) CheckNow(ctx context.Context) Report {
	m.mu.Lock()
	cfg := m.cfg
	cfg.LeapMidnight = m.mu.leapMidnight
	m.mu.Unlock()

	r := Check(ctx, cfg)
	if ctx.Err() != nil {
		return r // cancelled part-way: do not let it change the verdict
	}
	m.col.Observe(r)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.last, m.mu.have = r, true
	m.mu.leapMidnight = r.LeapMidnight
	if r.Usable > 0 {
		m.mu.ready = nil
		if r.OverBudget() {
			how := "ahead of"
			if r.Offset > 0 {
				how = "behind"
			}
			m.mu.ready = fmt.Errorf("%w: host clock %s %s NTP time (budget %s, %d usable servers)",
				ErrOffsetBudget, fmtDur(abs(r.Offset)), how, fmtDur(r.Limits.MaxOffset), r.Usable)
		}
	}
	return r
}

// Ready returns nil unless the last check that reached a usable server put
// the host's offset beyond the budget; then an error wrapping
// ErrOffsetBudget. Before the first check, and while no server is usable,
// the last verdict stands (nil at first): losing NTP alone does not stop a
// node.
func (m *Monitor) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.ready
}

// Last returns the most recent report, and false before the first check.
func (m *Monitor) Last() (Report, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.last, m.mu.have
}
