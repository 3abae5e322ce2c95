package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
	"github.com/snowchaos/snowchaos/verify/sink"
)

func init() {
	register(command{name: "verify", summary: "verify IDs any load tool received (verify -h)", run: runVerify})
}

const verifyUsage = `usage: snowchaos verify [flags]

A verification sink: checks the IDs a load tool received (autocannon, wrk,
vegeta, k6, curl in a loop) for duplicates, order per stream, restart order
and, where the ID embeds a time, lead and lag against the time of receipt.

With --listen it serves HTTP: POST /v1/ids with the IDs as lines (each a
bare ID, a JSON string, a JSON array, or {"id":..} / {"ids":[..]}: the
response bodies of snowchaos serve forward as they are), optionally
?stream=LABEL (batches of one sequential stream, sent in order) and
&issuer=NAME[&incarnation=N]; GET /v1/totals; POST /v1/stop; /metrics.
It prints "listening on ADDR" (on stderr with --json) and runs until
SIGINT, SIGTERM, POST /v1/stop or --duration. Bodies are verified as they
stream in; --max-requests bounds those read at once (others wait, then get
503) and --max-conns the connections, so its memory stays bounded.
Without --listen it reads the same lines on standard input until it ends
(or a signal stops it: exit 2 unless something was found). Either way it
then prints its report.

Every bad line is counted and named (batch, line, value); the valid lines
beside it are still verified. Metrics (snowchaos_verify_*) are on /metrics
of --listen, and of --metrics-listen when set.

With --json, standard output holds the JSON report and nothing else.

Exit codes: 0 every ID unique and in order, no bad line and at least
--expect-ids IDs; 1 a duplicate, order or restart violation; 2 a bad line,
a body or input cut off part way, fewer IDs than --expect-ids, or bad
flags.

flags:
`

type verifyFlags struct {
	kind          string
	layout        layoutFlags
	listen        string
	metricsListen string
	expect        uint64
	duration      time.Duration
	progress      time.Duration
	stream        string
	issuer        string
	http          sink.HTTPConfig
	maxLine       int
	maxDetails    int
	jsonOut       bool
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runVerifyIn(ctx, args, os.Stdin, stdout, stderr)
}

// runVerifyIn is verify with its standard input given.
func runVerifyIn(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f verifyFlags
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, verifyUsage); fs.PrintDefaults() }
	fs.StringVar(&f.kind, "kind", "snowflake", "kind of ID: snowflake, uuidv7, ulid, uuidv4, uuid, string")
	f.layout.register(fs)
	fs.StringVar(&f.listen, "listen", "", "serve the HTTP protocol on this address (host:port; port 0 picks one); empty: read standard input")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "also serve /metrics on this address")
	fs.Uint64Var(&f.expect, "expect-ids", 1, "at least this many valid IDs must arrive for exit 0, so that nothing received is not green (0: any number)")
	fs.DurationVar(&f.duration, "duration", 0, "with --listen, stop after this long (0: until a signal or POST /v1/stop)")
	fs.DurationVar(&f.progress, "progress", 0, "print the running totals to stderr this often (0: never)")
	fs.StringVar(&f.stream, "stream", "", "standard input is one sequential stream with this label (its IDs must increase)")
	fs.StringVar(&f.issuer, "issuer", "", "the issuer of standard input's IDs (default: a Snowflake's node field, else \"sink\")")
	fs.Int64Var(&f.http.MaxBody, "max-body", sink.DefaultMaxBody, "largest request body, bytes (1 KiB..1 GiB); bodies are verified as they stream in")
	fs.IntVar(&f.http.MaxRequests, "max-requests", sink.DefaultMaxRequests, fmt.Sprintf("request bodies read and verified at once (1..%d); another waits for a slot up to --request-timeout, then gets 503", sink.MaxRequestsLimit))
	fs.IntVar(&f.http.MaxConns, "max-conns", 0, fmt.Sprintf("connections kept open at most; at the limit the longest-idle one is closed, and when none is idle a new one gets 503 (0: %d, or the open-file limit less 64 when lower)", sink.DefaultMaxConns))
	fs.DurationVar(&f.http.ReadHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "time to read a request's headers (at most 10m), as snowchaos serve")
	fs.DurationVar(&f.http.RequestTimeout, "request-timeout", sink.DefaultRequestTimeout, "time to read and verify one body, and, apart, the longest wait for a slot (at most 10m)")
	fs.DurationVar(&f.http.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "how long an idle keep-alive connection stays open (at most 1h), as snowchaos serve")
	fs.IntVar(&f.maxLine, "max-line", 4<<20, "longest line, bytes (64..1 GiB)")
	fs.IntVar(&f.maxDetails, "max-details", 20, "findings listed in the report (0..10000)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitInvalid
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "snowchaos verify: unexpected argument %q\n", fs.Arg(0))
		return exitInvalid
	}
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos verify: %v\n", err)
		return exitInvalid
	}
	s, err := sink.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos verify: %v\n", err)
		return exitInvalid
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// With --json, standard output is the report's alone.
	notes := stdout
	if f.jsonOut {
		notes = stderr
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var servers []*sink.Server
	if f.metricsListen != "" {
		srv, err := serveOn(f.metricsListen, metricsMux(reg), f.http, nil)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos verify: --metrics-listen: %v\n", err)
			return exitInvalid
		}
		servers = append(servers, srv)
		fmt.Fprintf(notes, "metrics listening on %s\n", srv.Addr())
	}
	if f.progress > 0 {
		go printProgress(ctx, s, f.progress, stderr)
	}
	runErr := error(nil)
	if f.listen != "" {
		mux := metricsMux(reg)
		h, err := s.Handler(f.http, cancel)
		if err != nil { // config checked the bounds
			fmt.Fprintf(stderr, "snowchaos verify: %v\n", err)
			shutdown(servers)
			return exitInvalid
		}
		mux.Handle("/", h)
		srv, err := serveOn(f.listen, mux, f.http, s.Refuse)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos verify: --listen: %v\n", err)
			shutdown(servers)
			return exitInvalid
		}
		servers = append(servers, srv)
		fmt.Fprintf(notes, "listening on %s\n", srv.Addr())
		if f.duration > 0 {
			t := time.AfterFunc(f.duration, cancel)
			defer t.Stop()
		}
		<-ctx.Done()
	} else {
		// A signal ends the run even while standard input is still open:
		// the report then covers what arrived, and says so.
		done := make(chan error, 1)
		go func() {
			_, err := s.Consume(stdin, sink.Labels{Stream: f.stream, Issuer: f.issuer})
			done <- err
		}()
		select {
		case runErr = <-done:
		case <-ctx.Done():
			runErr = errors.New("stopped before standard input ended: the report covers what arrived")
		}
	}
	shutdown(servers)
	cancel()

	rep := s.Report()
	code := rep.ExitCode(f.expect)
	if runErr != nil {
		fmt.Fprintf(stderr, "snowchaos verify: %v\n", runErr)
		if code == exitOK { // a finding stays a finding
			code = exitInvalid
		}
	}
	if f.jsonOut {
		printJSONReport(stdout, rep, f.expect, code)
	} else {
		printReport(stdout, rep, f.expect, code)
	}
	return code
}

