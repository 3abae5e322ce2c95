package dashboards_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/dashboards"
	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/server/service"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// TestQueriesAgainstRealPrometheus runs the Debian package's Prometheus
// (telemetry/promtest) scraping two real endpoints while they work under
// faults:
//
//   - an HTTP node (package server) whose generator runs on a fault clock
//     behind a worker-ID lease and a file checkpoint, with its NTP
//     collector fed by real checks against an in-process NTP server, under
//     HTTP load, with clock steps injected through its admin API;
//   - a real-mode scenario run (package harness, testdata/live.yaml)
//     serving the snowchaos_* series and its in-process nodes' snowflake_*
//     series, as `snowchaos run --metrics-addr` does.
//
// Then every panel and annotation query of every dashboard, with Grafana's
// variables substituted, must return at least one series over the test's
// time range (as Grafana's range queries would), and the instance
// variable must list both endpoints. Skipped outside CI when prometheus
// is not installed; a failure in CI.
func TestQueriesAgainstRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and runs a 16 s real-mode scenario")
	}
	promtest.Binary(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()

	node := startNode(ctx, t)
	harnessAddr, harnessDone := startScenario(ctx, t)

	p := promtest.StartConfig(t, promtest.Config{Targets: []string{node.addr, harnessAddr}, ScrapeInterval: time.Second})
	if err := p.WaitUp(ctx, 2); err != nil {
		t.Fatal(err)
	}

	// Load and faults on the HTTP node while the scenario runs.
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	wg.Go(func() { node.load(loadCtx) })
	node.faults(ctx, t, p)
	if err := <-harnessDone; err != nil {
		t.Fatalf("scenario run: %v", err)
	}
	defer func() { stopLoad(); wg.Wait() }()

	// Every query must return a series over [start, now].
	qs := allQueries(t)
	var pending []dashboards.Query
	for _, q := range qs {
		if q.Kind != dashboards.KindVariable {
			pending = append(pending, q)
		}
	}
	lastErr := map[string]string{}
	pctx, pcancel := context.WithTimeout(ctx, 90*time.Second)
	defer pcancel()
	_ = testenv.Poll(pctx, time.Second, nil, func() bool {
		var still []dashboards.Query
		for _, q := range pending {
			expr := dashboards.Expand(q.Expr, 20*time.Second, ".*")
			n, err := rangeSeries(ctx, p.URL, expr, start, time.Now())
			if err != nil || n == 0 {
				lastErr[q.String()] = fmt.Sprintf("%d series, err %v: %s", n, err, expr)
				still = append(still, q)
			}
		}
		pending = still
		return len(pending) == 0
	})
	for _, q := range pending {
		t.Errorf("%s returned no series from a real Prometheus: %s", q, lastErr[q.String()])
	}

	// The instance variable lists both endpoints.
	for _, q := range qs {
		if q.Kind != dashboards.KindVariable {
			continue
		}
		metric, label, _ := dashboards.LabelValues(q.Expr)
		vals, err := labelValues(ctx, p.URL, label, metric, start)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		want := node.addr
		if strings.HasPrefix(metric, "snowchaos_") {
			want = harnessAddr
		}
		if !slices.Contains(vals, want) {
			t.Errorf("%s: values %v lack %s", q, vals, want)
		}
	}
	if !t.Failed() {
		t.Logf("%d queries returned series from a real Prometheus scraping a node under faults and a real-mode scenario", len(qs))
	}
}

// testNode is a real HTTP node under test.
type testNode struct {
	addr  string
	admin *server.Client
	fc    *faults.Clock
}

const nodeToken = "dashboards-test-token"

