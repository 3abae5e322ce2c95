package telemetry_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// TestRealPrometheus runs a real-clock generator under a fault clock,
// serves its metrics, lets a real Prometheus scrape them every second and
// asserts through the query API that the series carry what the
// generator's Stats reported, and that the trace-ID exemplars arrive.
func TestRealPrometheus(t *testing.T) {
	promtest.Binary(t, "prometheus")

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.KeepRewinds(nil)), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	reg := telemetry.NewRegistry()
	coll := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true, TracerProvider: tp})
	reg.MustRegister(coll)
	node := coll.MustNode("node1")
	clk := faults.New(generator.SystemClock())
	g, err := generator.New(generator.Settings{Node: 1, Clock: clk, Observer: node, Policy: generator.PolicyWait})
	if err != nil {
		t.Fatal(err)
	}
	node.Attach(g)

	srv := httptest.NewServer(telemetry.Handler(reg))
	defer srv.Close()
	p := promtest.Start(t, srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitUp(ctx, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.Logs())
	}

	// Load past the sequence (8192 IDs cannot fit one 4096-ID tick), then
	// two 50ms NTP-style steps back, each met by a traced request.
	buf := make([]generator.ID, 8192)
	for i := 0; i < 40; i++ {
		if _, err := g.NextN(buf); err != nil {
			t.Fatal(err)
		}
	}
	var traceIDs []string
	for i := 0; i < 2; i++ {
		clk.Step(-50 * time.Millisecond)
		rctx, span := tp.Tracer("test").Start(context.Background(), "request")
		if _, err := g.NextContext(rctx); err != nil {
			t.Fatal(err)
		}
		span.End()
		traceIDs = append(traceIDs, span.SpanContext().TraceID().String())
	}
	st := node.Stats()
	if st.RewindsWaited != 2 || st.Exhaustions == 0 {
		t.Fatalf("the script did not produce its events: %+v", st)
	}
	local := gather(t, reg)
	rewindWaits := sample(t, local, "snowflake_wait_seconds", map[string]string{"reason": "rewind"}).GetHistogram()
	exhaustWaits := sample(t, local, "snowflake_wait_seconds", map[string]string{"reason": "sequence_exhausted"}).GetHistogram()

	for _, c := range []struct {
		q    string
		want float64
	}{
		{`snowflake_ids_issued_total{node="node1"}`, float64(st.Issued)},
		{`snowflake_clock_rewinds_total{node="node1",outcome="waited"}`, float64(st.RewindsWaited)},
		{`snowflake_clock_rewinds_total{node="node1",outcome="refused"}`, 0},
		{`snowflake_clock_rewind_size_seconds_count{node="node1"}`, float64(st.RewindsWaited)},
		{`snowflake_last_rewind_timestamp_seconds{node="node1"}`, float64(st.LastRewindWall) / 1e9},
		{`snowflake_last_rewind_size_seconds{node="node1"}`, st.LastRewindBy.Seconds()},
		{`snowflake_wait_seconds_count{node="node1",reason="rewind"}`, float64(st.RewindsWaited)},
		{`snowflake_wait_seconds_sum{node="node1",reason="rewind"}`, rewindWaits.GetSampleSum()},
		{`snowflake_wait_seconds_count{node="node1",reason="sequence_exhausted"}`, float64(exhaustWaits.GetSampleCount())},
		{`snowflake_sequence_exhaustions_total{node="node1"}`, float64(st.Exhaustions)},
		{`sum(snowflake_refusals_total{node="node1"})`, float64(st.Refusals)},
		{`snowflake_ready{node="node1"}`, 1},
	} {
		if _, err := p.WaitFor(ctx, c.q, promtest.Equals(c.want)); err != nil {
			t.Errorf("%v (want %v; Stats %+v)", err, c.want, st)
		}
	}
	t.Logf("two 50ms steps back: rewind waits %.4fs in all; %d exhaustions, %d exhaustion waits, %d IDs",
		rewindWaits.GetSampleSum(), st.Exhaustions, exhaustWaits.GetSampleCount(), st.Issued)

	// The rewind waits ran under sampled spans: the trace ID reaches
	// Prometheus as an exemplar. A bucket exposes only its latest
	// exemplar and both waits share a bucket, so the last trace must be
	// there, and no exemplar may name a trace other than these two.
	for _, q := range []string{`snowflake_wait_seconds_bucket{reason="rewind"}`, `snowflake_clock_rewind_size_seconds_bucket`} {
		exs, err := p.WaitExemplars(ctx, q, 10*time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		last := false
		for _, e := range exs {
			id := string(e.Labels["trace_id"])
			last = last || id == traceIDs[1]
			if id != traceIDs[0] && id != traceIDs[1] {
				t.Errorf("%s: exemplar of unknown trace %s", q, id)
			}
		}
		if !last {
			t.Errorf("%s: no exemplar carries the last request's trace %s (exemplars %v)", q, traceIDs[1], exs)
		}
	}
}
