package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// NodeLabel is the label naming a generator (or lease holder) when several
// share one collector (Options.PerNode).
const NodeLabel = "node"

// DefaultMaxNodes bounds the node label's values when Options.MaxNodes is 0.
const DefaultMaxNodes = 64

// Errors returned by GeneratorCollector.Node and LeaseCollector.Node.
var (
	// ErrTooManyNodes: the collector already serves Options.MaxNodes nodes.
	ErrTooManyNodes = errors.New("telemetry: too many nodes")
	// ErrNodeName: the node name is empty in per-node mode, non-empty in
	// single mode, not UTF-8, or longer than 128 bytes.
	ErrNodeName = errors.New("telemetry: invalid node name")
)

// Options configures a GeneratorCollector or LeaseCollector. The zero value
// serves one node without a node label and traces through OpenTelemetry's
// global provider.
type Options struct {
	// PerNode adds a "node" label to every series so that several
	// generators (the harness's in-process targets) share one registry.
	// Without it the collector serves exactly one node, named "".
	PerNode bool
	// MaxNodes bounds the node label's values; zero means DefaultMaxNodes.
	MaxNodes int
	// TracerProvider receives the spans of generator clock events; nil
	// means OpenTelemetry's global provider (a no-op until tracing.Setup).
	TracerProvider trace.TracerProvider
	// KeptSpanGap is the least time between two kept rewind spans of one
	// generator (see tracing.ClockSpans); zero means
	// tracing.DefaultKeptSpanGap, negative means no limit.
	KeptSpanGap time.Duration
}

func (o Options) maxNodes() int {
	if o.MaxNodes <= 0 {
		return DefaultMaxNodes
	}
	return o.MaxNodes
}

func (o Options) checkName(name string) error {
	switch {
	case !o.PerNode && name != "":
		return fmt.Errorf("%w: %q (the collector serves one unnamed node; set Options.PerNode)", ErrNodeName, name)
	case o.PerNode && (name == "" || len(name) > 128 || !utf8.ValidString(name)):
		return fmt.Errorf("%w: %q", ErrNodeName, name)
	}
	return nil
}

// Buckets of the generator histograms, in seconds.
var (
	// RewindBuckets spans a millisecond step to an hour-long one.
	RewindBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 3600}
	// WaitBuckets spans a sub-tick exhaustion wait to a multi-second rewind wait.
	WaitBuckets = []float64{0.00001, 0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}
)

// Refusal reasons, the values of snowflake_refusals_total's reason label.
const (
	ReasonClockBackwards = "clock_backwards" // PolicyRefuse met a rewind
	ReasonWaitExceeded   = "wait_exceeded"   // a wait would pass the call's deadline
	ReasonLeadExceeded   = "lead_exceeded"   // PolicyLogical's lead bound
	ReasonFenced         = "fenced"          // the fence (lease) is closed
	ReasonCheckpoint     = "checkpoint"      // persisting the mark failed
	ReasonClosed         = "closed"          // the generator was closed
	ReasonLifetime       = "lifetime"        // the time field overflowed
	ReasonBeforeEpoch    = "before_epoch"    // the clock reads before the epoch
	ReasonCanceled       = "canceled"        // the caller's context was canceled (takes precedence over wait_exceeded)
	ReasonDeadline       = "deadline"        // the caller's context deadline passed (takes precedence over wait_exceeded)
	ReasonOther          = "other"           // anything else
)

const numReasons = 11

var refusalReasons = [numReasons]string{
	ReasonClockBackwards, ReasonWaitExceeded, ReasonLeadExceeded, ReasonFenced,
	ReasonCheckpoint, ReasonClosed, ReasonLifetime, ReasonBeforeEpoch,
	ReasonCanceled, ReasonDeadline, ReasonOther,
}

// RefusalReasons returns every value of the reason label of
// snowflake_refusals_total, in a fixed order.
func RefusalReasons() []string { return append([]string(nil), refusalReasons[:]...) }

