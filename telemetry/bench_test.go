package telemetry_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// Benchmarks of what instrumentation costs an issued ID. Each benchmark
// runs a bare generator (no observer) and an instrumented one (the
// telemetry observer and collector registered on a registry, tracing on
// with a sampling SDK provider and a discarding exporter) in the same run,
// alternating chunks, and reports both and the difference.

// benchClock is a single-goroutine clock: the wall moves one tick (1ms)
// every 1<<shift readings and Sleep moves it by d at once, so the
// generator never blocks but does meet sequence exhaustion (and calls the
// observer) when shift > 12.
type benchClock struct {
	n     int64
	shift uint
	base  int64
}

func newBenchClock(shift uint) *benchClock {
	return &benchClock{shift: shift, base: generator.DefaultEpoch.Add(time.Hour).UnixNano()}
}

func (c *benchClock) Now() (int64, int64) {
	c.n++
	w := c.n >> c.shift * int64(time.Millisecond)
	return c.base + w, w
}

func (c *benchClock) Sleep(d time.Duration) {
	c.n += (int64(d) + int64(time.Millisecond) - 1) / int64(time.Millisecond) << c.shift
}

// discard is a span exporter that drops everything.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// instrumented returns a generator on clk wired as snowchaos serve would
// wire it: observer, collector on a served registry, sampling tracer.
func instrumented(b *testing.B, clk generator.Clock, tp *sdktrace.TracerProvider) *generator.Generator {
	b.Helper()
	reg := telemetry.NewRegistry()
	coll := telemetry.NewGeneratorCollector(telemetry.Options{TracerProvider: tp})
	reg.MustRegister(coll)
	n := coll.MustNode("")
	g, err := generator.New(generator.Settings{Node: 5, Clock: clk, Observer: n, MaxWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	n.Attach(g)
	if _, err := reg.Gather(); err != nil {
		b.Fatal(err)
	}
	return g
}

func bare(b *testing.B, clk generator.Clock) *generator.Generator {
	b.Helper()
	g, err := generator.New(generator.Settings{Node: 5, Clock: clk, MaxWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func samplingProvider(b *testing.B) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.KeepRewinds(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// BenchmarkInstrumentationUncapped is Next on a counter clock that ticks
// every 8192 readings: each tick's 4096 IDs run out, so the slow path,
// Exhausted and an exhaustion Wait (histogram observation) come once per
// 4096 IDs, as on an uncapped real node. delta_ns/ID is the
// instrumentation's cost (target <= 3).
func BenchmarkInstrumentationUncapped(b *testing.B) {
	tp := samplingProvider(b)
	plain := bare(b, newBenchClock(13))
	instr := instrumented(b, newBenchClock(13), tp)
	const chunk = 1 << 16
	var tBare, tInstr time.Duration
	var ids int
	run := func(g *generator.Generator) time.Duration {
		start := time.Now()
		for range chunk {
			if _, err := g.Next(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so drifts cancel out.
		if i%2 == 0 {
			tBare += run(plain)
			tInstr += run(instr)
		} else {
			tInstr += run(instr)
			tBare += run(plain)
		}
		ids += chunk
	}
	bn, in := float64(tBare)/float64(ids), float64(tInstr)/float64(ids)
	b.ReportMetric(bn, "bare_ns/ID")
	b.ReportMetric(in, "instr_ns/ID")
	b.ReportMetric(in-bn, "delta_ns/ID")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkInstrumentationBatchSpan is NextNContext(256) under a
// "snowflake.next" span per batch (a traced HTTP request), against bare
// NextN(256), on the counter clock: the per-ID share of a span per batch,
// with every batch sampled and with 1% sampled.
func BenchmarkInstrumentationBatchSpan(b *testing.B) {
	for _, sc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"always", sdktrace.AlwaysSample()}, {"ratio=0.01", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))}} {
		b.Run(sc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.KeepRewinds(sc.sampler)), sdktrace.WithBatcher(discard{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tracer := tp.Tracer(tracing.InstrumentationName)
			plain := bare(b, newBenchClock(5))
			instr := instrumented(b, newBenchClock(5), tp)
			dst := make([]generator.ID, 256)
			const rounds = 256
			var tBare, tInstr time.Duration
			var ids int
			runBare := func() time.Duration {
				start := time.Now()
				for range rounds {
					if _, err := plain.NextN(dst); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			runInstr := func() time.Duration {
				start := time.Now()
				for range rounds {
					ctx, span := tracer.Start(context.Background(), tracing.SpanBatch)
					if _, err := instr.NextNContext(ctx, dst); err != nil {
						b.Fatal(err)
					}
					span.End()
				}
				return time.Since(start)
			}
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					tBare += runBare()
					tInstr += runInstr()
				} else {
					tInstr += runInstr()
					tBare += runBare()
				}
				ids += rounds * len(dst)
			}
			bn, in := float64(tBare)/float64(ids), float64(tInstr)/float64(ids)
			b.ReportMetric(bn, "bare_ns/ID")
			b.ReportMetric(in, "instr_ns/ID")
			b.ReportMetric(in-bn, "delta_ns/ID")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkCappedThroughput issues IDs as fast as the system clock allows
// (the layout's ceiling: 4096 per 1ms tick) with Next, alternating 10ms
// windows between a bare generator and an instrumented one (metrics, plus
// an always-sampled span per 1024 IDs). Each reports the share of the
// sequence it used over the ticks its windows spanned (IDs issued over
// 4096 x ticks from its first ID's tick to its last's), so window edges
// do not bias it. Target: instrumented within 1% of the ceiling and of
// bare.
func BenchmarkCappedThroughput(b *testing.B) {
	tp := samplingProvider(b)
	tracer := tp.Tracer(tracing.InstrumentationName)
	plain := bare(b, generator.SystemClock())
	instr := instrumented(b, generator.SystemClock(), tp)
	layout := generator.DefaultLayout()
	const window = 10 * time.Millisecond
	type tally struct{ ids, ticks int64 }
	var tb, ti tally
	run := func(g *generator.Generator, traced bool, t *tally) {
		var first, last generator.ID
		n := int64(0)
		start := time.Now()
		for time.Since(start) < window {
			ctx := context.Background()
			var span trace.Span
			if traced {
				ctx, span = tracer.Start(ctx, tracing.SpanBatch)
			}
			for range 1024 {
				id, err := g.NextContext(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if first == 0 {
					first = id
				}
				last = id
			}
			if span != nil {
				span.End()
			}
			n += 1024
		}
		t.ids += n
		t.ticks += layout.Decode(last).Tick - layout.Decode(first).Tick + 1
	}
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so load drifts cancel out.
		if i%2 == 0 {
			run(plain, false, &tb)
			run(instr, true, &ti)
		} else {
			run(instr, true, &ti)
			run(plain, false, &tb)
		}
	}
	pb := 100 * float64(tb.ids) / float64(tb.ticks*4096)
	pi := 100 * float64(ti.ids) / float64(ti.ticks*4096)
	b.ReportMetric(pb, "bare_pct_of_ceiling")
	b.ReportMetric(pi, "instr_pct_of_ceiling")
	b.ReportMetric(pb-pi, "delta_pct")
	b.ReportMetric(0, "ns/op")
}
