package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// traced is a generator whose NodeMetrics traces into a span recorder.
type traced struct {
	clk    *scriptClock
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reg    *prometheus.Registry
	g      *generator.Generator
	tracer trace.Tracer
}

// newTraced builds a generator with the given policy whose spans go to a
// recorder through a provider sampling requests with base (wrapped in
// KeepRewinds, as tracing.Setup does).
func newTraced(t *testing.T, base sdktrace.Sampler, policy generator.Policy, gap time.Duration) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.KeepRewinds(base)), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	coll := telemetry.NewGeneratorCollector(telemetry.Options{TracerProvider: tp, KeptSpanGap: gap})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(coll)
	n := coll.MustNode("")
	clk := newScriptClock()
	g := newGen(t, clk, n, policy, 5)
	n.Attach(g)
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	return &traced{clk: clk, rec: rec, tp: tp, reg: reg, g: g, tracer: tp.Tracer("test")}
}

func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func one(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := spansNamed(spans, name)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("%d spans named %s, want 1 (spans: %v)", len(got), name, names)
	}
	return got[0]
}

// checkRewindEvent asserts e is a clock.rewind event of the given size,
// policy and outcome.
func checkRewindEvent(t *testing.T, e sdktrace.Event, by time.Duration, policy, outcome string) {
	t.Helper()
	if e.Name != tracing.EventRewind {
		t.Fatalf("event %q, want %q", e.Name, tracing.EventRewind)
	}
	a := attrs(e.Attributes)
	if got := a[tracing.AttrRewindSize].AsFloat64(); got < by.Seconds() || got > by.Seconds()+0.001 {
		t.Errorf("rewind size = %vs, want %v (up to one tick more)", got, by)
	}
	if got := a[tracing.AttrRewindPolicy].AsString(); got != policy {
		t.Errorf("policy = %q, want %q", got, policy)
	}
	if got := a[tracing.AttrRewindOutcome].AsString(); got != outcome {
		t.Errorf("outcome = %q, want %q", got, outcome)
	}
	if v, ok := a[tracing.AttrRewindStart]; !ok || v.AsBool() {
		t.Errorf("start = %v (present %v), want false", v.AsBool(), ok)
	}
}

