package tracing

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/generator"
)

// InstrumentationName names the tracer every snowchaos span comes from.
const InstrumentationName = "github.com/snowchaos/snowchaos/telemetry"

// Span and event names.
const (
	SpanScenario     = "snowchaos.scenario"
	SpanFault        = "snowchaos.fault"
	SpanLeaseAcquire = "lease.acquire"
	SpanLeaseRenew   = "lease.renew"
	SpanBatch        = "snowflake.next"
	SpanRewind       = "clock.rewind" // kept span for a rewind in an unsampled request
	SpanWait         = "clock.wait"
	EventRewind      = "clock.rewind"
)

// Attribute keys on snowchaos spans and events.
const (
	AttrNode          = attribute.Key("snowflake.node")
	AttrWorkerID      = attribute.Key("snowflake.worker_id")
	AttrBatch         = attribute.Key("snowflake.batch_size")
	AttrRewindSize    = attribute.Key("snowflake.rewind.size_seconds")
	AttrRewindPolicy  = attribute.Key("snowflake.rewind.policy")
	AttrRewindOutcome = attribute.Key("snowflake.rewind.outcome")
	AttrRewindStart   = attribute.Key("snowflake.rewind.start")
	AttrWaitReason    = attribute.Key("snowflake.wait.reason")
	AttrWaitSeconds   = attribute.Key("snowflake.wait.seconds")
	AttrScenario      = attribute.Key("snowchaos.scenario")
	AttrTarget        = attribute.Key("snowchaos.target")
	AttrFaultKind     = attribute.Key("snowchaos.fault.kind")
	AttrFaultDetail   = attribute.Key("snowchaos.fault.detail")
	AttrFaultNodes    = attribute.Key("snowchaos.fault.nodes")
)

// Tracer returns the snowchaos tracer of OpenTelemetry's global provider
// (a no-op until Setup enables tracing).
func Tracer() trace.Tracer { return otel.Tracer(InstrumentationName) }

// StartScenario starts the span covering one scenario run against a target.
func StartScenario(ctx context.Context, scenario, target string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, SpanScenario, trace.WithAttributes(AttrScenario.String(scenario), AttrTarget.String(target)))
}

// StartFault starts the span covering one fault injection of kind (step,
// freeze, leap, ...) aimed at nodes; detail is a short human description
// such as "-50ms".
func StartFault(ctx context.Context, kind, detail string, nodes ...string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, SpanFault, trace.WithAttributes(
		AttrFaultKind.String(kind), AttrFaultDetail.String(detail), AttrFaultNodes.StringSlice(nodes)))
}

// StartLeaseAcquire starts the span covering the acquisition of a
// worker-ID lease by node.
func StartLeaseAcquire(ctx context.Context, node string, workerID int64) (context.Context, trace.Span) {
	return Tracer().Start(ctx, SpanLeaseAcquire, trace.WithAttributes(AttrNode.String(node), AttrWorkerID.Int64(workerID)))
}

// StartLeaseRenew starts the span covering one renewal of node's lease.
func StartLeaseRenew(ctx context.Context, node string, workerID int64) (context.Context, trace.Span) {
	return Tracer().Start(ctx, SpanLeaseRenew, trace.WithAttributes(AttrNode.String(node), AttrWorkerID.Int64(workerID)))
}

// StartBatch starts the span covering one request or batch of n IDs from
// node; pass its context to Generator.NextContext or NextNContext so clock
// events land on it. There is never a span per ID.
func StartBatch(ctx context.Context, node string, n int) (context.Context, trace.Span) {
	return Tracer().Start(ctx, SpanBatch, trace.WithAttributes(AttrNode.String(node), AttrBatch.Int(n)))
}

// End ends span, first recording err (when non-nil) and an error status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ClockSpans puts one generator's clock events on spans. It is safe for
// concurrent use. Its methods cost a context lookup when the request is
// not sampled and no rewind is involved.
//
// A rewind adds a "clock.rewind" event to the recording span in ctx. When
// the span in ctx is not recording (unsampled, or no span at all), a
// separate root span "clock.rewind" is started instead, linked to the
// request's span context and carrying KeepKey so KeepRewinds samples it;
// such kept spans are rate limited per ClockSpans (see NewClockSpans), since
// a logical-clock generator meets a rewind on every call until the clock
// catches up.
type ClockSpans struct {
	tp       trace.TracerProvider // nil: the global provider
	node     string
	minGap   int64        // ns between kept spans; 0: no limit
	lastKept atomic.Int64 // Unix ns of the last kept span
}

// DefaultKeptSpanGap is the default minimum time between two kept rewind
// spans of one generator.
const DefaultKeptSpanGap = 100 * time.Millisecond

