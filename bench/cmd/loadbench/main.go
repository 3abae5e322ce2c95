// Command loadbench measures the snowchaos HTTP node beside its ceilings,
// in one run: the generator without a network against the layout's
// 4,096 IDs per ms; GET /v1/id against a bare net/http and a bare
// fasthttp server in the node's process; GET /v1/ids batches against a
// constant body and against a node waiting in a yield loop; and a
// Postgres sequence, the ticket counter users would otherwise build.
//
//	cd bench && go run ./cmd/loadbench [flags]   (make loadbench at the root)
//
// loadbench -h describes each phase and flag. Exit codes: 0 done, 1 a
// duplicate or a failed request, 2 bad flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/loadgen"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
	"github.com/snowchaos/snowchaos/verify/pgoracle"
)

// Exit codes.
const (
	exitOK      = 0 // measured, nothing failed
	exitFailure = 1 // a duplicate, a failed request, an oracle's failure
	exitInvalid = 2 // bad flags, servers that would not start
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: loadbench [flags]

Measures, in one run and beside their ceilings:
  inprocess  generator.Next() without a network, against the layout's
             ceiling (4,096 IDs per ms: 244 ns per ID for 41/10/12);
  single     GET /v1/id at the maximum rate (--workers keep-alive
             connections, each sending its next request when the answer
             arrives), against two references in the same process as the
             node: a bare net/http server and a bare fasthttp server, each
             answering a constant ID with the node's headers;
  batch      GET /v1/ids?count=N in text and JSON, against the fasthttp
             reference answering a constant body of N IDs, and against a
             node whose generator waits for the next tick in a loop of
             runtime.Gosched, the reference for the CPU that waiting
             costs;
  pg         a Postgres sequence, the central ticket counter users would
             otherwise build: nextval() one per round trip (on one and on
             several connections) and in batches.
Every ID a node returns is verified live (duplicates, order per
connection). The nodes and references run in one child process, so its
CPU time gives each row's server CPU per request; the load generator
(fasthttp's client) runs in this process. --rounds N interleaves N rounds
(the order rotating each round) and prints medians with their spread:
on a shared machine, compare only figures from one run. A node/reference
ratio is the median of the per-round ratios with its distribution-free
interval (the sign test: 95% from 6 rounds up, the whole range below)
and a verdict: level while the interval spans 1.00.

--pin-server C and --pin-client C bind the servers' process and this one
to a CPU each (sched_setaffinity on every thread, as taskset -a does;
GOMAXPROCS 1). A client busy near 100% of its CPU is the bottleneck: the
rows say so ("client busy"), and then the server's CPU per request, not
its rate, is the measure.

Nodes run in the child process unless --target names running ones
(snowchaos serve); then the rows have no server CPU. --rate R loads
GET /v1/id at an open-model rate (vegeta) instead. Postgres comes from
--pg-dsn, $` + pgoracle.EnvDSN + ` or ` + pgoracle.DefaultDSN + `; when it is unreachable the
ticket rows say so.

Exit codes: 0 done, 1 a duplicate or a failed request, 2 bad flags.

flags:
`

// Bounds of loadbench's numeric flags.
const (
	maxBenchRounds  = 50
	maxBenchWorkers = 4096
	maxBenchNodes   = 64
	// layoutCeiling is the default layout's (41/10/12) IDs per second.
	layoutCeiling = 4096 * 1000
	// clientBoundBusy is the client CPU share beyond which a row is
	// flagged as possibly client-bound.
	clientBoundBusy = 0.9
)

// benchSample is one measurement of one row.
type benchSample struct {
	ReqRate    float64       `json:"req_per_s"`
	IDRate     float64       `json:"ids_per_s"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	CPUPerReq  time.Duration `json:"server_cpu_per_request_ns"` // 0: unknown
	ServerBusy float64       `json:"server_busy"`               // CPUs' worth; 0: unknown
	ClientBusy float64       `json:"client_busy"`
	Requests   uint64        `json:"requests"`
	Failures   uint64        `json:"failures"`
	Duplicates uint64        `json:"duplicates"`
	Error      string        `json:"error,omitempty"`
	Oracle     string        `json:"oracle,omitempty"`
}

// benchRow is one line of the loadbench table: its samples, one a round.
type benchRow struct {
	Name    string        `json:"name"`
	Kind    string        `json:"kind"` // "node", "reference", "inprocess", "postgres"
	Samples []benchSample `json:"samples"`
}

// median returns the median of f over the row's samples, with the minimum
// and maximum.
func (r *benchRow) median(f func(benchSample) float64) (med, lo, hi float64) {
	var vs []float64
	for _, s := range r.Samples {
		vs = append(vs, f(s))
	}
	return medianOf(vs)
}

// medianOf returns the median, minimum and maximum of vs (zeros if empty).
func medianOf(vs []float64) (med, lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0, 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	med = vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return med, vs[0], vs[n-1]
}

// medianInterval returns the median of vs and a distribution-free
// confidence interval for it: the order statistics v(k) and v(n+1-k) of
// the sorted values, with k the largest rank whose interval is at least
// 95% sure to hold the true median (the binomial sign test), or k = 1
// (the whole range) when fewer than 6 values allow no 95% interval. conf
// is the interval's confidence: 1 − 2·P(Binomial(n, ½) < k); 0 for one
// value.
func medianInterval(vs []float64) (med, lo, hi, conf float64) {
	n := len(vs)
	if n == 0 {
		return 0, 0, 0, 0
	}
	med, _, _ = medianOf(vs)
	vs = slices.Clone(vs)
	slices.Sort(vs)
	k := 1
	for k+1 <= (n+1)/2 && 1-2*binomialBelow(n, k+1) >= 0.95 {
		k++
	}
	return med, vs[k-1], vs[n-k], 1 - 2*binomialBelow(n, k)
}

// binomialBelow is P(Binomial(n, ½) < k).
func binomialBelow(n, k int) float64 {
	term, sum := math.Pow(0.5, float64(n)), 0.0
	for j := range k {
		sum += term
		term *= float64(n-j) / float64(j+1)
	}
	return sum
}

// levelVerdict says where a ratio's interval lies against 1.00: above
// (worse), below (better) or across it (level at this resolution).
func levelVerdict(lo, hi float64, worse string) string {
	switch {
	case lo > 1:
		return worse
	case hi < 1:
		return "better"
	}
	return "level"
}

// failed reports whether any sample failed.
func (r *benchRow) failed() bool {
	for _, s := range r.Samples {
		if s.Failures > 0 || s.Duplicates > 0 || s.Error != "" || strings.Contains(s.Oracle, "fail") {
			return true
		}
	}
	return false
}

// benchFlags are loadbench's flags.
type benchFlags struct {
	duration                 time.Duration
	workers, batchWorkers    int
	batch, nodes, rounds     int
	targets, pgDSN, phases   string
	noPG, oracle, asJSON     bool
	stdTransport, serverOnly bool
	pgConns, pgBatch         int
	rate                     float64
	pinServer, pinClient     int
}

// run runs loadbench with args and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f benchFlags
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "length of each measurement (each row, each round)")
	fs.IntVar(&f.workers, "workers", 32, "keep-alive connections for single-ID requests")
	fs.IntVar(&f.batch, "batch", 4096, "IDs per batch request")
	fs.IntVar(&f.batchWorkers, "batch-workers", 4, "keep-alive connections for batch requests")
	fs.IntVar(&f.nodes, "nodes", 1, "nodes to start (worker IDs 1..n); the load is spread over them")
	fs.IntVar(&f.rounds, "rounds", 1, "interleaved rounds: each row is measured once per round, medians printed")
	fs.IntVar(&f.pinServer, "pin-server", -1, "bind the servers' process to this CPU (-1: no binding)")
	fs.IntVar(&f.pinClient, "pin-client", -1, "bind this process, the load generator, to this CPU (-1: no binding)")
	fs.StringVar(&f.targets, "target", "", "comma-separated URLs of running nodes instead of starting them")
	fs.StringVar(&f.pgDSN, "pg-dsn", "", "Postgres DSN for the ticket counter (empty: $"+pgoracle.EnvDSN+" or the default)")
	fs.BoolVar(&f.noPG, "no-pg", false, "skip the Postgres ticket counter")
	fs.IntVar(&f.pgConns, "pg-conns", 8, "connections for the concurrent nextval() row")
	fs.IntVar(&f.pgBatch, "pg-batch", 1000, "nextval() values per round trip for the batched row")
	fs.BoolVar(&f.stdTransport, "std-transport", false, "with --rate: load with net/http's Transport instead of loadgen.Transport (fasthttp)")
	fs.BoolVar(&f.oracle, "oracle", false, "also write every node's ID to Postgres (verify/pgoracle) and report its verdict")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.Float64Var(&f.rate, "rate", 0, "open-model rate (requests/s) for the single-ID phase instead of the maximum (no references)")
	fs.StringVar(&f.phases, "phases", "inprocess,single,batch,pg", "phases to run, comma-separated: inprocess, single, batch, pg")
	fs.BoolVar(&f.serverOnly, "server-process", false, "internal: run only the servers (for loadbench itself), print their addresses as JSON, serve until stdin closes")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitInvalid
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadbench: unexpected arguments %q\n", fs.Args())
		return exitInvalid
	}
	if f.rate < 0 || f.duration <= 0 || f.duration > time.Hour || f.nodes < 0 || (f.nodes == 0 && !f.serverOnly) || f.nodes > maxBenchNodes ||
		f.batch < 2 || f.batch > server.MaxBatchLimit || f.workers < 1 || f.workers > maxBenchWorkers ||
		f.batchWorkers < 1 || f.batchWorkers > maxBenchWorkers || f.rounds < 1 || f.rounds > maxBenchRounds ||
		f.pinServer < -1 || f.pinClient < -1 || f.pgConns < 1 || f.pgConns > 1024 || f.pgBatch < 1 || f.pgBatch > 1<<20 {
		fmt.Fprintf(stderr, "loadbench: bad flags (want --duration in (0, 1h], --workers and --batch-workers in [1, %d], "+
			"--nodes in [1, %d], --rounds in [1, %d], --batch in [2, %d], --pg-conns in [1, 1024], --pg-batch in [1, %d], --pin-* -1 or a CPU)\n",
			maxBenchWorkers, maxBenchNodes, maxBenchRounds, server.MaxBatchLimit, 1<<20)
		return exitInvalid
	}
	if f.serverOnly {
		if err := runBenchServers(ctx, f.nodes, f.batch, f.pinServer, os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "loadbench: servers: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	want := map[string]bool{}
	for _, p := range strings.Split(f.phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "inprocess", "single", "batch", "pg":
			want[p] = true
		default:
			fmt.Fprintf(stderr, "loadbench: unknown phase %q (want inprocess, single, batch, pg)\n", p)
			return exitInvalid
		}
	}
	if f.noPG {
		want["pg"] = false
	}
	b := &bench{f: &f, ctx: ctx, stderr: stderr, loadStart: loadAverage()}
	code := b.run(want)
	if code == exitInvalid {
		return code
	}
	b.loadEnd = loadAverage()
	b.print(stdout)
	return code
}

