package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// LeaseState is a worker-ID lease's state as snowflake_lease_state shows
// it (one-hot: the current state's series is 1, the others 0; all are 0
// before the first SetState).
type LeaseState string

// Lease states.
const (
	// LeaseHeld: the lease is held and fresh.
	LeaseHeld LeaseState = "held"
	// LeaseRenewing: a renewal is in flight or being retried.
	LeaseRenewing LeaseState = "renewing"
	// LeaseLost: the lease expired or was taken; the generator is fenced.
	LeaseLost LeaseState = "lost"
	// LeaseReleased: the holder gave the lease up.
	LeaseReleased LeaseState = "released"
)

var leaseStates = []LeaseState{LeaseHeld, LeaseRenewing, LeaseLost, LeaseReleased}

// LeaseStates returns every value of snowflake_lease_state's state label.
func LeaseStates() []LeaseState { return append([]LeaseState(nil), leaseStates...) }

// RenewalResult is the result label of snowflake_lease_renewals_total.
type RenewalResult string

// Renewal results.
const (
	// RenewalOK: the lease was extended.
	RenewalOK RenewalResult = "ok"
	// RenewalError: the attempt failed (backend unreachable, timeout); the
	// lease may still be held.
	RenewalError RenewalResult = "error"
	// RenewalLost: the backend answered that the lease is no longer ours.
	RenewalLost RenewalResult = "lost"
)

var renewalResults = []RenewalResult{RenewalOK, RenewalError, RenewalLost}

// HandoffBuckets are the buckets of snowflake_lease_handoff_wait_seconds.
var HandoffBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// LeaseCollector exports the snowflake_lease_* series of one or (with
// Options.PerNode) several lease holders. Register it on a registry of
// your own and hand each holder's LeaseMetrics to its lease keeper.
type LeaseCollector struct {
	opts     Options
	state    *prometheus.GaugeVec
	expiry   *prometheus.GaugeVec
	renewals *prometheus.CounterVec
	handoff  *prometheus.HistogramVec
	skew     *prometheus.GaugeVec
	peers    *prometheus.GaugeVec
	refused  *prometheus.CounterVec

	nodes nodeSet[*LeaseMetrics]
}

var _ prometheus.Collector = (*LeaseCollector)(nil)

// NewLeaseCollector returns a collector serving no lease holder yet; add
// them with Node. Options.TracerProvider and KeptSpanGap are unused.
func NewLeaseCollector(o Options) *LeaseCollector {
	var vl []string
	if o.PerNode {
		vl = []string{NodeLabel}
	}
	with := func(extra ...string) []string { return append(append([]string(nil), vl...), extra...) }
	c := &LeaseCollector{
		opts: o,
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowflake_lease_state",
			Help: "Worker-ID lease state, one-hot over held, renewing, lost and released; all 0 before the first acquisition.",
		}, with("state")),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowflake_lease_expiry_timestamp_seconds",
			Help: "When the held worker-ID lease expires unless renewed, Unix seconds; 0 when none is held.",
		}, with()),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowflake_lease_renewals_total",
			Help: "Lease renewal attempts by result: ok (extended), error (the store did not answer; the lease may still be held), lost (no longer ours).",
		}, with("result")),
		handoff: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snowflake_lease_handoff_wait_seconds",
			Help:    "Time a new holder of a worker ID waited for the previous holder's last issued time to pass, seconds.",
			Buckets: HandoffBuckets,
		}, with()),
		skew: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowflake_lease_peer_clock_skew_seconds",
			Help: "This node's wall clock minus the median of its live peers' clocks, as estimated through the lease store by the peer clock check at its last start, seconds; 0 when it compared with no peer (see snowflake_lease_peer_clock_peers).",
		}, with()),
		peers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowflake_lease_peer_clock_peers",
			Help: "Live peers (other holders whose clock reports the lease store keeps) the peer clock check compared this node's clock with at its last start.",
		}, with()),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowflake_lease_peer_clock_refusals_total",
			Help: "Starts the peer clock check refused: this node's clock was off the median of its live peers' by more than the bound; the lease was released and nothing issued.",
		}, with()),
	}
	c.nodes.opts = o
	return c
}

