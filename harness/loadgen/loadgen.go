// Package loadgen drives open-model load against snowchaos HTTP nodes with
// the vegeta library and checks every ID as it arrives.
//
// A run paces requests (constant rates and linear ramps through
// StagedPacer, or as fast as a fixed number of workers allow), spreads them
// round-robin over one or many nodes on keep-alive connections, and hands
// each response, the moment vegeta delivers it, to a pool of processors
// that parse its body into IDs and feed them to a verify.Concurrent (and/or
// a Sink callback). A failed request is data, never dropped: it is counted
// by cause (connection, timeout, status, bad body) and observed by the
// verifier as an unavailable call. Latency percentiles come from vegeta's
// Metrics. Runs are bounded in time and count, and by default refuse any
// node that is not on a loopback address.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
)

// Sentinel errors. Their text never changes once published.
var (
	// ErrConfig: a Config field is missing or out of range.
	ErrConfig = errors.New("loadgen: invalid config")
	// ErrRemote: a node URL is not on a loopback address and
	// Config.AllowRemote is false.
	ErrRemote = errors.New("loadgen: refusing a non-loopback node")
)

// Defaults for the zero values of Config.
const (
	DefaultDuration   = 10 * time.Second
	DefaultTimeout    = 5 * time.Second
	DefaultMaxWorkers = 1024
	DefaultWorkers    = 16
	// MaxDuration bounds any run.
	MaxDuration = time.Hour
	// maxBody bounds a response body read by the attacker.
	maxBody = 64 << 20
)

// Cause classifies a failed request.
type Cause uint8

// Causes. The zero value is CauseNone (success).
const (
	// CauseNone: a 2xx response whose body parsed into the IDs asked for.
	CauseNone Cause = iota
	// CauseConnection: no response: the connection was refused, reset or
	// closed mid-response.
	CauseConnection
	// CauseTimeout: no response within Config.Timeout.
	CauseTimeout
	// CauseStatus: a non-2xx response (a refusing node answers 503).
	CauseStatus
	// CauseBadBody: a 2xx response whose body is not the IDs asked for.
	CauseBadBody
	numCauses
)