// bench is one loadbench run.
type bench struct {
	f                  *benchFlags
	ctx                context.Context
	stderr             io.Writer
	srv                *serverProcess
	nodes              []string
	rows               []*benchRow
	ratios             []string
	loadStart, loadEnd string
}

// row returns the row named name, adding it.
func (b *bench) row(name, kind string) *benchRow {
	for _, r := range b.rows {
		if r.Name == name {
			return r
		}
	}
	r := &benchRow{Name: name, Kind: kind}
	b.rows = append(b.rows, r)
	return r
}

// measurement is one row's measurement in a round.
type measurement struct {
	row  *benchRow
	node bool // a node's answers (verified); else a reference's
	path string
	json bool
	want int
	refs string // the reference's base URL (when !node)
	conn int
}

// run runs the phases and reports the exit code.
func (b *bench) run(want map[string]bool) int {
	f := b.f
	if want["inprocess"] {
		b.rows = append(b.rows, inProcessRow(f.duration))
	}
	needServers := want["single"] || want["batch"]
	if needServers {
		p, err := startBenchServers(map[bool]int{true: 0, false: f.nodes}[f.targets != ""], f.batch, f.pinServer, b.stderr)
		if err != nil {
			fmt.Fprintf(b.stderr, "loadbench: %v\n", err)
			return exitInvalid
		}
		defer p.stop()
		b.srv = p
		b.nodes = p.Nodes
		if f.targets != "" {
			b.nodes = nil
			for _, u := range strings.Split(f.targets, ",") {
				if u = strings.TrimSpace(u); u != "" {
					b.nodes = append(b.nodes, u)
				}
			}
		}
	}
	// Pinned after the servers started: the child would inherit the binding.
	if f.pinClient >= 0 {
		if err := pinProcess(f.pinClient); err != nil {
			fmt.Fprintf(b.stderr, "loadbench: --pin-client: %v\n", err)
			return exitInvalid
		}
	}
	var set []measurement
	if want["single"] && f.rate > 0 {
		b.rows = append(b.rows, b.openModelRow())
	} else if want["single"] {
		set = append(set,
			measurement{row: b.row(fmt.Sprintf("node GET /v1/id (%d conns)", f.workers), "node"), node: true, path: "/v1/id", want: 1, conn: f.workers},
			measurement{row: b.row("reference: bare net/http, constant ID", "reference"), refs: b.srv.NetHTTP, path: "/v1/id", want: 1, conn: f.workers},
			measurement{row: b.row("reference: bare fasthttp, constant ID", "reference"), refs: b.srv.FastHTTP, path: "/v1/id", want: 1, conn: f.workers})
	}
	if want["batch"] {
		q := "/v1/ids?count=" + strconv.Itoa(f.batch)
		for _, asJSON := range []bool{false, true} {
			format := map[bool]string{false: "text", true: "JSON"}[asJSON]
			set = append(set,
				measurement{row: b.row(fmt.Sprintf("node GET %s, %s (%d conns)", q, format, f.batchWorkers), "node"), node: true, path: q, json: asJSON, want: f.batch, conn: f.batchWorkers},
				measurement{row: b.row(fmt.Sprintf("reference: bare fasthttp, constant %d IDs, %s", f.batch, format), "reference"), refs: b.srv.FastHTTP, path: q, json: asJSON, want: f.batch, conn: f.batchWorkers},
				measurement{row: b.row(fmt.Sprintf("%s, %s", yieldRow, format), "reference"), refs: b.srv.YieldNode, path: q, json: asJSON, want: f.batch, conn: f.batchWorkers})
		}
	}
	for round := range f.rounds {
		for i := range set {
			m := set[(i+round)%len(set)]
			m.row.Samples = append(m.row.Samples, b.measure(m))
			if b.ctx.Err() != nil {
				return exitFailure
			}
		}
	}
	if want["pg"] {
		b.pgRows()
	}
	b.ratios = b.computeRatios()
	for _, r := range b.rows {
		if r.failed() {
			return exitFailure
		}
	}
	return exitOK
}