// RefusalReason classifies a generator error into one of RefusalReasons.
// An error carrying the caller's context error is "canceled" or "deadline"
// even though the generator wraps it in ErrWaitExceeded.
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonDeadline
	case errors.Is(err, generator.ErrClockBackwards):
		return ReasonClockBackwards
	case errors.Is(err, generator.ErrWaitExceeded):
		return ReasonWaitExceeded
	case errors.Is(err, generator.ErrLeadExceeded):
		return ReasonLeadExceeded
	case errors.Is(err, generator.ErrFenced):
		return ReasonFenced
	case errors.Is(err, generator.ErrCheckpoint):
		return ReasonCheckpoint
	case errors.Is(err, generator.ErrClosed):
		return ReasonClosed
	case errors.Is(err, generator.ErrLifetime):
		return ReasonLifetime
	case errors.Is(err, generator.ErrBeforeEpoch):
		return ReasonBeforeEpoch
	}
	return ReasonOther
}

func reasonIndex(r string) int {
	for i, v := range refusalReasons {
		if v == r {
			return i
		}
	}
	return len(refusalReasons) - 1
}

// Source is what a GeneratorCollector reads at scrape time; a
// *generator.Generator satisfies it.
type Source interface {
	// Stats returns the generator's counters (atomic reads).
	Stats() generator.Stats
	// Ready returns nil when a call now would issue.
	Ready() error
	// Settings returns the normalised settings (read once, at Attach).
	Settings() generator.Settings
}

var _ Source = (*generator.Generator)(nil)

// GeneratorCollector exports the snowflake_* generator series of one or
// (with Options.PerNode) several generators. It is a prometheus.Collector:
// register it on a registry of your own. Counters, gauges and the worker
// info are read from each generator's Stats at scrape time, the
// histograms and refusal reasons from the events its NodeMetrics observes.
type GeneratorCollector struct {
	opts      Options
	varLabels []string

	issued, rewinds, lastRewind, lastRewindSize, exhaustions,
	lead, maxLead, ckptWrites, ckptMark, ready, info *prometheus.Desc

	rewindSize *prometheus.HistogramVec
	wait       *prometheus.HistogramVec
	refusals   *prometheus.CounterVec

	nodes nodeSet[*NodeMetrics]
}

var _ prometheus.Collector = (*GeneratorCollector)(nil)

// NewGeneratorCollector returns a collector serving no generator yet; add
// them with Node.
func NewGeneratorCollector(o Options) *GeneratorCollector {
	c := &GeneratorCollector{opts: o}
	if o.PerNode {
		c.varLabels = []string{NodeLabel}
	}
	vl := func(extra ...string) []string { return append(append([]string(nil), c.varLabels...), extra...) }
	c.issued = prometheus.NewDesc("snowflake_ids_issued_total",
		"IDs issued by the generator.", vl(), nil)
	c.rewinds = prometheus.NewDesc("snowflake_clock_rewinds_total",
		"Calls that found the wall clock behind the last issued tick (or the start fence), by what the rewind policy did (waited, logical, refused); one rewind met by N concurrent calls counts N.", vl("outcome"), nil)
	c.lastRewind = prometheus.NewDesc("snowflake_last_rewind_timestamp_seconds",
		"Wall-clock time of the last detected rewind, Unix seconds; 0 before the first.", vl(), nil)
	c.lastRewindSize = prometheus.NewDesc("snowflake_last_rewind_size_seconds",
		"How far the clock stood behind at the last detected rewind, seconds; 0 before the first.", vl(), nil)
	c.exhaustions = prometheus.NewDesc("snowflake_sequence_exhaustions_total",
		"Ticks whose sequence ran out, so that a call had to wait for (or, under the logical policy, borrow) the next tick; steady growth means demand at the layout's ceiling.", vl(), nil)
	c.lead = prometheus.NewDesc("snowflake_logical_lead_seconds",
		"Current lead of the generator's logical clock over the wall clock, seconds; 0 when in step.", vl(), nil)
	c.maxLead = prometheus.NewDesc("snowflake_logical_lead_max_seconds",
		"Largest logical-clock lead seen since the generator started, seconds.", vl(), nil)
	c.ckptWrites = prometheus.NewDesc("snowflake_checkpoint_writes_total",
		"Writes of the reserved high-water mark, by result (ok, error).", vl("result"), nil)
	c.ckptMark = prometheus.NewDesc("snowflake_checkpoint_mark_timestamp_seconds",
		"The reserved high-water mark, Unix seconds: no ID past it is issued before it is persisted; 0 without a checkpoint.", vl(), nil)
	c.ready = prometheus.NewDesc("snowflake_ready",
		"1 when a call now would issue an ID, else 0 (refusing after a rewind, start fence, fence closed, closed).", vl(), nil)
	c.info = prometheus.NewDesc("snowflake_worker_info",
		"Always 1: the generator's worker and datacenter IDs, layout and rewind policy (datacenter_id is empty for a layout without a datacenter split; worker_id is then the whole node field). The only series with worker IDs as labels.",
		vl("worker_id", "datacenter_id", "layout", "policy"), nil)
	c.rewindSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "snowflake_clock_rewind_size_seconds",
		Help:    "How far the wall clock stood behind the last issued tick at each detected rewind, seconds.",
		Buckets: RewindBuckets,
	}, vl())
	c.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "snowflake_wait_seconds",
		Help:    "Time calls slept on the monotonic clock, by reason (rewind, sequence_exhausted), seconds: one observation per call and reason, the total of its waits.",
		Buckets: WaitBuckets,
	}, vl("reason"))
	c.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snowflake_refusals_total",
		Help: "Calls that returned an error instead of an ID, by reason (canceled and deadline: the caller's context ended during a wait).",
	}, vl("reason"))
	c.nodes.opts = o
	return c
}

