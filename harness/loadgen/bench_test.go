package loadgen

import (
	"context"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
)

// benchNode serves a generator on a real loopback listener (not
// httptest, to measure the production http.Server settings).
func benchNode(b *testing.B, worker int64) string {
	b.Helper()
	nd, err := node.New(context.Background(), node.Config{Settings: generator.Settings{Node: worker}})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Node: nd, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	b.Cleanup(func() {
		cancel()
		<-done
		nd.Stop(context.Background(), true)
	})
	return "http://" + ln.Addr().String()
}

// benchRun drives b.N requests at maximum rate and reports throughput,
// latency percentiles, the process's CPU per request (load generator and
// nodes together) and that the verifier dropped nothing.
func benchRun(b *testing.B, batch int, workers uint64, nodes int, std bool) {
	var urls []string
	for i := range nodes {
		urls = append(urls, benchNode(b, int64(i+1)))
	}
	v := verify.NewConcurrent(verify.Config{})
	issuers, err := RegisterIssuers(context.Background(), v, urls, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	rep, err := Run(context.Background(), Config{
		Nodes: urls, Batch: batch, Workers: workers, MaxRequests: uint64(b.N), Duration: 10 * time.Minute,
		Verifier: v, Issuers: issuers, StdTransport: std,
	})
	b.StopTimer()
	cpu := processCPU() - cpu0
	if err != nil {
		b.Fatal(err)
	}
	res := v.Result()
	if rep.Failures.Total() != 0 || rep.Dropped != 0 || res.Duplicates != 0 || res.IDs != rep.IDs {
		b.Fatalf("%v; verifier %d IDs %d dups; errors %q", rep, res.IDs, res.Duplicates, rep.Errors)
	}
	b.ReportMetric(rep.Rate, "req/s")
	b.ReportMetric(rep.IDRate, "ids/s")
	b.ReportMetric(float64(rep.Latency.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(rep.Latency.P99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(rep.Dropped), "dropped")
	if rep.Requests > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(rep.Requests), "cpu-ns/req")
	}
}

// processCPU is the CPU time this process has used, user and system: the
// load generator's and the nodes' together, which share the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTPSingle is GET /v1/id with keep-alive on loopback, load
// generator and node in one process, every ID verified live.
func BenchmarkHTTPSingle(b *testing.B) { benchRun(b, 0, 32, 1, false) }

// BenchmarkHTTPSingleStdTransport is BenchmarkHTTPSingle with net/http's
// Transport on the load side instead of Transport (fasthttp's
// HostClient): the same-run reference.
func BenchmarkHTTPSingleStdTransport(b *testing.B) { benchRun(b, 0, 32, 1, true) }

// BenchmarkHTTPBatch is GET /v1/ids?count=4096 on one node.
func BenchmarkHTTPBatch(b *testing.B) { benchRun(b, 4096, 4, 1, false) }

// BenchmarkHTTPBatch2Nodes is GET /v1/ids?count=4096 over two nodes.
func BenchmarkHTTPBatch2Nodes(b *testing.B) { benchRun(b, 4096, 4, 2, false) }