// yieldRow names the batch phase's reference node: the node whose
// generator waits for the next tick in a loop of runtime.Gosched
// (internal/yieldclock).
const yieldRow = "reference: node waiting in a yield loop"

// measure runs one closed-loop measurement.
func (b *bench) measure(m measurement) benchSample {
	var targets []loadTarget
	var v *verify.Concurrent
	var oracle *pgoracle.Oracle
	if m.node {
		v = verify.NewConcurrent(verify.Config{})
		ids, err := loadgen.RegisterIssuers(b.ctx, v, b.nodes, &http.Client{Timeout: 10 * time.Second})
		if err != nil {
			return benchSample{Error: err.Error()}
		}
		if b.f.oracle {
			if oracle, err = pgoracle.New(b.ctx, pgoracle.Config{DSN: b.f.pgDSN}); err != nil {
				return benchSample{Error: err.Error()}
			}
			defer oracle.Close()
		}
		for i, u := range b.nodes {
			var sink func([]generator.ID)
			if oracle != nil {
				sink = func(ids []generator.ID) { oracle.Add(int16(i), ids) }
			}
			targets = append(targets, loadTarget{base: u, path: m.path, asJSON: m.json, want: m.want, verify: nodeVerifier(v, ids[i], sink)})
		}
	} else {
		targets = append(targets, loadTarget{base: m.refs, path: m.path, asJSON: m.json, want: m.want})
	}
	serverCPU0, serr := b.srv.cpu()
	clientCPU0 := processCPU()
	out := runClosedLoop(b.ctx, targets, m.conn, b.f.duration)
	clientCPU := processCPU() - clientCPU0
	serverCPU1, serr2 := b.srv.cpu()
	secs := out.Elapsed.Seconds()
	s := benchSample{ReqRate: float64(out.Requests) / secs, IDRate: float64(out.IDs) / secs, P50: out.P50, P99: out.P99,
		ClientBusy: clientCPU.Seconds() / secs, Requests: out.Requests, Failures: out.Failures}
	if serr == nil && serr2 == nil && (!m.node || b.f.targets == "") && out.Requests > 0 {
		s.CPUPerReq = (serverCPU1 - serverCPU0) / time.Duration(out.Requests)
		s.ServerBusy = (serverCPU1 - serverCPU0).Seconds() / secs
	}
	if out.Failures > 0 {
		s.Error = out.FirstError
	}
	if v != nil {
		s.Duplicates = v.Result().Duplicates
	}
	if oracle != nil {
		or, _ := oracle.Finish(b.ctx)
		s.Oracle = fmt.Sprintf("postgres oracle: %s, %d rows, %d duplicates", or.Verdict, or.Rows, or.Duplicates)
		if or.Verdict != pgoracle.VerdictPass {
			s.Oracle += " (fail: " + or.Reason + ")"
		}
	}
	return s
}