// String returns "ok", "connection", "timeout", "status" or "bad_body".
func (c Cause) String() string {
	switch c {
	case CauseNone:
		return "ok"
	case CauseConnection:
		return "connection"
	case CauseTimeout:
		return "timeout"
	case CauseStatus:
		return "status"
	case CauseBadBody:
		return "bad_body"
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}

// Response is one request's outcome as a Sink sees it.
type Response struct {
	// Node indexes Config.Nodes.
	Node int
	// Seq is the request's sequence number within the run.
	Seq uint64
	// Start is when the request was sent; Latency how long it took.
	Start   time.Time
	Latency time.Duration
	// Code is the HTTP status (0 when no response arrived).
	Code int
	// IDs are the IDs the body carried. The slice is reused once the Sink
	// returns: copy what you keep.
	IDs []generator.ID
	// Cause says why the request failed (CauseNone: it did not).
	Cause Cause
	// Err describes the failure: the transport error, the error body's
	// detail, or the parse error.
	Err string
	// Partial is set when the node returned fewer IDs than asked for,
	// because it refused part way through a batch (Err says why).
	Partial bool
}

// Config describes a run. Nodes is required; every other zero value is a
// safe default.
type Config struct {
	// Nodes are the base URLs of the nodes ("http://127.0.0.1:8080"),
	// hit round-robin.
	Nodes []string
	// Batch is the IDs per request: 0 or 1 uses GET /v1/id, more uses
	// GET /v1/ids?count=Batch.
	Batch int
	// JSON asks for JSON bodies instead of text.
	JSON bool
	// Stages pace an open-model load (see StagedPacer); the run lasts
	// their total duration. Empty: as fast as Workers allow (closed model),
	// for Duration.
	Stages []Stage
	// Workers is the number of concurrent requesters: the fixed count at
	// maximum rate, the initial count with Stages. Zero: 16.
	Workers uint64
	// MaxWorkers caps the requesters vegeta adds to keep up with Stages
	// when responses are slow. Zero: 1024.
	MaxWorkers uint64
	// Connections bounds the keep-alive connections per node (with
	// StdTransport: the idle ones). Zero: MaxWorkers (vegeta's 10000 with
	// StdTransport).
	Connections int
	// Duration bounds the run; zero: 10 s without Stages, their total with
	// them. At most MaxDuration.
	Duration time.Duration
	// MaxRequests bounds the number of requests; zero: no bound but time.
	MaxRequests uint64
	// Timeout bounds each request. Zero: 5 s.
	Timeout time.Duration
	// Processors is the number of goroutines that parse and verify
	// responses as they arrive. Zero: GOMAXPROCS.
	Processors int
	// Sink, when set, is called with every response as it arrives, from
	// several goroutines at once.
	Sink func(*Response)
	// Verifier, when set, observes every response as it arrives: IDs,
	// outcome and reference-time bracket (the loader's wall clock).
	Verifier *verify.Concurrent
	// Issuers are the verifier's issuer for each node, by index. Empty
	// with a Verifier: each node is registered as an issuer named by its
	// URL, with the worker ID its /v1/info reports.
	Issuers []verify.IssuerID
	// AllowRemote permits nodes on non-loopback addresses.
	AllowRemote bool
	// Name names the attack (sent as X-Vegeta-Attack).
	Name string
	// Client, when set, replaces the attacker's HTTP client (tests,
	// custom transports); Timeout and Connections then do not apply.
	// Nil: an http.Client with Timeout over a Transport (fasthttp's
	// HostClient) with up to Connections (zero: MaxWorkers) connections
	// per node.
	Client *http.Client
	// StdTransport uses vegeta's default client (net/http's Transport)
	// instead of Transport.
	StdTransport bool
}

// Failures counts failed requests by cause.
type Failures struct {
	Connection uint64 // no response: refused, reset, closed
	Timeout    uint64 // no response within Config.Timeout
	Status     uint64 // a non-2xx response
	BadBody    uint64 // a 2xx response without the IDs asked for
}

// Total is the number of failed requests.
func (f Failures) Total() uint64 { return f.Connection + f.Timeout + f.Status + f.BadBody }

// add counts one failure.
func (f *Failures) add(c Cause, n uint64) {
	switch c {
	case CauseConnection:
		f.Connection += n
	case CauseTimeout:
		f.Timeout += n
	case CauseStatus:
		f.Status += n
	case CauseBadBody:
		f.BadBody += n
	}
}

// NodeReport is one node's share of a run.
type NodeReport struct {
	URL           string    // the node's base URL
	Requests, OK  uint64    // requests sent to it, and succeeded
	IDs           uint64    // IDs it returned
	Failures      Failures  // its failed requests by cause
	LastFailure   string    // the last failure's description
	FirstFailedAt time.Time // when its first failed request was sent
}

// Report is what a run did.
type Report struct {
	// Requests were sent; OK succeeded; Partial of those carried a short
	// batch.
	Requests, OK, Partial uint64
	// IDs were received; Verified were handed to the Sink and Verifier.
	// Nothing is dropped for verification, so Verified == IDs; Dropped
	// (IDs - Verified) is reported to make that checkable.
	IDs, Verified, Dropped uint64
	// Failures counts failed requests by cause; StatusCodes counts every
	// response by status (0: no response).
	Failures    Failures
	StatusCodes map[int]uint64
	// Nodes splits the counts per node.
	Nodes []NodeReport
	// Latency is vegeta's latency summary over every request.
	Latency vegeta.LatencyMetrics
	// Duration is from the first request sent to the last response.
	Duration time.Duration
	// Rate is requests sent per second; Throughput successful requests
	// per second; IDRate IDs received per second (all over Duration).
	Rate, Throughput, IDRate float64
	// Errors are up to 10 distinct failure descriptions.
	Errors []string
}

// String summarises the report in one line.
func (r *Report) String() string {
	return fmt.Sprintf("%d requests (%.0f/s), %d ok, %d IDs (%.0f/s), verified %d, dropped %d; failures: %d connection, %d timeout, %d status, %d bad body; latency p50 %v p90 %v p99 %v max %v",
		r.Requests, r.Rate, r.OK, r.IDs, r.IDRate, r.Verified, r.Dropped,
		r.Failures.Connection, r.Failures.Timeout, r.Failures.Status, r.Failures.BadBody,
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
}

// CheckLoopback returns nil when rawURL is an http(s) URL on "localhost"
// or a loopback IP; the error wraps ErrRemote (or ErrConfig when the URL
// does not parse).
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: node URL %q is not an http(s) URL", ErrConfig, rawURL)
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q (set AllowRemote to load it)", ErrRemote, rawURL)
}

// run is one run's state.
type run struct {
	cfg     Config
	urls    map[string]int // request URL -> node
	mu      sync.Mutex     // guards metrics, codes, errs
	metrics vegeta.Metrics
	codes   map[int]uint64
	errs    []string
	nodes   []nodeCounters

	requests, ok, partial, ids, verified atomic.Uint64
	failures                             [numCauses]atomic.Uint64
}

// nodeCounters are one node's counters.
type nodeCounters struct {
	requests, ok, ids atomic.Uint64
	failures          [numCauses]atomic.Uint64
	mu                sync.Mutex
	last              string
	firstFail         time.Time
}

// Run drives the load described by cfg until its stages end, its duration
// or request count is reached, or ctx is done, and returns the report once
// every response has been processed. The error is for a bad Config or an
// unreachable /v1/info while registering issuers; failed requests are in
// the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if cfg.Verifier != nil && len(cfg.Issuers) == 0 {
		ids, err := RegisterIssuers(ctx, cfg.Verifier, cfg.Nodes, cfg.Client)
		if err != nil {
			return nil, err
		}
		cfg.Issuers = ids
	}
	r := &run{cfg: cfg, urls: map[string]int{}, codes: map[int]uint64{}, nodes: make([]nodeCounters, len(cfg.Nodes))}
	targets := make([]vegeta.Target, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		u := strings.TrimSuffix(n, "/") + "/v1/id"
		if cfg.Batch > 1 {
			u = strings.TrimSuffix(n, "/") + "/v1/ids?count=" + strconv.Itoa(cfg.Batch)
		}
		hdr := http.Header{}
		if cfg.JSON {
			hdr.Set("Accept", "application/json")
		}
		targets[i] = vegeta.Target{Method: http.MethodGet, URL: u, Header: hdr}
		r.urls[u] = i
	}

	var pacer vegeta.Pacer = vegeta.ConstantPacer{} // zero: as fast as the workers go
	opts := []func(*vegeta.Attacker){vegeta.Workers(cfg.Workers), vegeta.MaxBody(maxBody)}
	client := cfg.Client
	switch {
	case client != nil:
	case cfg.StdTransport:
		opts = append(opts, vegeta.KeepAlive(true), vegeta.Timeout(cfg.Timeout))
		if cfg.Connections > 0 {
			opts = append(opts, vegeta.Connections(cfg.Connections))
		}
	default:
		conns := cfg.Connections
		if conns == 0 {
			conns = int(min(cfg.MaxWorkers, 1<<16))
		}
		client = &http.Client{Timeout: cfg.Timeout, Transport: &Transport{MaxConnsPerHost: conns}}
	}
	if client != nil {
		opts = append(opts, vegeta.Client(client))
	}
	opts = append(opts, vegeta.Redirects(vegeta.NoFollow))
	if len(cfg.Stages) > 0 {
		sp, err := NewStagedPacer(cfg.Stages...)
		if err != nil {
			return nil, err
		}
		pacer = sp
		opts = append(opts, vegeta.MaxWorkers(cfg.MaxWorkers))
	} else {
		opts = append(opts, vegeta.MaxWorkers(cfg.Workers))
	}
	if cfg.MaxRequests > 0 {
		pacer = capped{Pacer: pacer, max: cfg.MaxRequests}
	}
	atk := vegeta.NewAttacker(opts...)
	results := atk.Attack(vegeta.NewStaticTargeter(targets...), pacer, cfg.Duration, cfg.Name)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	var wg sync.WaitGroup
	for range cfg.Processors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.process(results)
		}()
	}
	wg.Wait()
	return r.report(), nil
}