// Describe implements prometheus.Collector.
func (c *GeneratorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.rewinds, c.lastRewind, c.lastRewindSize, c.exhaustions,
		c.lead, c.maxLead, c.ckptWrites, c.ckptMark, c.ready, c.info} {
		ch <- d
	}
	c.rewindSize.Describe(ch)
	c.wait.Describe(ch)
	c.refusals.Describe(ch)
}

// Collect implements prometheus.Collector; it reads every attached
// generator's Stats and Ready.
func (c *GeneratorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.nodes.all() {
		c.collectNode(ch, n)
	}
	c.rewindSize.Collect(ch)
	c.wait.Collect(ch)
	c.refusals.Collect(ch)
}

func (c *GeneratorCollector) collectNode(ch chan<- prometheus.Metric, n *NodeMetrics) {
	s, ready, info := n.snapshot()
	lv := n.labels
	with := func(extra ...string) []string { return append(append([]string(nil), lv...), extra...) }
	counter := func(d *prometheus.Desc, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), with(extra...)...)
	}
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, with(extra...)...)
	}
	counter(c.issued, s.Issued)
	counter(c.rewinds, s.RewindsWaited, generator.OutcomeWaited.String())
	counter(c.rewinds, s.RewindsLogical, generator.OutcomeLogical.String())
	counter(c.rewinds, s.RewindsRefused, generator.OutcomeRefused.String())
	gauge(c.lastRewind, float64(s.LastRewindWall)/1e9)
	gauge(c.lastRewindSize, s.LastRewindBy.Seconds())
	counter(c.exhaustions, s.Exhaustions)
	gauge(c.lead, s.Lead.Seconds())
	gauge(c.maxLead, s.MaxLead.Seconds())
	counter(c.ckptWrites, s.CheckpointWrites, "ok")
	counter(c.ckptWrites, s.CheckpointErrors, "error")
	gauge(c.ckptMark, float64(s.MarkMs)/1e3)
	r := 0.0
	if ready {
		r = 1
	}
	gauge(c.ready, r)
	if info != nil {
		gauge(c.info, 1, info...)
	}
}

// Node returns the NodeMetrics of the generator named name, creating it
// (and every one of its series, at zero) on first use. In single mode
// (Options.PerNode false) the only name is "". Errors wrap ErrNodeName or
// ErrTooManyNodes.
func (c *GeneratorCollector) Node(name string) (*NodeMetrics, error) {
	return c.nodes.get(name, func(lv []string) *NodeMetrics {
		n := &NodeMetrics{
			name:       name,
			labels:     lv,
			spans:      tracing.NewClockSpans(c.opts.TracerProvider, name, c.opts.KeptSpanGap),
			rewindSize: c.rewindSize.WithLabelValues(lv...),
		}
		n.wait[generator.WaitRewind] = c.wait.WithLabelValues(withLabels(lv, generator.WaitRewind.String())...)
		n.wait[generator.WaitExhausted] = c.wait.WithLabelValues(withLabels(lv, generator.WaitExhausted.String())...)
		for i, r := range refusalReasons {
			n.refusals[i] = c.refusals.WithLabelValues(withLabels(lv, r)...)
		}
		return n
	})
}