// openModelRow loads GET /v1/id at --rate with vegeta (loadgen).
func (b *bench) openModelRow() *benchRow {
	f := b.f
	row := &benchRow{Name: fmt.Sprintf("node GET /v1/id (open model, %.0f/s)", f.rate), Kind: "node"}
	v := verify.NewConcurrent(verify.Config{})
	rep, err := loadgen.Run(b.ctx, loadgen.Config{
		Nodes: b.nodes, Workers: uint64(f.workers), Duration: f.duration, Verifier: v, StdTransport: f.stdTransport,
		Timeout: 10 * time.Second, Stages: []loadgen.Stage{loadgen.Constant(f.rate, f.duration)},
	})
	if err != nil {
		row.Samples = []benchSample{{Error: err.Error()}}
		return row
	}
	s := benchSample{ReqRate: rep.Rate, IDRate: rep.IDRate, P50: rep.Latency.P50, P99: rep.Latency.P99,
		Requests: rep.Requests, Failures: rep.Failures.Total() + rep.Dropped, Duplicates: v.Result().Duplicates}
	if s.Failures > 0 {
		s.Error = strings.Join(rep.Errors, "; ")
	}
	row.Samples = []benchSample{s}
	return row
}

// pgRows measures the Postgres ticket counter.
func (b *bench) pgRows() {
	for _, tc := range []pgoracle.TicketConfig{{Batch: 1, Conns: 1}, {Batch: 1, Conns: b.f.pgConns}, {Batch: b.f.pgBatch, Conns: 1}} {
		tc.DSN, tc.Duration = b.f.pgDSN, b.f.duration
		row := &benchRow{Name: fmt.Sprintf("Postgres nextval() x%d per trip (%d conns)", tc.Batch, tc.Conns), Kind: "postgres"}
		r, err := pgoracle.Tickets(b.ctx, tc)
		if err != nil {
			// Postgres being away is reported, not a failure of the run.
			row.Samples = []benchSample{{Oracle: "unavailable: " + err.Error()}}
		} else {
			row.Samples = []benchSample{{ReqRate: r.CallRate, IDRate: r.IDRate, P50: r.P50, P99: r.P99, Requests: r.Calls}}
		}
		b.rows = append(b.rows, row)
	}
}