// normalize fills defaults and validates.
func (c *Config) normalize() error {
	if len(c.Nodes) == 0 {
		return fmt.Errorf("%w: no nodes", ErrConfig)
	}
	for _, n := range c.Nodes {
		if err := CheckLoopback(n); err != nil {
			if !errors.Is(err, ErrRemote) || !c.AllowRemote {
				return err
			}
		}
	}
	if c.Batch < 0 || c.Batch > server.MaxBatchLimit {
		return fmt.Errorf("%w: batch %d out of range [0, %d]", ErrConfig, c.Batch, server.MaxBatchLimit)
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = max(DefaultMaxWorkers, c.Workers)
	}
	if c.MaxWorkers < c.Workers {
		return fmt.Errorf("%w: MaxWorkers %d below Workers %d", ErrConfig, c.MaxWorkers, c.Workers)
	}
	if c.Duration < 0 || c.Timeout < 0 || c.Processors < 0 || c.Connections < 0 {
		return fmt.Errorf("%w: negative Duration, Timeout, Processors or Connections", ErrConfig)
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
		if len(c.Stages) > 0 {
			c.Duration = 0
			for _, s := range c.Stages {
				c.Duration += s.Duration
			}
		}
	}
	if c.Duration > MaxDuration {
		return fmt.Errorf("%w: duration %v above %v", ErrConfig, c.Duration, MaxDuration)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Processors == 0 {
		c.Processors = runtime.GOMAXPROCS(0)
	}
	if c.Verifier != nil && len(c.Issuers) != 0 && len(c.Issuers) != len(c.Nodes) {
		return fmt.Errorf("%w: %d issuers for %d nodes", ErrConfig, len(c.Issuers), len(c.Nodes))
	}
	return nil
}

// capped stops a pacer after max hits.
type capped struct {
	vegeta.Pacer
	max uint64
}

// Pace stops once max hits were sent.
func (c capped) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= c.max {
		return 0, true
	}
	return c.Pacer.Pace(elapsed, hits)
}

