package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/loadgen"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
	"github.com/snowchaos/snowchaos/verify/pgoracle"
)

func init() {
	register(command{name: "loadbench", summary: "benchmark the HTTP node against a Postgres ticket counter (loadbench -h)", run: runLoadbench})
}

const loadbenchUsage = `usage: snowchaos loadbench [flags]

Measures, in one run: single-ID requests (GET /v1/id, keep-alive, maximum
rate) and batch requests (GET /v1/ids?count=N) against HTTP nodes, every ID
verified live; and the central ticket counter users would otherwise build,
a Postgres sequence: nextval() one per round trip (on one and on several
connections) and in batches. Prints throughput, latency and the ratios.

Nodes run in this process on loopback ports unless --target names running
ones (snowchaos serve). Postgres comes from --pg-dsn, $` + pgoracle.EnvDSN + ` or
` + pgoracle.DefaultDSN + `; when it is unreachable the ticket rows say so.

Exit codes: 0 done, 1 a duplicate, a dropped ID or a failed request, 2 bad
flags.

flags:
`

// benchRow is one line of the loadbench table.
type benchRow struct {
	Name     string  `json:"name"`
	Requests uint64  `json:"requests"`
	IDs      uint64  `json:"ids"`
	ReqRate  float64 `json:"req_per_s"`
	IDRate   float64 `json:"ids_per_s"`
	P50      string  `json:"p50"`
	P99      string  `json:"p99"`
	Failures uint64  `json:"failures"`
	Dropped  uint64  `json:"dropped"`
	Dups     uint64  `json:"duplicates"`
	Oracle   string  `json:"oracle,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func runLoadbench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "length of each phase")
	workers := fs.Uint64("workers", 32, "concurrent requesters for single-ID requests")
	batch := fs.Int("batch", 4096, "IDs per batch request")
	batchWorkers := fs.Uint64("batch-workers", 4, "concurrent requesters for batch requests")
	nodes := fs.Int("nodes", 1, "in-process nodes to start (worker IDs 1..n)")
	targets := fs.String("target", "", "comma-separated URLs of running nodes instead of in-process ones")
	pgDSN := fs.String("pg-dsn", "", "Postgres DSN for the ticket counter (empty: $"+pgoracle.EnvDSN+" or the default)")
	noPG := fs.Bool("no-pg", false, "skip the Postgres ticket counter")
	pgConns := fs.Int("pg-conns", 8, "connections for the concurrent nextval() row")
	pgBatch := fs.Int("pg-batch", 1000, "nextval() values per round trip for the batched row")
	stdTransport := fs.Bool("std-transport", false, "load with net/http's Transport instead of loadgen.DirectTransport")
	oracle := fs.Bool("oracle", false, "also write every ID to Postgres (verify/pgoracle) and report its verdict")
	asJSON := fs.Bool("json", false, "print JSON")
	rate := fs.Float64("rate", 0, "open-model rate (requests/s) for the single-ID phase instead of the maximum")
	phases := fs.String("phases", "inprocess,single,batch,pg", "phases to run, comma-separated: inprocess, single, batch, pg")
	if code, ok := parseFlags(fs, args, stderr, loadbenchUsage); !ok {
		return code
	}
	if *rate < 0 || *duration <= 0 || *nodes < 1 || *nodes > 64 || *batch < 2 || *batch > server.MaxBatchLimit || *workers < 1 || *batchWorkers < 1 {
		fmt.Fprintln(stderr, "snowchaos loadbench: bad flags (want positive --duration, --workers, --batch-workers; --nodes in [1,64]; --batch in [2, 1<<20])")
		return exitInvalid
	}

	want := map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "inprocess", "single", "batch", "pg":
			want[p] = true
		default:
			fmt.Fprintf(stderr, "snowchaos loadbench: unknown phase %q (want inprocess, single, batch, pg)\n", p)
			return exitInvalid
		}
	}
	if *noPG {
		want["pg"] = false
	}
	urls, stop, err := benchNodes(ctx, *targets, *nodes, *batch)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos loadbench: %v\n", err)
		return exitInvalid
	}
	defer stop()

	var rows []benchRow
	bad := false
	phase := func(name string, b int, w uint64, r float64) benchRow {
		v := verify.NewConcurrent(verify.Config{})
		cfg := loadgen.Config{
			Nodes: urls, Batch: b, Workers: w, Duration: *duration, Verifier: v, StdTransport: *stdTransport,
			Timeout: 10 * time.Second,
		}
		if r > 0 {
			cfg.Stages = []loadgen.Stage{loadgen.Constant(r, *duration)}
		}
		var o *pgoracle.Oracle
		if *oracle {
			var err error
			if o, err = pgoracle.New(ctx, pgoracle.Config{DSN: *pgDSN}); err != nil {
				bad = true
				return benchRow{Name: name, Error: err.Error()}
			}
			defer o.Close()
			cfg.Sink = func(r *loadgen.Response) { o.Add(int16(r.Node), r.IDs) }
		}
		rep, err := loadgen.Run(ctx, cfg)
		if err != nil {
			bad = true
			return benchRow{Name: name, Error: err.Error()}
		}
		res := v.Result()
		row := benchRow{Name: name, Requests: rep.Requests, IDs: rep.IDs, ReqRate: rep.Rate, IDRate: rep.IDRate,
			P50: fmtLat(rep.Latency.P50), P99: fmtLat(rep.Latency.P99), Failures: rep.Failures.Total(), Dropped: rep.Dropped, Dups: res.Duplicates}
		if row.Failures > 0 || row.Dropped > 0 || row.Dups > 0 || res.IDs != rep.IDs {
			bad = true
			row.Error = strings.Join(rep.Errors, "; ")
		}
		if o != nil {
			or, _ := o.Finish(ctx)
			row.Oracle = fmt.Sprintf("postgres oracle: %s, %d rows, %d duplicates, Add blocked %v in %d calls%s",
				or.Verdict, or.Rows, or.Duplicates, or.Blocked.Round(time.Millisecond), or.BlockedAdds, map[bool]string{true: ": " + or.Reason, false: ""}[or.Reason != ""])
			if or.Verdict != pgoracle.VerdictPass {
				bad = true
			}
		}
		return row
	}
	var single, batched *benchRow
	if want["inprocess"] {
		rows = append(rows, inProcessRow(*duration))
	}
	if want["single"] {
		name := fmt.Sprintf("HTTP GET /v1/id (%d workers)", *workers)
		if *rate > 0 {
			name = fmt.Sprintf("HTTP GET /v1/id (open model, %.0f/s)", *rate)
		}
		rows = append(rows, phase(name, 0, *workers, *rate))
		single = &rows[len(rows)-1]
	}
	if want["batch"] {
		rows = append(rows, phase(fmt.Sprintf("HTTP GET /v1/ids?count=%d (%d workers)", *batch, *batchWorkers), *batch, *batchWorkers, 0))
		batched = &rows[len(rows)-1]
	}
	firstTicket := len(rows)
	if want["pg"] {
		for _, tc := range []pgoracle.TicketConfig{
			{Batch: 1, Conns: 1}, {Batch: 1, Conns: *pgConns}, {Batch: *pgBatch, Conns: 1},
		} {
			tc.DSN, tc.Duration = *pgDSN, *duration
			name := fmt.Sprintf("Postgres nextval() x%d per trip (%d conns)", tc.Batch, tc.Conns)
			r, err := pgoracle.Tickets(ctx, tc)
			row := benchRow{Name: name}
			if err != nil {
				row.Error = err.Error()
			} else {
				row.Requests, row.IDs, row.ReqRate, row.IDRate = r.Calls, r.IDs, r.CallRate, r.IDRate
				row.P50, row.P99 = fmtLat(r.P50), fmtLat(r.P99)
			}
			rows = append(rows, row)
		}
	}
	var s1, b1 benchRow
	if single != nil {
		s1 = *single
	}
	if batched != nil {
		b1 = *batched
	}
	ratios := benchRatios(s1, b1, rows[firstTicket:])
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"nodes": urls, "duration": duration.String(), "rows": rows, "ratios": ratios})
	} else {
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\trequests/s\tIDs/s\tp50\tp99\tfailed\tdropped\tduplicates\t")
		for _, r := range rows {
			if r.Error != "" && r.Requests == 0 {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t\n", r.Name)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%d\t%d\t%d\t\n", r.Name, r.ReqRate, r.IDRate, r.P50, r.P99, r.Failures, r.Dropped, r.Dups)
		}
		tw.Flush()
		for _, r := range rows {
			if r.Oracle != "" {
				fmt.Fprintf(stdout, "%s: %s\n", r.Name, r.Oracle)
			}
			if r.Error != "" {
				fmt.Fprintf(stdout, "note: %s: %s\n", r.Name, r.Error)
			}
		}
		for _, r := range ratios {
			fmt.Fprintln(stdout, r)
		}
	}
	if bad {
		return exitFailure
	}
	return exitOK
}

// fmtLat formats a latency with microsecond precision.
func fmtLat(d time.Duration) string {
	return d.Round(time.Microsecond).String()
}

// benchRatios compares the HTTP rows with the ticket rows.
func benchRatios(single, batch benchRow, tickets []benchRow) []string {
	var out []string
	ok := func(r benchRow) bool { return r.Error == "" && r.IDRate > 0 }
	for _, t := range tickets {
		if !ok(t) {
			continue
		}
		var parts []string
		if ok(single) {
			parts = append(parts, fmt.Sprintf("HTTP single-ID IDs/s / it = %.2fx", single.IDRate/t.IDRate))
		}
		if ok(batch) {
			parts = append(parts, fmt.Sprintf("HTTP batch IDs/s / it = %.1fx", batch.IDRate/t.IDRate))
		}
		if len(parts) > 0 {
			out = append(out, "ratio vs "+t.Name+": "+strings.Join(parts, "; "))
		}
	}
	return out
}

// inProcessRow measures the generator without a network, one goroutine
// calling Next for d: the ceiling an embedded generator offers.
func inProcessRow(d time.Duration) benchRow {
	g, err := generator.New(generator.Settings{})
	if err != nil {
		return benchRow{Name: "in-process generator.Next()", Error: err.Error()}
	}
	defer g.Close()
	clk := generator.SystemClock()
	_, start := clk.Now()
	end := start + int64(min(d, time.Second))
	var n uint64
	var now int64
	for now = start; now < end; _, now = clk.Now() {
		for range 1024 {
			if _, err := g.Next(); err != nil {
				return benchRow{Name: "in-process generator.Next()", Error: err.Error()}
			}
		}
		n += 1024
	}
	rate := float64(n) / (float64(now-start) / 1e9)
	return benchRow{Name: "in-process generator.Next() (no network)", Requests: n, IDs: n, ReqRate: rate, IDRate: rate, P50: "-", P99: "-"}
}

// benchNodes returns the node URLs: the given targets, or n in-process
// nodes on loopback ports. stop shuts the in-process ones down.
func benchNodes(ctx context.Context, targets string, n, maxBatch int) ([]string, func(), error) {
	if targets != "" {
		var urls []string
		for _, u := range strings.Split(targets, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
		return urls, func() {}, nil
	}
	var urls []string
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	for i := range n {
		gen, err := generator.New(generator.Settings{Node: int64(i + 1)})
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv, err := server.New(server.Config{Generator: gen, MaxBatch: max(maxBatch, server.DefaultMaxBatch), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			gen.Close()
			stop()
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			gen.Close()
			stop()
			return nil, nil, err
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.Serve(sctx, ln, nil)
		}()
		stops = append(stops, func() { cancel(); <-done; gen.Close() })
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, stop, nil
}