// computeRatios compares each measured row with its ceiling.
func (b *bench) computeRatios() []string {
	var out []string
	find := func(prefix string) *benchRow {
		for _, r := range b.rows {
			if strings.HasPrefix(r.Name, prefix) && len(r.Samples) > 0 && r.Samples[0].Requests > 0 {
				return r
			}
		}
		return nil
	}
	// perRound pairs the samples of two rows round by round: the median
	// ratio and its interval.
	perRound := func(a, c *benchRow, f func(x, y benchSample) float64) (med, lo, hi, conf float64) {
		var vs []float64
		for i := range min(len(a.Samples), len(c.Samples)) {
			vs = append(vs, f(a.Samples[i], c.Samples[i]))
		}
		return medianInterval(vs)
	}
	rate := func(x, y benchSample) float64 { return x.ReqRate / y.ReqRate }
	cpu := func(x, y benchSample) float64 { return float64(x.CPUPerReq) / float64(y.CPUPerReq) }
	p99 := func(x, y benchSample) float64 { return float64(x.P99) / float64(y.P99) }
	if r := find("in-process"); r != nil {
		m, _, _ := r.median(func(s benchSample) float64 { return s.IDRate })
		out = append(out, fmt.Sprintf("in-process Next: %.0f IDs/s = %.3fx the layout's ceiling of %d IDs/s (244 ns per ID)", m, m/layoutCeiling, layoutCeiling))
	}
	node := find("node GET /v1/id (")
	for _, ref := range []string{"reference: bare fasthttp", "reference: bare net/http"} {
		r := find(ref + ", constant ID")
		if node == nil || r == nil {
			continue
		}
		m, lo, hi, conf := perRound(node, r, rate)
		line := fmt.Sprintf("single-ID node / %s: %.2fx req/s (%.2f-%.2f)", strings.TrimPrefix(ref, "reference: bare "), m, lo, hi)
		if node.Samples[0].CPUPerReq > 0 {
			c, clo, chi, _ := perRound(node, r, cpu)
			line += fmt.Sprintf(", %.2fx server CPU per request (%.2f-%.2f: %s)", c, clo, chi, levelVerdict(clo, chi, "more"))
		}
		q, qlo, qhi, _ := perRound(node, r, p99)
		line += fmt.Sprintf(", %.2fx p99 (%.2f-%.2f: %s)", q, qlo, qhi, levelVerdict(qlo, qhi, "worse"))
		line += fmt.Sprintf(" [median of %d per-round ratios (interval: %.0f%% confidence)]", len(node.Samples), 100*conf)
		out = append(out, line)
	}
	if node != nil && node.Samples[0].CPUPerReq > 0 {
		c, _, _ := node.median(func(s benchSample) float64 { return float64(s.CPUPerReq) })
		out = append(out, fmt.Sprintf("single-ID node: %.1f µs of server CPU per request = %.0f req/s per fully busy core", c/1e3, 1e9/c))
	}
	for _, format := range []string{"text", "JSON"} {
		n := find("node GET /v1/ids")
		for _, r := range b.rows {
			if strings.HasPrefix(r.Name, "node GET /v1/ids") && strings.Contains(r.Name, ", "+format+" ") {
				n = r
			}
		}
		ref := find(fmt.Sprintf("reference: bare fasthttp, constant %d IDs, %s", b.f.batch, format))
		if n == nil || ref == nil || !strings.Contains(n.Name, format) {
			continue
		}
		ids, _, _ := n.median(func(s benchSample) float64 { return s.IDRate })
		line := fmt.Sprintf("batch %s: %.0f IDs/s = %.3fx the layout's ceiling", format, ids, ids/layoutCeiling)
		if n.Samples[0].CPUPerReq > 0 {
			c, lo, hi := n.median(func(s benchSample) float64 { return float64(s.CPUPerReq) })
			rc, _, _ := ref.median(func(s benchSample) float64 { return float64(s.CPUPerReq) })
			line += fmt.Sprintf("; %.0f µs of server CPU per %d-ID request (%.0f-%.0f), the constant body's %.0f µs (%.2fx)",
				c/1e3, b.f.batch, lo/1e3, hi/1e3, rc/1e3, c/rc)
			if y := find(yieldRow + ", " + format); y != nil && y.Samples[0].CPUPerReq > 0 {
				yc, _, _ := y.median(func(s benchSample) float64 { return float64(s.CPUPerReq) })
				m, mlo, mhi, _ := perRound(n, y, cpu)
				line += fmt.Sprintf(", the yield-loop node's %.0f µs (%.2fx, %.2f-%.2f)", yc/1e3, m, mlo, mhi)
			}
		}
		out = append(out, line)
	}
	single := find("node GET /v1/id")
	batch := find("node GET /v1/ids")
	for _, t := range b.rows {
		if t.Kind != "postgres" || len(t.Samples) == 0 || t.Samples[0].IDRate == 0 {
			continue
		}
		var parts []string
		if single != nil {
			m, _, _ := single.median(func(s benchSample) float64 { return s.IDRate })
			parts = append(parts, fmt.Sprintf("HTTP single-ID IDs/s / it = %.2fx", m/t.Samples[0].IDRate))
		}
		if batch != nil {
			m, _, _ := batch.median(func(s benchSample) float64 { return s.IDRate })
			parts = append(parts, fmt.Sprintf("HTTP batch IDs/s / it = %.1fx", m/t.Samples[0].IDRate))
		}
		if len(parts) > 0 {
			out = append(out, "ratio vs "+t.Name+": "+strings.Join(parts, "; "))
		}
	}
	return out
}