// Describe implements prometheus.Collector.
func (c *LeaseCollector) Describe(ch chan<- *prometheus.Desc) {
	c.state.Describe(ch)
	c.expiry.Describe(ch)
	c.renewals.Describe(ch)
	c.handoff.Describe(ch)
	c.skew.Describe(ch)
	c.peers.Describe(ch)
	c.refused.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *LeaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.state.Collect(ch)
	c.expiry.Collect(ch)
	c.renewals.Collect(ch)
	c.handoff.Collect(ch)
	c.skew.Collect(ch)
	c.peers.Collect(ch)
	c.refused.Collect(ch)
}

// Node returns the LeaseMetrics of the holder named name, creating it (and
// every one of its series, at zero) on first use. In single mode the only
// name is "". Errors wrap ErrNodeName or ErrTooManyNodes.
func (c *LeaseCollector) Node(name string) (*LeaseMetrics, error) {
	return c.nodes.get(name, func(lv []string) *LeaseMetrics {
		m := &LeaseMetrics{
			expiry:  c.expiry.WithLabelValues(lv...),
			handoff: c.handoff.WithLabelValues(lv...),
			skew:    c.skew.WithLabelValues(lv...),
			peers:   c.peers.WithLabelValues(lv...),
			refused: c.refused.WithLabelValues(lv...),
		}
		for i, st := range leaseStates {
			m.state[i] = c.state.WithLabelValues(withLabels(lv, string(st))...)
		}
		for i, r := range renewalResults {
			m.renewals[i] = c.renewals.WithLabelValues(withLabels(lv, string(r))...)
		}
		return m
	})
}

// MustNode is Node that panics on error; for single mode and fixed names.
func (c *LeaseCollector) MustNode(name string) *LeaseMetrics {
	m, err := c.Node(name)
	if err != nil {
		panic(err)
	}
	return m
}

// Nodes returns the names of the holders served, sorted.
func (c *LeaseCollector) Nodes() []string { return c.nodes.names() }

// LeaseMetrics is what a lease keeper feeds: one holder's share of a
// LeaseCollector. Its methods are safe for concurrent use and do nothing
// on a nil *LeaseMetrics, so a keeper can hold one unconditionally.
type LeaseMetrics struct {
	mu       sync.Mutex // orders SetState's one-hot updates
	state    [4]prometheus.Gauge
	expiry   prometheus.Gauge
	renewals [3]prometheus.Counter
	handoff  prometheus.Observer
	skew     prometheus.Gauge
	peers    prometheus.Gauge
	refused  prometheus.Counter
}

// SetState makes s the current state; an unknown state clears all four.
func (m *LeaseMetrics) SetState(s LeaseState) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range leaseStates {
		if v == s {
			m.state[i].Set(1)
		} else {
			m.state[i].Set(0)
		}
	}
}

// SetExpiry records when the held lease expires unless renewed; the zero
// time means none is held.
func (m *LeaseMetrics) SetExpiry(t time.Time) {
	if m == nil {
		return
	}
	if t.IsZero() {
		m.expiry.Set(0)
		return
	}
	m.expiry.Set(float64(t.UnixNano()) / 1e9)
}

// ObserveRenewal counts one renewal attempt; an unknown result counts as
// RenewalError.
func (m *LeaseMetrics) ObserveRenewal(r RenewalResult) {
	if m == nil {
		return
	}
	for i, v := range renewalResults {
		if v == r {
			m.renewals[i].Inc()
			return
		}
	}
	m.renewals[1].Inc()
}

// ObserveHandoffWait records how long an acquisition waited for the
// previous holder's last issued time to pass.
func (m *LeaseMetrics) ObserveHandoffWait(d time.Duration) {
	m.ObserveHandoffWaitContext(context.Background(), d)
}

// ObserveHandoffWaitContext is ObserveHandoffWait with the trace ID of the
// sampled span in ctx (the lease.acquire span) as the exemplar.
func (m *LeaseMetrics) ObserveHandoffWaitContext(ctx context.Context, d time.Duration) {
	if m == nil {
		return
	}
	observe(m.handoff, d.Seconds(), trace.SpanContextFromContext(ctx))
}

// ObservePeerCheck records a peer clock check: this node's clock minus
// the median of its peers' (zero without peers), how many live peers it
// compared with, and whether it refused the start.
func (m *LeaseMetrics) ObservePeerCheck(skew time.Duration, peers int, refused bool) {
	if m == nil {
		return
	}
	m.skew.Set(skew.Seconds())
	m.peers.Set(float64(peers))
	if refused {
		m.refused.Inc()
	}
}
