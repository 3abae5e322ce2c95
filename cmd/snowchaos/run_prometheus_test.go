package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// TestRunServesPrometheus is the user's view of `snowchaos run
// --metrics-addr`: a real Prometheus (telemetry/promtest: Debian's binary
// on a free loopback port with its own data dir, scraping every second)
// scrapes `snowchaos run --mode real --metrics-addr ADDR --metrics-linger
// 2m --report json testdata/prom-real.yaml`, run in-process, and through
// /api/v1/query:
//
//   - while the run goes on, node a's rewind series and node b's
//     exhaustion series move (they exist at 0 and rise to at least 1);
//   - every node's snowflake_ids_issued_total,
//     snowflake_clock_rewinds_total{outcome}, snowflake_sequence_exhaustions_total,
//     snowflake_wait_seconds_count{reason} and snowflake_refusals_total
//     end at exactly the value the run's /metrics last served for it (the
//     test reads the endpoint itself all along; a node's series end with
//     its run), and summed over a target's nodes the issued IDs and the
//     refusals are the JSON report's figures;
//   - snowchaos_ids_checked_total, snowchaos_duplicates_total,
//     snowchaos_order_violations_total, snowchaos_faults_injected_total{kind}
//     and snowchaos_verdict{scenario,target,invariant} are exactly what the
//     JSON report says (scraped during the linger after the report).
//
// Skipped outside CI when prometheus is not installed; a failure in CI.
func TestRunServesPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and runs a 14 s real-mode scenario")
	}
	promtest.Binary(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Prometheus first, so that it scrapes the run from its start: its
	// scrape loop begins a few seconds after it is ready (the scrape
	// manager applies new targets on a 5 s tick), so wait until it has
	// scraped the run's address once, where a placeholder holds the port
	// and answers 503 (up == 0), then free the port for the run.
	addr, release := promPlaceholder(t)
	p := promtest.Start(t, addr)
	if _, err := p.WaitFor(ctx, `up{instance="`+addr+`"} == 0`, promtest.Len(1)); err != nil {
		t.Fatal(err)
	}
	release()

	var stdout, stderr promSyncBuf
	runCtx, stopRun := context.WithCancel(ctx)
	exit := make(chan int, 1)
	go func() {
		exit <- dispatch(runCtx, []string{"run", "--mode", "real", "--metrics-addr", addr,
			"--metrics-linger", "2m", "--report", "json", filepath.Join("testdata", "prom-real.yaml")}, &stdout, &stderr)
	}()
	exited := false
	waitExit := func() int {
		stopRun()
		if exited {
			return -1
		}
		exited = true
		select {
		case code := <-exit:
			return code
		case <-time.After(time.Minute):
			t.Errorf("snowchaos run did not return within a minute of its interrupt")
			return -1
		}
	}
	defer waitExit()

	poll := startMetricsPoller(ctx, "http://"+addr+telemetry.MetricsPath)
	defer poll.stop()

	if err := p.WaitUp(ctx, 1); err != nil {
		t.Fatalf("%v\nrun stderr:\n%s", err, stderr.String())
	}

	// The series move while the run goes on: the wait run's, then the
	// logical run's (a node's series go stale when its run ends, so an
	// instant query only finds them live).
	for _, live := range []struct{ q, why string }{
		{`snowflake_clock_rewinds_total{node="prom-real/wait/a",outcome="waited"}`, "node a's step back, waited out"},
		{`snowflake_sequence_exhaustions_total{node="prom-real/wait/b"}`, "node b's frozen tick"},
		{`snowflake_wait_seconds_count{node="prom-real/wait/b",reason="sequence_exhausted"}`, "node b's waits for the next tick"},
		{`snowflake_clock_rewinds_total{node="prom-real/logical/a",outcome="logical"}`, "node a's step back, absorbed by the logical clock"},
		{`snowflake_sequence_exhaustions_total{node="prom-real/logical/b"}`, "node b's frozen tick under logical"},
	} {
		wctx, wcancel := context.WithTimeout(ctx, 45*time.Second)
		v, err := p.WaitFor(wctx, live.q, promtest.AtLeast(1))
		wcancel()
		if err != nil {
			t.Fatalf("%s: no live series of at least 1 in Prometheus: %v\nrun stderr:\n%s", live.why, err, stderr.String())
		}
		t.Logf("live during the run: %s = %v", live.q, v[0].Value)
	}

	// The report, then the lingering endpoint's final values.
	rep := waitReport(ctx, t, &stdout, &stderr, exit, &exited)
	final := poll.stop()

	if rep.Verdict != "pass" || len(rep.Scenarios) != 1 || len(rep.Scenarios[0].Runs) != 2 {
		t.Fatalf("report: verdict %s, %d scenarios; want pass, prom-real with runs wait and logical:\n%s", rep.Verdict, len(rep.Scenarios), stdout.String())
	}
	sc := rep.Scenarios[0]

	// expect waits until q gives one sample equal to want.
	expect := func(q string, want float64) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if _, err := p.WaitFor(wctx, q, promtest.Equals(want)); err != nil {
			t.Errorf("Prometheus: want %s == %v: %v", q, want, err)
		}
	}

	// Generator series, per node, against the run's own /metrics; summed
	// per target, against the report.
	var sumIDs, sumDups, sumOrder float64
	faultsByKind := map[string]float64{}
	for _, run := range sc.Runs {
		var issued, refused float64
		for _, n := range []string{"a", "b"} {
			node := sc.Name + "/" + run.Target + "/" + n
			got, ok := final[node]
			if !ok {
				t.Fatalf("the run's /metrics never served node %q (saw %v)", node, sortedKeys(final))
			}
			for _, s := range nodeSeries {
				sel := s.selector(node)
				q := "last_over_time(" + sel + "[10m])"
				if s.sum {
					q = "sum(" + q + ")"
				}
				expect(q, got[s.key()])
			}
			issued += got[nodeSeries[0].key()]
			refused += got[refusalSeries.key()]
			t.Logf("%s: %v", node, got)
		}
		expect(`sum(last_over_time(snowflake_ids_issued_total{node=~"`+sc.Name+`/`+run.Target+`/.*"}[10m]))`, float64(run.Figures.IDs))
		if issued != float64(run.Figures.IDs) {
			t.Errorf("%s: the nodes issued %v IDs, the report counts %d", run.Target, issued, run.Figures.IDs)
		}
		if refused != float64(run.Figures.Refusals) {
			t.Errorf("%s: the nodes refused %v calls, the report counts %d", run.Target, refused, run.Figures.Refusals)
		}

		// What the scenario makes happen, so the series above are not
		// trivially zero.
		a, b := final[sc.Name+"/"+run.Target+"/a"], final[sc.Name+"/"+run.Target+"/b"]
		switch run.Target {
		case "wait":
			if a[rewinds("waited").key()] < 1 || a[waits("rewind").key()] < 1 {
				t.Errorf("wait/a: no waited rewind after the step back: %v", a)
			}
			if b[waits("sequence_exhausted").key()] < 1 {
				t.Errorf("wait/b: no wait for an exhausted sequence in the frozen tick: %v", b)
			}
		case "logical":
			if a[rewinds("logical").key()] < 1 {
				t.Errorf("logical/a: no logical rewind after the step back: %v", a)
			}
		}
		if a[rewinds("refused").key()] != 0 {
			t.Errorf("%s/a: refused rewinds: %v", run.Target, a)
		}
		if b[exhaustionSeries.key()] < 1 {
			t.Errorf("%s/b: no exhaustion in the frozen tick: %v", run.Target, b)
		}
		// The series moved: at 0 when the run began, above it at the end.
		outcome := map[string]string{"wait": "waited", "logical": "logical"}[run.Target]
		expect(`min_over_time(`+rewinds(outcome).selector(sc.Name+"/"+run.Target+"/a")+`[10m])`, 0)
		expect(`min_over_time(`+exhaustionSeries.selector(sc.Name+"/"+run.Target+"/b")+`[10m])`, 0)

		sumIDs += float64(run.Figures.IDs)
		sumDups += float64(run.Figures.Duplicates)
		sumOrder += float64(run.Figures.OrderViolations + run.Figures.RestartViolations)
		for _, f := range run.Faults {
			kind := metrics.OtherKind
			if _, ok := faults.Lookup(faults.Kind(f.Kind)); ok {
				kind = f.Kind
			}
			faultsByKind[kind]++
		}
	}

	// Harness series against the report, scraped during the linger.
	expect(`snowchaos_ids_checked_total`, sumIDs)
	expect(`snowchaos_duplicates_total`, sumDups)
	expect(`snowchaos_order_violations_total`, sumOrder)
	if faultsByKind[string(faults.KindStep)] != 2 || faultsByKind[string(faults.KindFreeze)] != 2 {
		t.Errorf("report: faults by kind %v, want a step and a freeze per run", faultsByKind)
	}
	for _, k := range append(faults.Kinds(faults.InScenario), metrics.OtherKind) {
		expect(`snowchaos_faults_injected_total{kind="`+string(k)+`"}`, faultsByKind[string(k)])
	}
	verdicts := map[string]float64{}
	for _, run := range sc.Runs {
		for _, c := range run.Checks {
			v := map[string]float64{"pass": 1, "fail": 0}[c.Verdict]
			if c.Verdict != "pass" && c.Verdict != "fail" {
				v = -1
			}
			if c.Verdict != "pass" {
				t.Errorf("%s: %s: %s (observed %s)", run.Target, c.Expr, c.Verdict, c.Observed)
			}
			expect(`snowchaos_verdict{scenario=`+strconv.Quote(sc.Name)+`,target=`+strconv.Quote(run.Target)+`,invariant=`+strconv.Quote(c.Expr)+`}`, v)
			verdicts[run.Target+"\x00"+c.Expr] = v
		}
	}
	expect(`count(snowchaos_verdict{scenario="`+sc.Name+`"})`, float64(len(verdicts)))
	expect(`snowchaos_scenario_info{scenario="`+sc.Name+`",target="logical"}`, 1)

	if code := waitExit(); code != exitOK {
		t.Errorf("snowchaos run: exit %d, want 0\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "serving the final metrics at http://"+addr) {
		t.Errorf("stderr does not announce the linger:\n%s", stderr.String())
	}
	t.Logf("Prometheus carried the run's values: %.0f IDs checked, faults %v, %d verdicts", sumIDs, faultsByKind, len(verdicts))
}