// exemplarOf returns the exemplar labels of the bucket holding histogram
// family name's only observation.
func exemplarOf(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) map[string]string {
	t.Helper()
	h := sample(t, gather(t, reg), name, labels).GetHistogram()
	var ex *dto.Exemplar
	for _, b := range h.GetBucket() {
		if b.GetExemplar() != nil {
			ex = b.GetExemplar()
		}
	}
	if ex == nil {
		return nil
	}
	out := map[string]string{}
	for _, lp := range ex.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

func TestTraceSampledRewindWait(t *testing.T) {
	tr := newTraced(t, sdktrace.AlwaysSample(), generator.PolicyWait, -1)
	ctx, req := tr.tracer.Start(context.Background(), "request")
	tr.clk.step(-20 * time.Millisecond)
	if _, err := tr.g.NextContext(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	spans := tr.rec.Ended()
	r := one(t, spans, "request")
	if len(r.Events()) != 1 {
		t.Fatalf("request events = %v, want one clock.rewind", r.Events())
	}
	checkRewindEvent(t, r.Events()[0], 20*time.Millisecond, "wait", "waited")
	w := one(t, spans, tracing.SpanWait)
	if w.Parent().SpanID() != r.SpanContext().SpanID() || w.SpanContext().TraceID() != r.SpanContext().TraceID() {
		t.Errorf("clock.wait parent = %v, want the request span %v", w.Parent().SpanID(), r.SpanContext().SpanID())
	}
	a := attrs(w.Attributes())
	if got := a[tracing.AttrWaitReason].AsString(); got != "rewind" {
		t.Errorf("wait reason = %q", got)
	}
	if d := w.EndTime().Sub(w.StartTime()); d < 20*time.Millisecond || d > 21*time.Millisecond {
		t.Errorf("clock.wait lasts %v, want the 20ms the generator slept (explicit start)", d)
	}
	if len(spansNamed(spans, tracing.SpanRewind)) != 0 {
		t.Error("a kept clock.rewind span was started although the request was sampled")
	}
	// Exemplars: the wait carries the wait span, the rewind size the request span.
	ex := exemplarOf(t, tr.reg, "snowflake_wait_seconds", map[string]string{"reason": "rewind"})
	if ex["trace_id"] != r.SpanContext().TraceID().String() || ex["span_id"] != w.SpanContext().SpanID().String() {
		t.Errorf("wait exemplar = %v, want trace %s span %s", ex, r.SpanContext().TraceID(), w.SpanContext().SpanID())
	}
	ex = exemplarOf(t, tr.reg, "snowflake_clock_rewind_size_seconds", nil)
	if ex["trace_id"] != r.SpanContext().TraceID().String() || ex["span_id"] != r.SpanContext().SpanID().String() {
		t.Errorf("rewind exemplar = %v, want the request span", ex)
	}
}

func TestTraceUnsampledRewindIsKept(t *testing.T) {
	tr := newTraced(t, sdktrace.ParentBased(sdktrace.NeverSample()), generator.PolicyWait, -1)
	ctx, req := tr.tracer.Start(context.Background(), "request")
	if req.IsRecording() {
		t.Fatal("request sampled; the test needs an unsampled one")
	}
	tr.clk.step(-30 * time.Millisecond)
	if _, err := tr.g.NextContext(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	spans := tr.rec.Ended()
	if len(spansNamed(spans, "request")) != 0 {
		t.Fatal("unsampled request span recorded")
	}
	for _, name := range []string{tracing.SpanRewind, tracing.SpanWait} {
		k := one(t, spans, name)
		if k.Parent().IsValid() {
			t.Errorf("%s has parent %v, want a new root", name, k.Parent())
		}
		if len(k.Links()) != 1 || k.Links()[0].SpanContext.SpanID() != req.SpanContext().SpanID() ||
			k.Links()[0].SpanContext.TraceID() != req.SpanContext().TraceID() {
			t.Errorf("%s links = %+v, want one link to the request %v", name, k.Links(), req.SpanContext())
		}
		if !k.SpanContext().IsSampled() || !attrs(k.Attributes())[tracing.KeepKey].AsBool() {
			t.Errorf("%s not sampled or not marked with %s", name, tracing.KeepKey)
		}
	}
	k := one(t, spans, tracing.SpanRewind)
	if len(k.Events()) != 1 {
		t.Fatalf("kept span events = %v", k.Events())
	}
	checkRewindEvent(t, k.Events()[0], 30*time.Millisecond, "wait", "waited")
	ex := exemplarOf(t, tr.reg, "snowflake_clock_rewind_size_seconds", nil)
	if ex["trace_id"] != k.SpanContext().TraceID().String() {
		t.Errorf("rewind exemplar = %v, want the kept span's trace %s", ex, k.SpanContext().TraceID())
	}
}

func TestTraceRewindWithoutSpanIsKept(t *testing.T) {
	tr := newTraced(t, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), generator.PolicyLogical, -1)
	tr.clk.step(-10 * time.Millisecond)
	if _, err := tr.g.Next(); err != nil { // context.Background: no span at all
		t.Fatal(err)
	}
	k := one(t, tr.rec.Ended(), tracing.SpanRewind)
	if len(k.Links()) != 0 {
		t.Errorf("links = %v, want none without a request span", k.Links())
	}
	checkRewindEvent(t, k.Events()[0], 10*time.Millisecond, "logical", "logical")
	if n := len(spansNamed(tr.rec.Ended(), tracing.SpanWait)); n != 0 {
		t.Errorf("%d clock.wait spans for a logical rewind that never waited", n)
	}
}

func TestTraceRefusalRecordsError(t *testing.T) {
	tr := newTraced(t, sdktrace.AlwaysSample(), generator.PolicyRefuse, -1)
	ctx, req := tr.tracer.Start(context.Background(), "request")
	tr.clk.step(-5 * time.Millisecond)
	_, err := tr.g.NextContext(ctx)
	if !errors.Is(err, generator.ErrClockBackwards) {
		t.Fatalf("err = %v, want ErrClockBackwards", err)
	}
	req.End()
	r := one(t, tr.rec.Ended(), "request")
	if r.Status().Code != codes.Error {
		t.Errorf("status = %+v, want Error", r.Status())
	}
	var names []string
	for _, e := range r.Events() {
		names = append(names, e.Name)
	}
	if len(names) != 2 || names[0] != tracing.EventRewind || names[1] != "exception" {
		t.Fatalf("events = %v, want [clock.rewind exception]", names)
	}
	checkRewindEvent(t, r.Events()[0], 5*time.Millisecond, "refuse", "refused")
	if msg := attrs(r.Events()[1].Attributes)["exception.message"].AsString(); msg != err.Error() {
		t.Errorf("exception.message = %q, want %q", msg, err.Error())
	}
}

func TestTraceUnsampledRefusalKeptWithErrorStatus(t *testing.T) {
	tr := newTraced(t, sdktrace.NeverSample(), generator.PolicyRefuse, -1)
	tr.clk.step(-5 * time.Millisecond)
	if _, err := tr.g.Next(); err == nil {
		t.Fatal("refuse policy issued after a step back")
	}
	k := one(t, tr.rec.Ended(), tracing.SpanRewind)
	if k.Status().Code != codes.Error {
		t.Errorf("kept span status = %+v, want Error", k.Status())
	}
}

func TestTraceExhaustionWait(t *testing.T) {
	tr := newTraced(t, sdktrace.ParentBased(sdktrace.AlwaysSample()), generator.PolicyWait, -1)
	ctx, req := tr.tracer.Start(context.Background(), "batch")
	if _, err := tr.g.NextNContext(ctx, make([]generator.ID, 6000)); err != nil {
		t.Fatal(err)
	}
	req.End()
	// An unsampled batch's exhaustion wait leaves no span.
	uctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true}))
	if _, err := tr.g.NextNContext(uctx, make([]generator.ID, 6000)); err != nil {
		t.Fatal(err)
	}
	spans := tr.rec.Ended()
	w := one(t, spans, tracing.SpanWait)
	if got := attrs(w.Attributes())[tracing.AttrWaitReason].AsString(); got != "sequence_exhausted" {
		t.Errorf("wait reason = %q", got)
	}
	if w.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("exhaustion wait is not a child of the batch span")
	}
	if n := len(spans); n != 2 {
		t.Errorf("%d spans, want the batch and its wait", n)
	}
}

func TestKeptSpansRateLimited(t *testing.T) {
	tr := newTraced(t, sdktrace.NeverSample(), generator.PolicyLogical, time.Hour)
	for i := 0; i < 3; i++ {
		tr.clk.advance(2 * time.Millisecond)
		tr.clk.step(-10 * time.Millisecond)
		if _, err := tr.g.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(spansNamed(tr.rec.Ended(), tracing.SpanRewind)); n != 1 {
		t.Errorf("%d kept rewind spans within the gap, want 1", n)
	}
	st := tr.g.Stats()
	if st.RewindsLogical != 3 {
		t.Errorf("RewindsLogical = %d, want 3", st.RewindsLogical)
	}
	if got := value(sample(t, gather(t, tr.reg), "snowflake_clock_rewind_size_seconds", nil)); got != 3 {
		t.Errorf("rewind histogram count = %v, want 3 (metrics are never limited)", got)
	}
}