// NewClockSpans returns a ClockSpans for the generator named node. tp nil
// means OpenTelemetry's global provider, looked up at each event. minGap is
// the least time between two kept spans (spans started for rewinds in
// unsampled requests); 0 means DefaultKeptSpanGap, negative means no limit.
// Events on sampled spans are never limited.
func NewClockSpans(tp trace.TracerProvider, node string, minGap time.Duration) *ClockSpans {
	if minGap == 0 {
		minGap = DefaultKeptSpanGap
	}
	if minGap < 0 {
		minGap = 0
	}
	return &ClockSpans{tp: tp, node: node, minGap: int64(minGap)}
}

func (c *ClockSpans) tracer() trace.Tracer {
	if c.tp != nil {
		return c.tp.Tracer(InstrumentationName)
	}
	return Tracer()
}

// allowKept reports whether a kept span may start now.
func (c *ClockSpans) allowKept(now time.Time) bool {
	if c.minGap == 0 {
		return true
	}
	n := now.UnixNano()
	last := c.lastKept.Load()
	if last != 0 && n-last < c.minGap {
		return false
	}
	return c.lastKept.CompareAndSwap(last, n)
}

func rewindAttrs(node string, e generator.RewindEvent) []attribute.KeyValue {
	a := []attribute.KeyValue{
		AttrRewindSize.Float64(e.By.Seconds()),
		AttrRewindPolicy.String(e.Policy.String()),
		AttrRewindOutcome.String(e.Outcome.String()),
		AttrRewindStart.Bool(e.Start),
	}
	if node != "" {
		a = append(a, AttrNode.String(node))
	}
	return a
}

// keptStart returns the options of a kept root span linked to parent.
func (c *ClockSpans) keptStart(parent trace.SpanContext, ts time.Time, attrs []attribute.KeyValue) []trace.SpanStartOption {
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithTimestamp(ts),
		trace.WithAttributes(append([]attribute.KeyValue{KeepKey.Bool(true)}, attrs...)...),
	}
	if parent.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: parent}))
	}
	return opts
}

// Rewind records e and returns the span context it landed on (invalid when
// it landed nowhere: no recording span and the kept span was rate limited
// or tracing is off).
func (c *ClockSpans) Rewind(ctx context.Context, e generator.RewindEvent) trace.SpanContext {
	span := trace.SpanFromContext(ctx)
	now := time.Now()
	attrs := rewindAttrs(c.node, e)
	if span.IsRecording() {
		span.AddEvent(EventRewind, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
		return span.SpanContext()
	}
	if !c.allowKept(now) {
		return trace.SpanContext{}
	}
	parent := span.SpanContext()
	_, kept := c.tracer().Start(ctx, SpanRewind, c.keptStart(parent, now, attrs)...)
	if !kept.IsRecording() {
		return trace.SpanContext{}
	}
	kept.AddEvent(EventRewind, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	if e.Outcome == generator.OutcomeRefused {
		kept.SetStatus(codes.Error, "clock moved backwards")
	}
	kept.End(trace.WithTimestamp(now))
	return kept.SpanContext()
}

// Wait records a wait of d that ended now: a child span "clock.wait" of the
// recording span in ctx, with its real start and end times. A rewind wait in
// an unsampled request becomes a kept root span linked to the request
// instead (rate limited like Rewind); an exhaustion wait in an unsampled
// request is not traced. It returns the span context of the wait span, or
// an invalid one.
func (c *ClockSpans) Wait(ctx context.Context, reason generator.WaitReason, d time.Duration) trace.SpanContext {
	span := trace.SpanFromContext(ctx)
	end := time.Now()
	start := end.Add(-d)
	attrs := []attribute.KeyValue{AttrWaitReason.String(reason.String()), AttrWaitSeconds.Float64(d.Seconds())}
	if c.node != "" {
		attrs = append(attrs, AttrNode.String(c.node))
	}
	var w trace.Span
	switch {
	case span.IsRecording():
		_, w = c.tracer().Start(ctx, SpanWait, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	case reason == generator.WaitRewind && c.allowKept(end):
		_, w = c.tracer().Start(ctx, SpanWait, c.keptStart(span.SpanContext(), start, attrs)...)
	default:
		return trace.SpanContext{}
	}
	if !w.IsRecording() {
		return trace.SpanContext{}
	}
	w.End(trace.WithTimestamp(end))
	return w.SpanContext()
}

// Refused records err as an error with an error status on the recording
// span in ctx. A refusal in an unsampled request is covered by its rewind's
// kept span when a rewind caused it, and otherwise only counted.
func (c *ClockSpans) Refused(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || err == nil {
		return
	}
	var re *generator.RewindError
	attrs := []attribute.KeyValue{}
	if errors.As(err, &re) {
		attrs = append(attrs, AttrRewindSize.Float64(re.By.Seconds()), AttrRewindPolicy.String(re.Policy.String()))
	}
	span.RecordError(err, trace.WithAttributes(attrs...))
	span.SetStatus(codes.Error, err.Error())
}