// promReport is the part of the JSON report (harness/report.JSON) the test
// reads.
type promReport struct {
	Verdict   string `json:"verdict"`
	Scenarios []struct {
		Name string `json:"name"`
		Runs []struct {
			Target  string `json:"target"`
			Verdict string `json:"verdict"`
			Figures struct {
				IDs               uint64 `json:"ids"`
				Duplicates        uint64 `json:"duplicates"`
				OrderViolations   uint64 `json:"order_violations"`
				RestartViolations uint64 `json:"restart_violations"`
				Refusals          uint64 `json:"refusals"`
			} `json:"figures"`
			Faults []struct {
				Name      string `json:"name"`
				Kind      string `json:"kind"`
				Confirmed bool   `json:"confirmed"`
			} `json:"faults"`
			Checks []struct {
				Expr     string `json:"expr"`
				Verdict  string `json:"verdict"`
				Observed string `json:"observed"`
			} `json:"checks"`
		} `json:"runs"`
	} `json:"scenarios"`
}

// waitReport polls stdout until it holds the whole JSON report. The run
// must still be lingering then.
func waitReport(ctx context.Context, t *testing.T, stdout, stderr *promSyncBuf, exit <-chan int, exited *bool) promReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var rep promReport
		if out := stdout.String(); out != "" && json.Unmarshal([]byte(out), &rep) == nil {
			return rep
		}
		select {
		case code := <-exit:
			*exited = true
			t.Fatalf("snowchaos run returned %d before lingering\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		case <-ctx.Done():
			t.Fatalf("no JSON report: %v\nstdout:\n%s\nstderr:\n%s", ctx.Err(), stdout.String(), stderr.String())
		case <-tick.C:
		}
	}
}