// startNode starts the HTTP node snowchaos serve runs (server/service): a
// generator (wait policy, 1 s MaxWait) on a fault clock, fenced by a
// worker-ID lease on the memory store, checkpointing to a file, with its
// NTP check against an in-process NTP server every second; its registry
// holds the generator, lease and NTP collectors.
func startNode(ctx context.Context, t *testing.T) *testNode {
	t.Helper()
	ntpAddr := chronytest.StartFake(t, chronytest.Fake{Offset: 40 * time.Millisecond, Stratum: 2})
	svc, err := service.New(ctx, service.Config{
		Node: node.Config{
			Settings:   generator.Settings{Policy: generator.PolicyWait, MaxWait: time.Second},
			FaultClock: true,
		},
		CheckpointPath: filepath.Join(t.TempDir(), "mark"),
		Lease:          &service.Lease{URL: lease.MemoryURL, Keeper: node.Lease{Holder: "dashboards-test", TTL: 3 * time.Second}},
		Server:         server.Config{AdminToken: nodeToken},
		NTP:            &service.NTP{Servers: []string{ntpAddr}, Interval: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(sctx, ln, nil) }()
	t.Cleanup(func() {
		scancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	return &testNode{addr: ln.Addr().String(), admin: &server.Client{BaseURL: "http://" + ln.Addr().String(), Token: nodeToken}, fc: svc.Node().FaultClock()}
}

// load fetches batches from the node until ctx ends: steady batches of
// 256, and every second two of 4096 back to back, which exhaust a tick's
// sequence (4096 under the default layout). Refusals are expected while a
// fault makes the node refuse.
func (n *testNode) load(ctx context.Context) {
	c := &server.Client{BaseURL: n.admin.BaseURL}
	for i := 0; ctx.Err() == nil; i++ {
		size := 256
		if i%50 == 0 {
			size = 4096
			_, _ = c.IDs(ctx, size)
		}
		_, _ = c.IDs(ctx, size)
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// faults injects clock steps through the admin API: a small step back
// (the wait policy waits it out: a rewind, a wait), one beyond MaxWait
// (refusals, not ready), then a revert; each waits until the node has
// felt it and Prometheus has scraped the effect.
func (n *testNode) faults(ctx context.Context, t *testing.T, p *promtest.Prom) {
	t.Helper()
	before := func() generator.Stats { return statsOf(t, n) }
	// step steps the clock back by `by` until the node reports what
	// happened (a step lands between two requests: when the load paused
	// longer than the step, nothing was issued past the new wall time and
	// there is no rewind, so it steps again).
	step := func(what string, by time.Duration, happened func(s0, s generator.Stats) bool) {
		for try := 0; try < 10; try++ {
			s0 := before()
			if _, err := n.admin.Inject(ctx, faults.Fault{Kind: faults.KindStep, By: by}); err != nil {
				t.Fatal(err)
			}
			if testenv.Eventually(ctx, 3*time.Second, func() bool { return happened(s0, before()) }) {
				return
			}
		}
		t.Fatalf("node: no %s after 10 steps of %v; metrics:\n%s", what, by,
			metricsText(t, n, "snowflake_clock_rewinds_total", "snowflake_refusals_total", "snowflake_ids_issued", "snowflake_ready"))
	}
	// A rewind needs an issued tick to be behind of: wait for the load.
	if !testenv.Eventually(ctx, 30*time.Second, func() bool { return before().Issued > 0 }) {
		t.Fatal("node: the load issued nothing")
	}
	step("waited rewind", -200*time.Millisecond, func(s0, s generator.Stats) bool { return s.RewindsWaited > s0.RewindsWaited })
	if _, err := p.WaitFor(ctx, `snowflake_clock_rewinds_total{instance="`+n.addr+`",outcome="waited"}`, promtest.AtLeast(1)); err != nil {
		t.Fatal(err)
	}
	step("refused rewind", -2*time.Second, func(s0, s generator.Stats) bool { return s.RewindsRefused > s0.RewindsRefused })
	if _, err := p.WaitFor(ctx, `snowflake_refusals_total{instance="`+n.addr+`",reason="wait_exceeded"}`, promtest.AtLeast(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.admin.Revert(ctx); err != nil {
		t.Fatal(err)
	}
}

// metricsText returns the node's exposition lines of the given metrics.
func metricsText(t *testing.T, n *testNode, prefixes ...string) string {
	t.Helper()
	resp, err := http.Get("http://" + n.addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// statsOf reads the node's generator counters from its /metrics.
func statsOf(t *testing.T, n *testNode) generator.Stats {
	t.Helper()
	resp, err := http.Get("http://" + n.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var s generator.Stats
	for _, line := range strings.Split(string(body), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(val, 64)
		switch name {
		case "snowflake_ids_issued_total":
			s.Issued = uint64(v)
		case `snowflake_clock_rewinds_total{outcome="waited"}`:
			s.RewindsWaited = uint64(v)
		case `snowflake_clock_rewinds_total{outcome="refused"}`:
			s.RewindsRefused = uint64(v)
		}
	}
	return s
}

// startScenario runs testdata/live.yaml in real mode with its metrics
// served on a loopback port, as `snowchaos run --mode real --metrics-addr`
// does; the channel gets the run's error (or its verdict if not pass).
func startScenario(ctx context.Context, t *testing.T) (addr string, done <-chan error) {
	t.Helper()
	s, err := scenario.ParseFile(filepath.Join("testdata", "live.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	suite := []*scenario.Scenario{s}
	reg := telemetry.NewRegistry()
	opts := harness.Options{
		Mode:       scenario.ModeReal,
		Metrics:    metrics.New(),
		Generators: telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true}),
	}
	reg.MustRegister(opts.Metrics, opts.Generators)
	if err := harness.Prepare(suite, opts); err != nil {
		t.Fatal(err)
	}
	srv, err := telemetry.Listen("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	ch := make(chan error, 1)
	go func() {
		rep, err := harness.Run(ctx, suite, opts)
		if err == nil && rep.Verdict != harness.Pass {
			b, _ := json.Marshal(rep)
			err = fmt.Errorf("verdict %s: %.2000s", rep.Verdict, b)
		}
		ch <- err
	}()
	return srv.Addr(), ch
}

// rangeSeries runs a range query over [from, to] (1 s step) and returns
// how many series it gave.
func rangeSeries(ctx context.Context, base, expr string, from, to time.Time) (int, error) {
	data, err := promAPI(ctx, base, "/api/v1/query_range", url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(from.Unix(), 10)},
		"end":   {strconv.FormatInt(to.Unix()+1, 10)},
		"step":  {"1"},
	})
	if err != nil {
		return 0, err
	}
	var d struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return 0, err
	}
	if d.ResultType != "matrix" {
		return 0, fmt.Errorf("result type %s", d.ResultType)
	}
	return len(d.Result), nil
}

// labelValues lists a label's values over the series of metric since from.
func labelValues(ctx context.Context, base, label, metric string, from time.Time) ([]string, error) {
	data, err := promAPI(ctx, base, "/api/v1/label/"+label+"/values", url.Values{
		"match[]": {metric},
		"start":   {strconv.FormatInt(from.Unix(), 10)},
	})
	if err != nil {
		return nil, err
	}
	var vals []string
	return vals, json.Unmarshal(data, &vals)
}

// promAPI calls a Prometheus HTTP API endpoint and returns its data.
func promAPI(ctx context.Context, base, path string, params url.Values) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, errors.New(r.Error)
	}
	return r.Data, nil
}