// config checks the flags' bounds and builds the sink's Config.
func (f *verifyFlags) config() (sink.Config, error) {
	var cfg sink.Config
	k, err := verify.ParseKind(f.kind)
	if err != nil {
		return cfg, fmt.Errorf("--kind: %w", err)
	}
	l, err := f.layout.layout()
	if err != nil {
		return cfg, err
	}
	h := f.http
	switch {
	case h.MaxBody < 1<<10 || h.MaxBody > 1<<30:
		return cfg, fmt.Errorf("--max-body %d: want 1024..%d", h.MaxBody, 1<<30)
	case h.MaxRequests < 1 || h.MaxRequests > sink.MaxRequestsLimit:
		return cfg, fmt.Errorf("--max-requests %d: want 1..%d", h.MaxRequests, sink.MaxRequestsLimit)
	case h.MaxConns < 0 || h.MaxConns > server.MaxConnsLimit:
		return cfg, fmt.Errorf("--max-conns %d: want 0..%d (0: the default)", h.MaxConns, server.MaxConnsLimit)
	case h.ReadHeaderTimeout <= 0 || h.ReadHeaderTimeout > server.MaxTimeout:
		return cfg, fmt.Errorf("--read-header-timeout %v: want above 0, at most %v", h.ReadHeaderTimeout, server.MaxTimeout)
	case h.RequestTimeout <= 0 || h.RequestTimeout > server.MaxTimeout:
		return cfg, fmt.Errorf("--request-timeout %v: want above 0, at most %v", h.RequestTimeout, server.MaxTimeout)
	case h.IdleTimeout <= 0 || h.IdleTimeout > server.MaxIdleTimeout:
		return cfg, fmt.Errorf("--idle-timeout %v: want above 0, at most %v", h.IdleTimeout, server.MaxIdleTimeout)
	case f.maxLine < 64 || f.maxLine > 1<<30:
		return cfg, fmt.Errorf("--max-line %d: want 64..%d", f.maxLine, 1<<30)
	case f.maxDetails < 0 || f.maxDetails > 10000:
		return cfg, fmt.Errorf("--max-details %d: want 0..10000", f.maxDetails)
	case f.duration < 0 || f.progress < 0:
		return cfg, errors.New("--duration and --progress must not be negative")
	case f.listen != "" && (f.stream != "" || f.issuer != ""):
		return cfg, errors.New("--stream and --issuer label standard input; with --listen, label requests (?stream=, &issuer=)")
	case f.listen == "" && f.duration > 0:
		return cfg, errors.New("--duration needs --listen (standard input ends by itself)")
	}
	details := f.maxDetails
	if details == 0 {
		details = -1
	}
	return sink.Config{Kind: k, Layout: l, MaxDetails: details, MaxLineBytes: f.maxLine,
		Now: func() int64 { return time.Now().UnixNano() }}, nil
}

func metricsMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// serveOn listens on addr and serves h there in the background, within
// the limits and timeouts of cfg.
func serveOn(addr string, h http.Handler, cfg sink.HTTPConfig, onRefuse func()) (*sink.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv, err := sink.Serve(ln, h, cfg, onRefuse)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return srv, nil
}

// shutdown stops the servers, letting requests in flight finish (bounded).
func shutdown(servers []*sink.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		s.Shutdown(ctx)
	}
}

func printProgress(ctx context.Context, s *sink.Sink, every time.Duration, w io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tot := s.Totals()
			fmt.Fprintf(w, "snowchaos verify: %d IDs, %d duplicates, %d order violations, %d restart violations, %d bad lines, %d batches, %d incomplete, %d refused\n",
				tot.IDs, tot.Duplicates, tot.OrderViolations, tot.RestartViolations, tot.BadLines, tot.Batches, tot.Incomplete, tot.Refused)
		}
	}
}

func verdictWord(code int) string {
	switch code {
	case exitOK:
		return "ok"
	case exitFailure:
		return "FAIL"
	}
	return "INVALID"
}

func printReport(w io.Writer, rep sink.Report, expect uint64, code int) {
	r := rep.Result
	fmt.Fprintf(w, "kind %s: %d IDs (%d unique) in %d batches: %d duplicates, %d order violations in %d streams, %d restart violations, %d bad lines\n",
		r.Kind, rep.IDs, r.Unique, rep.Batches, rep.Duplicates, rep.OrderViolations, r.Streams, rep.RestartViolations, rep.BadLines)
	if r.Timed && rep.IDs > 0 {
		fmt.Fprintf(w, "embedded time against receipt: lead max %v p99 %v, lag max %v p99 %v\n", r.Lead.Max, r.Lead.P99, r.Lag.Max, r.Lag.P99)
	}
	for _, d := range r.DuplicateDetails {
		fmt.Fprintf(w, "duplicate %s: first from %s, again from %s\n", d.ID, d.First, d.Second)
	}
	for _, o := range r.OrderDetails {
		fmt.Fprintf(w, "order violation in stream %d: %s after %s (from %s)\n", o.Stream, o.ID, o.Prev, o.Issuer)
	}
	for _, rv := range r.RestartDetails {
		fmt.Fprintf(w, "restart violation: %s from %s, not above %s from %s\n", rv.ID, rv.Issuer, rv.Floor, rv.FloorIssuer)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "bad input: %v\n", e.Error())
	}
	if rep.Incomplete > 0 {
		fmt.Fprintf(w, "%d batches stopped part way (what they held after that was not verified):\n", rep.Incomplete)
		for _, e := range rep.IncompleteErrors {
			fmt.Fprintf(w, "incomplete: %v\n", e.Error())
		}
	}
	if rep.Refused > 0 {
		fmt.Fprintf(w, "%d requests or connections refused unread (503 or 413): their IDs were verified only if the client sent them again\n", rep.Refused)
	}
	if rep.IDs < expect {
		fmt.Fprintf(w, "expected at least %d IDs, received %d\n", expect, rep.IDs)
	}
	fmt.Fprintf(w, "verdict: %s (exit %d)\n", verdictWord(code), code)
}

// verifyReport is the --json report verify prints last.
type verifyReport struct {
	Kind              string   `json:"kind"`
	IDs               uint64   `json:"ids"`
	Unique            uint64   `json:"unique"`
	Batches           int      `json:"batches"`
	Duplicates        uint64   `json:"duplicates"`
	OrderViolations   uint64   `json:"order_violations"`
	RestartViolations uint64   `json:"restart_violations"`
	BadLines          uint64   `json:"bad_lines"`
	Incomplete        uint64   `json:"incomplete"`
	Refused           uint64   `json:"refused"`
	ExpectIDs         uint64   `json:"expect_ids"`
	MaxLeadNs         int64    `json:"max_lead_ns"`
	MaxLagNs          int64    `json:"max_lag_ns"`
	Errors            []string `json:"errors"`
	DuplicateIDs      []string `json:"duplicate_ids"`
	Verdict           string   `json:"verdict"`
	Exit              int      `json:"exit"`
}

func printJSONReport(w io.Writer, rep sink.Report, expect uint64, code int) {
	out := verifyReport{Kind: rep.Result.Kind.String(), IDs: rep.IDs, Unique: rep.Result.Unique, Batches: rep.Batches, Duplicates: rep.Duplicates,
		OrderViolations: rep.OrderViolations, RestartViolations: rep.RestartViolations, BadLines: rep.BadLines, Incomplete: rep.Incomplete, Refused: rep.Refused, ExpectIDs: expect,
		MaxLeadNs: int64(rep.Result.Lead.Max), MaxLagNs: int64(rep.Result.Lag.Max),
		Errors: []string{}, DuplicateIDs: []string{}, Verdict: verdictWord(code), Exit: code}
	for _, e := range rep.Errors {
		out.Errors = append(out.Errors, e.Error())
	}
	for _, e := range rep.IncompleteErrors {
		out.Errors = append(out.Errors, e.Error())
	}
	for _, d := range rep.Result.DuplicateDetails {
		out.DuplicateIDs = append(out.DuplicateIDs, d.ID.String())
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}