// MustNode is Node that panics on error; for single mode and fixed names.
func (c *GeneratorCollector) MustNode(name string) *NodeMetrics {
	n, err := c.Node(name)
	if err != nil {
		panic(err)
	}
	return n
}

// Nodes returns the names of the nodes served, sorted.
func (c *GeneratorCollector) Nodes() []string { return c.nodes.names() }

// RemoveNode drops every series of the node named name; a later Node call
// starts it afresh from zero.
func (c *GeneratorCollector) RemoveNode(name string) {
	n, ok := c.nodes.remove(name)
	if !ok {
		return
	}
	c.rewindSize.DeleteLabelValues(n.labels...)
	c.wait.DeleteLabelValues(withLabels(n.labels, generator.WaitRewind.String())...)
	c.wait.DeleteLabelValues(withLabels(n.labels, generator.WaitExhausted.String())...)
	for _, r := range refusalReasons {
		c.refusals.DeleteLabelValues(withLabels(n.labels, r)...)
	}
}

// NodeMetrics is one generator's share of a GeneratorCollector. It is the
// generator.Observer to put in Settings.Observer, and Attach hands it the
// generator to read at scrape time. Its methods are safe for concurrent
// use and on a nil *NodeMetrics (they do nothing).
//
// Cost: the observer runs only on rare events. A rewind or wait costs one
// histogram observation (with a trace-ID exemplar when the call's span is
// sampled) plus the span work of tracing.ClockSpans; a refusal costs a
// counter increment. Exhausted, Lead and Checkpoint do nothing: those
// series come from Stats.
type NodeMetrics struct {
	name       string
	labels     []string // label values before the metric's own
	spans      *tracing.ClockSpans
	rewindSize prometheus.Observer
	wait       [2]prometheus.Observer
	refusals   [numReasons]prometheus.Counter

	mu struct {
		sync.Mutex
		src  Source
		base generator.Stats // counters of generators Attach replaced or Detach released
		info []string        // worker_info label values of src
		// detached is the generator the last Detach released and
		// detachedStats the counters it then added to base.
		detached      Source
		detachedStats generator.Stats
	}
}

var _ generator.Observer = (*NodeMetrics)(nil)

// Name returns the node's name ("" in single mode).
func (n *NodeMetrics) Name() string {
	if n == nil {
		return ""
	}
	return n.name
}

// Attach makes g the generator read at scrape time and records its worker
// info. When it replaces an earlier generator (a restart), or follows a
// Detach, the earlier counters are carried over, so the node's counters
// never go backwards and stay in step with its histograms. Attaching the
// generator already attached changes nothing, and re-attaching the
// generator just detached takes its counts back rather than counting them
// twice.
func (n *NodeMetrics) Attach(g Source) {
	if n == nil || g == nil {
		return
	}
	info := workerInfo(g.Settings())
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.mu.src == g:
	case n.mu.src == nil && n.mu.detached == g:
		n.mu.base = subCounters(n.mu.base, n.mu.detachedStats)
	case n.mu.src != nil:
		n.mu.base = addCounters(n.mu.base, n.mu.src.Stats())
	}
	n.mu.detached, n.mu.detachedStats = nil, generator.Stats{}
	n.mu.src = g
	n.mu.info = info
}

// Detach stops reading the attached generator (it stopped or crashed),
// keeping its counters; the node reports not ready and exports no worker
// info until the next Attach.
func (n *NodeMetrics) Detach() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.src == nil {
		return
	}
	st := n.mu.src.Stats()
	n.mu.base = addCounters(n.mu.base, st)
	n.mu.detached, n.mu.detachedStats = n.mu.src, st
	n.mu.src = nil
	n.mu.info = nil
}

// Stats returns the node's counters as exported: the attached generator's
// Stats plus the counters carried over from generators it replaced.
func (n *NodeMetrics) Stats() generator.Stats {
	s, _, _ := n.snapshot()
	return s
}

func (n *NodeMetrics) snapshot() (s generator.Stats, ready bool, info []string) {
	n.mu.Lock()
	src, base, info := n.mu.src, n.mu.base, n.mu.info
	n.mu.Unlock()
	if src == nil {
		return base, false, nil
	}
	s = src.Stats()
	ready = src.Ready() == nil
	return addCounters(base, s), ready, info
}