// print writes the table (or JSON).
func (b *bench) print(w io.Writer) {
	f := b.f
	setup := fmt.Sprintf("%d round(s) of %v per row; load average %s at the start, %s at the end", f.rounds, f.duration, b.loadStart, b.loadEnd)
	if b.srv != nil {
		setup += fmt.Sprintf("; servers in one process, GOMAXPROCS %d, %s", b.srv.GOMAXPROCS, pinned(b.srv.Pinned))
	}
	setup += fmt.Sprintf("; client GOMAXPROCS %d, %s", runtimeProcs(), pinned(f.pinClient))
	if f.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"setup": setup, "nodes": b.nodes, "rows": b.rows, "ratios": b.ratios})
		return
	}
	fmt.Fprintln(w, setup)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\trequests/s\t(min-max)\tIDs/s\tp50\tp99\tserver CPU/req\tserver busy\tclient busy\tfailed\tduplicates\t")
	var notes []string
	for _, r := range b.rows {
		if len(r.Samples) == 0 || r.Samples[0].Requests == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.Name)
		} else {
			rate, lo, hi := r.median(func(s benchSample) float64 { return s.ReqRate })
			ids, _, _ := r.median(func(s benchSample) float64 { return s.IDRate })
			p50, _, _ := r.median(func(s benchSample) float64 { return float64(s.P50) })
			p99, _, _ := r.median(func(s benchSample) float64 { return float64(s.P99) })
			cpu, _, _ := r.median(func(s benchSample) float64 { return float64(s.CPUPerReq) })
			sb, _, _ := r.median(func(s benchSample) float64 { return s.ServerBusy })
			cb, _, _ := r.median(func(s benchSample) float64 { return s.ClientBusy })
			var failed, dups uint64
			for _, s := range r.Samples {
				failed += s.Failures
				dups += s.Duplicates
			}
			cpuS, sbS, cbS := "-", "-", "-"
			if cpu > 0 {
				cpuS, sbS = fmtLat(time.Duration(cpu)), fmt.Sprintf("%.0f%%", sb*100)
			}
			if cb > 0 {
				cbS = fmt.Sprintf("%.0f%%", cb*100)
				if f.pinClient >= 0 && cb >= clientBoundBusy {
					cbS += " (bound?)"
				}
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f-%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", r.Name, rate, lo, hi, ids,
				fmtLat(time.Duration(p50)), fmtLat(time.Duration(p99)), cpuS, sbS, cbS, failed, dups)
		}
		for _, s := range r.Samples {
			if s.Error != "" {
				notes = append(notes, fmt.Sprintf("note: %s: %s", r.Name, s.Error))
			}
			if s.Oracle != "" {
				notes = append(notes, fmt.Sprintf("%s: %s", r.Name, s.Oracle))
			}
		}
	}
	tw.Flush()
	for _, n := range slices.Compact(notes) {
		fmt.Fprintln(w, n)
	}
	for _, r := range b.ratios {
		fmt.Fprintln(w, r)
	}
}

// pinned describes a CPU binding.
func pinned(cpu int) string {
	if cpu < 0 {
		return "not pinned"
	}
	return "pinned to CPU " + strconv.Itoa(cpu)
}

// loadAverage returns the 1, 5 and 15 minute load averages ("?" when
// unknown).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return "?"
	}
	return strings.Join(fields[:3], " ")
}

// fmtLat formats a latency with microsecond precision.
func fmtLat(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(100 * time.Nanosecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// inProcessRow measures the generator without a network, one goroutine
// calling Next for d (at most 1 s): the ceiling an embedded generator
// offers.
func inProcessRow(d time.Duration) *benchRow {
	row := &benchRow{Name: "in-process generator.Next() (no network)", Kind: "inprocess"}
	g, err := generator.New(generator.Settings{})
	if err != nil {
		row.Samples = []benchSample{{Error: err.Error()}}
		return row
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
				row.Samples = []benchSample{{Error: err.Error()}}
				return row
			}
		}
		n += 1024
	}
	rate := float64(n) / (float64(now-start) / 1e9)
	row.Samples = []benchSample{{Requests: n, ReqRate: rate, IDRate: rate}}
	return row
}