// series is one generator series of a node, as Prometheus and the
// exposition name it.
type series struct {
	name         string // metric name as queried
	family       string // exposition family
	label, value string // an extra label, or ""
	sum          bool   // summed over the family's other labels
}

func (s series) key() string {
	if s.label == "" {
		return s.name
	}
	return s.name + "{" + s.label + "=" + s.value + "}"
}

func (s series) selector(node string) string {
	sel := s.name + `{node="` + node + `"`
	if s.label != "" {
		sel += `,` + s.label + `="` + s.value + `"`
	}
	return sel + "}"
}

func rewinds(outcome string) series {
	return series{name: "snowflake_clock_rewinds_total", family: "snowflake_clock_rewinds_total", label: "outcome", value: outcome}
}

func waits(reason string) series {
	return series{name: "snowflake_wait_seconds_count", family: "snowflake_wait_seconds", label: "reason", value: reason}
}

var (
	exhaustionSeries = series{name: "snowflake_sequence_exhaustions_total", family: "snowflake_sequence_exhaustions_total"}
	refusalSeries    = series{name: "snowflake_refusals_total", family: "snowflake_refusals_total", sum: true}
	// nodeSeries are compared node by node; issued IDs first.
	nodeSeries = []series{
		{name: "snowflake_ids_issued_total", family: "snowflake_ids_issued_total"},
		rewinds("waited"), rewinds("logical"), rewinds("refused"),
		exhaustionSeries,
		waits("rewind"), waits("sequence_exhausted"),
		refusalSeries,
	}
)

