package pgoracle

import (
	"context"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// benchTickets reports a ticket-counter run as a benchmark: b.N is not
// used for the count (a sequence run is time-bounded), so run it with
// -benchtime 1x.
func benchTickets(b *testing.B, batch, conns int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c, err := (&Oracle{dsn: DSN(""), cfg: Config{ApplicationName: "bench"}}).connect(ctx)
	cancel()
	if err != nil {
		b.Skipf("Postgres unavailable: %v", err)
	}
	c.Close(context.Background())
	b.ResetTimer()
	var last TicketResult
	for range b.N {
		r, err := Tickets(context.Background(), TicketConfig{Batch: batch, Conns: conns, Duration: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		last = r
	}
	b.ReportMetric(last.CallRate, "calls/s")
	b.ReportMetric(last.IDRate, "ids/s")
	b.ReportMetric(float64(last.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(last.P99.Microseconds()), "p99-µs")
}

// BenchmarkNextval is one nextval() per round trip on one connection.
func BenchmarkNextval(b *testing.B) { benchTickets(b, 1, 1) }

// BenchmarkNextval8Conns is one nextval() per round trip on 8 connections.
func BenchmarkNextval8Conns(b *testing.B) { benchTickets(b, 1, 8) }

// BenchmarkNextvalBatch1000 is 1000 nextval() per round trip.
func BenchmarkNextvalBatch1000(b *testing.B) { benchTickets(b, 1000, 1) }

// BenchmarkOracleAdd measures the oracle's hot-path cost per ID (Add with
// the COPY writers running), in 4096-ID calls.
func BenchmarkOracleAdd(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o, err := New(ctx, Config{})
	if err != nil {
		b.Skipf("Postgres unavailable: %v", err)
	}
	defer o.Close()
	g, _ := generator.New(generator.Settings{})
	defer g.Close()
	buf := make([]generator.ID, 4096)
	b.ResetTimer()
	for range b.N {
		n, _ := g.NextN(buf)
		o.Add(0, buf[:n])
	}
	res, err := o.Finish(context.Background())
	b.StopTimer()
	if err != nil || res.Verdict != VerdictPass {
		b.Fatalf("%+v %v", res, err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(res.Submitted), "ns/ID")
	b.ReportMetric(float64(res.Submitted)/b.Elapsed().Seconds(), "ids/s")
}