// addCounters returns s with base's counters added; its gauges are s's.
func addCounters(base, s generator.Stats) generator.Stats {
	s.Issued += base.Issued
	s.RewindsWaited += base.RewindsWaited
	s.RewindsLogical += base.RewindsLogical
	s.RewindsRefused += base.RewindsRefused
	s.Exhaustions += base.Exhaustions
	s.Refusals += base.Refusals
	s.CheckpointWrites += base.CheckpointWrites
	s.CheckpointErrors += base.CheckpointErrors
	if s.LastRewindWall == 0 {
		s.LastRewindWall, s.LastRewindBy = base.LastRewindWall, base.LastRewindBy
	}
	if base.MaxLead > s.MaxLead {
		s.MaxLead = base.MaxLead
	}
	return s
}

// subCounters undoes addCounters(base, s) for the counters; the gauges of
// base stay.
func subCounters(base, s generator.Stats) generator.Stats {
	base.Issued -= s.Issued
	base.RewindsWaited -= s.RewindsWaited
	base.RewindsLogical -= s.RewindsLogical
	base.RewindsRefused -= s.RewindsRefused
	base.Exhaustions -= s.Exhaustions
	base.Refusals -= s.Refusals
	base.CheckpointWrites -= s.CheckpointWrites
	base.CheckpointErrors -= s.CheckpointErrors
	return base
}

// workerInfo returns the snowflake_worker_info label values of s: the
// worker and datacenter parts of the node ID (datacenter "" when the layout
// has no datacenter split), the layout name and the policy.
func workerInfo(s generator.Settings) []string {
	l := s.Layout
	worker, dc := s.Node, ""
	if l.DatacenterBits > 0 && l.DatacenterBits < l.NodeBits {
		wb := l.NodeBits - l.DatacenterBits
		worker = s.Node & (1<<wb - 1)
		dc = strconv.FormatInt(s.Node>>wb, 10)
	}
	name := l.Name
	if name == "" {
		name = fmt.Sprintf("%d/%d/%d", l.TimeBits, l.NodeBits, l.SeqBits)
	}
	return []string{strconv.FormatInt(worker, 10), dc, name, s.Policy.String()}
}

// Rewind implements generator.Observer: it observes the rewind size (with
// an exemplar when traced) and records the rewind on a span.
func (n *NodeMetrics) Rewind(ctx context.Context, e generator.RewindEvent) {
	if n == nil {
		return
	}
	sc := n.spans.Rewind(ctx, e)
	observe(n.rewindSize, e.By.Seconds(), sc)
}

// Wait implements generator.Observer: it observes the wait (with an
// exemplar when traced) and records it as a "clock.wait" span.
func (n *NodeMetrics) Wait(ctx context.Context, reason generator.WaitReason, start int64, d time.Duration) {
	if n == nil || int(reason) >= len(n.wait) {
		return
	}
	sc := n.spans.Wait(ctx, reason, d)
	observe(n.wait[reason], d.Seconds(), sc)
}

// Exhausted implements generator.Observer; snowflake_sequence_exhaustions_total
// comes from Stats, so it does nothing.
func (n *NodeMetrics) Exhausted(ctx context.Context) {}

// Refused implements generator.Observer: it counts the refusal by reason
// and records the error on the call's span.
func (n *NodeMetrics) Refused(ctx context.Context, err error) {
	if n == nil {
		return
	}
	n.refusals[reasonIndex(RefusalReason(err))].Inc()
	n.spans.Refused(ctx, err)
}

// Lead implements generator.Observer; snowflake_logical_lead_seconds comes
// from Stats, so it does nothing.
func (n *NodeMetrics) Lead(d time.Duration) {}

// Checkpoint implements generator.Observer; the checkpoint series come from
// Stats, so it does nothing.
func (n *NodeMetrics) Checkpoint(markMs int64, err error) {}

// observe records v on o, with the span's trace and span IDs as the
// exemplar when sc is sampled.
func observe(o prometheus.Observer, v float64, sc trace.SpanContext) {
	if sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{
				"trace_id": sc.TraceID().String(),
				"span_id":  sc.SpanID().String(),
			})
			return
		}
	}
	o.Observe(v)
}