// RegisterIssuers registers each node with v as an issuer named by its URL,
// with the worker ID its /v1/info reports, and returns their IDs in order.
func RegisterIssuers(ctx context.Context, v *verify.Concurrent, nodes []string, hc *http.Client) ([]verify.IssuerID, error) {
	out := make([]verify.IssuerID, len(nodes))
	for i, n := range nodes {
		c := &server.Client{BaseURL: n, HTTP: hc}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("loadgen: registering node %s: %w", n, err)
		}
		l, err := info.Layout.Layout()
		if err != nil {
			return nil, fmt.Errorf("loadgen: node %s layout: %w", n, err)
		}
		out[i] = v.Register(verify.IssuerSpec{Name: n, Worker: info.Node, Layout: l})
	}
	return out, nil
}

// process consumes results until the attack ends.
func (r *run) process(results <-chan *vegeta.Result) {
	var resp Response
	var ids []generator.ID
	for res := range results {
		node, ok := r.urls[res.URL]
		if !ok {
			node = -1
		}
		resp = Response{Node: node, Seq: res.Seq, Start: res.Timestamp, Latency: res.Latency, Code: int(res.Code)}
		ids = r.classify(res, &resp, ids[:0])
		resp.IDs = ids
		r.account(res, &resp)
		if r.cfg.Sink != nil {
			r.cfg.Sink(&resp)
		}
		if r.cfg.Verifier != nil && node >= 0 {
			r.cfg.Verifier.Observe(verify.Observation{
				Issuer:   r.cfg.Issuers[node],
				RefStart: res.Timestamp.UnixNano(),
				RefEnd:   res.Timestamp.Add(res.Latency).UnixNano(),
				IDs:      ids,
				Outcome:  outcomeOf(&resp),
			})
		}
		if r.cfg.Sink != nil || r.cfg.Verifier != nil {
			r.verified.Add(uint64(len(ids)))
		}
	}
}

// classify sets resp's cause and error and returns the body's IDs.
func (r *run) classify(res *vegeta.Result, resp *Response, ids []generator.ID) []generator.ID {
	switch {
	case res.Code == 0:
		resp.Cause, resp.Err = CauseConnection, res.Error
		if isTimeout(res.Error) {
			resp.Cause = CauseTimeout
		}
		return ids
	case res.Code < 200 || res.Code > 299:
		resp.Cause = CauseStatus
		resp.Err = fmt.Sprintf("HTTP %d: %s", res.Code, strings.TrimSpace(string(res.Body)))
		return ids
	}
	ids, err := server.AppendIDs(ids, res.Body)
	if err != nil {
		resp.Cause, resp.Err = CauseBadBody, err.Error()
		return ids[:0]
	}
	want := max(r.cfg.Batch, 1)
	partial := res.Headers.Get(server.PartialHeader)
	switch {
	case len(ids) == want:
	case partial != "" && len(ids) > 0 && len(ids) < want:
		resp.Partial, resp.Err = true, partial
	default:
		resp.Cause = CauseBadBody
		resp.Err = fmt.Sprintf("%d IDs in a response to a request for %d", len(ids), want)
		return ids[:0]
	}
	return ids
}