// metricsPoller reads the run's /metrics every 50 ms and keeps, per node
// and series, the last value it served. A node's series vanish when its
// run ends, so what is kept is the node's final state.
type metricsPoller struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	last   map[string]map[string]float64
}

func startMetricsPoller(ctx context.Context, url string) *metricsPoller {
	ctx, cancel := context.WithCancel(ctx)
	mp := &metricsPoller{cancel: cancel, done: make(chan struct{}), last: map[string]map[string]float64{}}
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(mp.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if nodes, err := scrapeNodes(ctx, client, url); err == nil {
				mp.mu.Lock()
				// Merge series by series: the scrape that races a node's
				// removal at the end of its run may hold only some of them.
				for n, v := range nodes {
					if mp.last[n] == nil {
						mp.last[n] = map[string]float64{}
					}
					for k, x := range v {
						mp.last[n][k] = x
					}
				}
				mp.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return mp
}

// stop ends the polling and returns the last values per node.
func (mp *metricsPoller) stop() map[string]map[string]float64 {
	mp.cancel()
	<-mp.done
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.last
}

// scrapeNodes reads url (the text format) and returns nodeSeries per node.
func scrapeNodes(ctx context.Context, client *http.Client, url string) (map[string]map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, s := range nodeSeries {
		fam := fams[s.family]
		if fam == nil {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			node := labels[telemetry.NodeLabel]
			if node == "" || (s.label != "" && labels[s.label] != s.value) {
				continue
			}
			if out[node] == nil {
				out[node] = map[string]float64{}
			}
			out[node][s.key()] += sampleValue(m)
		}
	}
	return out, nil
}

// sampleValue is a counter's value or a histogram's count.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// promPlaceholder holds a free loopback port for the run's metrics, so
// that Prometheus can be pointed at it before the run starts: until
// release it answers every request 503 (a failed scrape, up == 0);
// release closes it and frees the port.
func promPlaceholder(t *testing.T) (addr string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the run has not started", http.StatusServiceUnavailable)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = srv.Close()
			<-done
		})
	}
	t.Cleanup(release)
	return ln.Addr().String(), release
}

// promSyncBuf is a bytes.Buffer safe for the run's and the test's
// goroutines.
type promSyncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *promSyncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written.
func (s *promSyncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