// isTimeout recognises the transport's timeout errors.
func isTimeout(s string) bool {
	return strings.Contains(s, "Client.Timeout") || strings.Contains(s, "deadline exceeded") ||
		strings.Contains(s, "i/o timeout") || strings.Contains(s, "timeout awaiting")
}

// outcomeOf maps a response to the verifier's call outcome.
func outcomeOf(resp *Response) verify.Outcome {
	switch resp.Cause {
	case CauseNone:
		if resp.Partial {
			if strings.Contains(resp.Err, generator.ErrWaitExceeded.Error()) {
				return verify.OutcomeWaitExceeded
			}
			return verify.OutcomeRefused
		}
		return verify.OutcomeOK
	case CauseStatus:
		if resp.Code == http.StatusServiceUnavailable {
			if strings.Contains(resp.Err, generator.ErrWaitExceeded.Error()) {
				return verify.OutcomeWaitExceeded
			}
			return verify.OutcomeRefused
		}
	}
	return verify.OutcomeError
}

// account adds one response to the counters and vegeta's metrics.
func (r *run) account(res *vegeta.Result, resp *Response) {
	r.requests.Add(1)
	n := uint64(len(resp.IDs))
	r.ids.Add(n)
	r.failures[resp.Cause].Add(1)
	if resp.Cause == CauseNone {
		r.ok.Add(1)
		if resp.Partial {
			r.partial.Add(1)
		}
	}
	if resp.Node >= 0 {
		nc := &r.nodes[resp.Node]
		nc.requests.Add(1)
		nc.ids.Add(n)
		nc.failures[resp.Cause].Add(1)
		if resp.Cause == CauseNone {
			nc.ok.Add(1)
		} else {
			nc.mu.Lock()
			nc.last = resp.Err
			if nc.firstFail.IsZero() {
				nc.firstFail = resp.Start
			}
			nc.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.metrics.Add(res)
	r.codes[resp.Code]++
	if resp.Cause != CauseNone && len(r.errs) < 10 && !slices.Contains(r.errs, resp.Err) {
		r.errs = append(r.errs, resp.Err)
	}
	r.mu.Unlock()
}

// report assembles the Report once processing is done.
func (r *run) report() *Report {
	r.metrics.Close()
	rep := &Report{
		Requests: r.requests.Load(), OK: r.ok.Load(), Partial: r.partial.Load(),
		IDs: r.ids.Load(), Verified: r.verified.Load(),
		StatusCodes: r.codes, Latency: r.metrics.Latencies, Errors: r.errs,
	}
	if r.cfg.Sink == nil && r.cfg.Verifier == nil {
		rep.Verified = rep.IDs // nothing to verify against: nothing dropped
	}
	rep.Dropped = rep.IDs - rep.Verified
	for c := CauseConnection; c < numCauses; c++ {
		rep.Failures.add(c, r.failures[c].Load())
	}
	for i := range r.nodes {
		nc := &r.nodes[i]
		nr := NodeReport{URL: r.cfg.Nodes[i], Requests: nc.requests.Load(), OK: nc.ok.Load(), IDs: nc.ids.Load(), LastFailure: nc.last, FirstFailedAt: nc.firstFail}
		for c := CauseConnection; c < numCauses; c++ {
			nr.Failures.add(c, nc.failures[c].Load())
		}
		rep.Nodes = append(rep.Nodes, nr)
	}
	rep.Duration = r.metrics.Duration + r.metrics.Wait
	if s := rep.Duration.Seconds(); s > 0 {
		rep.Rate = float64(rep.Requests) / s
		rep.Throughput = float64(rep.OK) / s
		rep.IDRate = float64(rep.IDs) / s
	}
	return rep
}
