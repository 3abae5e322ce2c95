package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// scripted drives three generators (wait, refuse, logical policies) of a
// per-node collector through exhaustion, rewinds, waits and a refusal.
type scripted struct {
	clk                   *scriptClock
	coll                  *telemetry.GeneratorCollector
	wait, refuse, logical *generator.Generator
}

func runScript(t *testing.T, coll *telemetry.GeneratorCollector) *scripted {
	t.Helper()
	s := &scripted{clk: newScriptClock(), coll: coll}
	mk := func(name string, p generator.Policy, node int64) *generator.Generator {
		n, err := coll.Node(name)
		if err != nil {
			t.Fatal(err)
		}
		g := newGen(t, s.clk, n, p, node)
		n.Attach(g)
		return g
	}
	s.wait = mk("wait", generator.PolicyWait, 1)
	s.refuse = mk("refuse", generator.PolicyRefuse, 2)
	s.logical = mk("logical", generator.PolicyLogical, 3)

	for _, g := range []*generator.Generator{s.wait, s.refuse, s.logical} {
		if _, err := g.Next(); err != nil {
			t.Fatal(err)
		}
	}
	// Exhaustion: 5000 IDs cannot fit one 4096-ID tick.
	if n, err := s.wait.NextN(make([]generator.ID, 5000)); err != nil || n != 5000 {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	s.clk.advance(3 * time.Millisecond)
	s.clk.step(-50 * time.Millisecond)
	if _, err := s.wait.Next(); err != nil {
		t.Fatalf("wait policy: %v", err)
	}
	// The wait above moved the clock 50ms on; step back again for the
	// other two generators, whose last tick is older.
	s.clk.step(-80 * time.Millisecond)
	if _, err := s.refuse.Next(); !errors.Is(err, generator.ErrClockBackwards) {
		t.Fatalf("refuse policy: err = %v, want ErrClockBackwards", err)
	}
	if _, err := s.logical.Next(); err != nil {
		t.Fatalf("logical policy: %v", err)
	}
	return s
}

func TestGeneratorSeriesMatchStats(t *testing.T) {
	coll := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true, KeptSpanGap: -1})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(coll)
	s := runScript(t, coll)

	fams := gather(t, reg)
	for _, tc := range []struct {
		node string
		g    *generator.Generator
	}{{"wait", s.wait}, {"refuse", s.refuse}, {"logical", s.logical}} {
		st := tc.g.Stats()
		n := map[string]string{"node": tc.node}
		with := func(k, v string) map[string]string { return map[string]string{"node": tc.node, k: v} }
		checks := []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"snowflake_ids_issued_total", n, float64(st.Issued)},
			{"snowflake_clock_rewinds_total", with("outcome", "waited"), float64(st.RewindsWaited)},
			{"snowflake_clock_rewinds_total", with("outcome", "logical"), float64(st.RewindsLogical)},
			{"snowflake_clock_rewinds_total", with("outcome", "refused"), float64(st.RewindsRefused)},
			{"snowflake_clock_rewind_size_seconds", n, float64(st.RewindsWaited + st.RewindsLogical + st.RewindsRefused)},
			{"snowflake_last_rewind_timestamp_seconds", n, float64(st.LastRewindWall) / 1e9},
			{"snowflake_last_rewind_size_seconds", n, st.LastRewindBy.Seconds()},
			{"snowflake_sequence_exhaustions_total", n, float64(st.Exhaustions)},
			{"snowflake_logical_lead_seconds", n, st.Lead.Seconds()},
			{"snowflake_logical_lead_max_seconds", n, st.MaxLead.Seconds()},
			{"snowflake_checkpoint_writes_total", with("result", "ok"), float64(st.CheckpointWrites)},
			{"snowflake_checkpoint_writes_total", with("result", "error"), float64(st.CheckpointErrors)},
			{"snowflake_checkpoint_mark_timestamp_seconds", n, 0},
		}
		for _, c := range checks {
			if got := value(sample(t, fams, c.name, c.labels)); got != c.want {
				t.Errorf("%s%v = %v, want %v (Stats %+v)", c.name, c.labels, got, c.want, st)
			}
		}
		var refusals float64
		for _, r := range telemetry.RefusalReasons() {
			refusals += value(sample(t, fams, "snowflake_refusals_total", with("reason", r)))
		}
		if refusals != float64(st.Refusals) {
			t.Errorf("%s: sum of snowflake_refusals_total = %v, Stats.Refusals = %d", tc.node, refusals, st.Refusals)
		}
		ready := 0.0
		if tc.g.Ready() == nil {
			ready = 1
		}
		if got := value(sample(t, fams, "snowflake_ready", n)); got != ready {
			t.Errorf("%s: snowflake_ready = %v, want %v", tc.node, got, ready)
		}
	}

	// What the script did, independently of Stats.
	want := []struct {
		name   string
		labels map[string]string
		v      float64
	}{
		{"snowflake_clock_rewinds_total", map[string]string{"node": "wait", "outcome": "waited"}, 1},
		{"snowflake_clock_rewinds_total", map[string]string{"node": "refuse", "outcome": "refused"}, 1},
		{"snowflake_clock_rewinds_total", map[string]string{"node": "logical", "outcome": "logical"}, 1},
		{"snowflake_wait_seconds", map[string]string{"node": "wait", "reason": "rewind"}, 1},
		{"snowflake_wait_seconds", map[string]string{"node": "wait", "reason": "sequence_exhausted"}, 1},
		{"snowflake_sequence_exhaustions_total", map[string]string{"node": "wait"}, 1},
		{"snowflake_refusals_total", map[string]string{"node": "refuse", "reason": "clock_backwards"}, 1},
		{"snowflake_ids_issued_total", map[string]string{"node": "wait"}, 5002},
		{"snowflake_ready", map[string]string{"node": "refuse"}, 0},
		{"snowflake_worker_info", map[string]string{"node": "logical", "worker_id": "3", "datacenter_id": "", "layout": "41/10/12", "policy": "logical"}, 1},
	}
	for _, w := range want {
		if got := value(sample(t, fams, w.name, w.labels)); got != w.v {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.v)
		}
	}
	// The rewind wait slept the 50ms step (rounded up to the next tick).
	h := sample(t, fams, "snowflake_wait_seconds", map[string]string{"node": "wait", "reason": "rewind"}).GetHistogram()
	if s := h.GetSampleSum(); s < 0.045 || s > 0.052 {
		t.Errorf("rewind wait sum = %vs, want about 0.047 (the 50ms step less the 3ms advance)", s)
	}
	if lead := value(sample(t, fams, "snowflake_logical_lead_seconds", map[string]string{"node": "logical"})); lead <= 0 {
		t.Errorf("logical lead = %v, want > 0 after the step back", lead)
	}
}

func TestEveryKnownLabelValueFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{})
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	reg.MustRegister(gc, lc)
	gc.MustNode("")
	lc.MustNode("")
	fams := gather(t, reg)
	counts := map[string]int{
		"snowflake_ids_issued_total":                  1,
		"snowflake_clock_rewinds_total":               3,
		"snowflake_clock_rewind_size_seconds":         1,
		"snowflake_last_rewind_timestamp_seconds":     1,
		"snowflake_wait_seconds":                      2,
		"snowflake_sequence_exhaustions_total":        1,
		"snowflake_logical_lead_seconds":              1,
		"snowflake_refusals_total":                    len(telemetry.RefusalReasons()),
		"snowflake_checkpoint_writes_total":           2,
		"snowflake_checkpoint_mark_timestamp_seconds": 1,
		"snowflake_ready":                             1,
		"snowflake_lease_state":                       4,
		"snowflake_lease_expiry_timestamp_seconds":    1,
		"snowflake_lease_renewals_total":              3,
		"snowflake_lease_handoff_wait_seconds":        1,
		"snowflake_lease_peer_clock_skew_seconds":     1,
		"snowflake_lease_peer_clock_peers":            1,
		"snowflake_lease_peer_clock_refusals_total":   1,
	}
	for name, want := range counts {
		mf, ok := fams[name]
		if !ok {
			t.Errorf("%s missing before any event", name)
			continue
		}
		if got := len(mf.GetMetric()); got != want {
			t.Errorf("%s has %d series, want %d", name, got, want)
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == telemetry.NodeLabel {
					t.Errorf("%s carries a node label in single mode", name)
				}
			}
		}
	}
	if _, ok := fams["snowflake_worker_info"]; ok {
		t.Error("snowflake_worker_info exported before a generator was attached")
	}
}

// fullRegistry registers every collector (per-node generator and lease
// collectors with scripted data) on a served registry.
func fullRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := telemetry.NewRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true})
	lc := telemetry.NewLeaseCollector(telemetry.Options{PerNode: true})
	reg.MustRegister(gc, lc)
	runScript(t, gc)
	lm := lc.MustNode("wait")
	lm.SetState(telemetry.LeaseHeld)
	lm.SetExpiry(time.Unix(1_800_000_000, 0))
	lm.ObserveRenewal(telemetry.RenewalOK)
	lm.ObserveHandoffWait(30 * time.Millisecond)
	lm.ObservePeerCheck(-20*time.Millisecond, 2, false)
	return reg
}

func TestLint(t *testing.T) {
	for name, reg := range map[string]prometheus.Gatherer{
		"per-node": fullRegistry(t),
		"single": func() prometheus.Gatherer {
			reg := telemetry.NewRegistry()
			gc := telemetry.NewGeneratorCollector(telemetry.Options{})
			lc := telemetry.NewLeaseCollector(telemetry.Options{})
			reg.MustRegister(gc, lc)
			n := gc.MustNode("")
			n.Attach(newGen(t, newScriptClock(), n, generator.PolicyWait, 9))
			lc.MustNode("")
			return reg
		}(),
	} {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: lint: %s: %s", name, p.Metric, p.Text)
		}
	}
}

func scrape(t *testing.T, url, accept string) (string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body), resp.Header.Get("Content-Type")
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := promtest.Binary(t, "promtool")
	srv := httptest.NewServer(telemetry.Handler(fullRegistry(t)))
	defer srv.Close()
	body, _ := scrape(t, srv.URL+"/metrics", "")
	for _, name := range []string{"snowflake_ids_issued_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.TrimSpace(out.String()) != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}

func TestServe(t *testing.T) {
	reg := fullRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := telemetry.Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	body, ctype := scrape(t, "http://"+addr+"/metrics", "application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Errorf("Content-Type = %q, want OpenMetrics", ctype)
	}
	if !strings.HasSuffix(body, "# EOF\n") || !strings.Contains(body, "snowflake_clock_rewinds_total{node=\"wait\",outcome=\"waited\"} 1") {
		t.Errorf("unexpected OpenMetrics body:\n%.2000s", body)
	}
	cancel()
	// The listener closes once the graceful shutdown is done.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still answering 10s after its context ended")
		}
		runtime.Gosched()
	}
}

func TestListenShutdown(t *testing.T) {
	s, err := telemetry.Listen("127.0.0.1:0", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := scrape(t, s.URL(), "")
	if body != "" {
		t.Errorf("empty registry served %q", body)
	}
	if err := s.Shutdown(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Shutdown")
	}
	if _, err := telemetry.Listen(s.Addr(), prometheus.NewRegistry()); err != nil {
		t.Logf("re-listen on the freed port: %v (another process may have taken it)", err)
	}
}

func TestAttachCarriesCountersAcrossRestarts(t *testing.T) {
	gc := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true})
	n := gc.MustNode("n1")
	clk := newScriptClock()
	g1 := newGen(t, clk, n, generator.PolicyWait, 1)
	n.Attach(g1)
	if _, err := g1.NextN(make([]generator.ID, 10)); err != nil {
		t.Fatal(err)
	}
	n.Detach()
	if got := n.Stats().Issued; got != 10 {
		t.Fatalf("after Detach Issued = %d, want 10", got)
	}
	clk.advance(time.Millisecond)
	g2 := newGen(t, clk, n, generator.PolicyWait, 1)
	n.Attach(g2)
	if _, err := g2.NextN(make([]generator.ID, 5)); err != nil {
		t.Fatal(err)
	}
	g3 := newGen(t, clk, n, generator.PolicyWait, 1)
	clk.advance(time.Millisecond)
	n.Attach(g3) // replaces g2 without Detach
	if _, err := g3.Next(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gc)
	if got := value(sample(t, gather(t, reg), "snowflake_ids_issued_total", map[string]string{"node": "n1"})); got != 16 {
		t.Errorf("issued across restarts = %v, want 16", got)
	}
}

func TestNodeLimits(t *testing.T) {
	single := telemetry.NewGeneratorCollector(telemetry.Options{})
	if _, err := single.Node("a"); !errors.Is(err, telemetry.ErrNodeName) {
		t.Errorf("single mode Node(a): %v, want ErrNodeName", err)
	}
	multi := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true, MaxNodes: 2})
	if _, err := multi.Node(""); !errors.Is(err, telemetry.ErrNodeName) {
		t.Errorf("per-node Node(\"\"): %v, want ErrNodeName", err)
	}
	a1 := multi.MustNode("a")
	multi.MustNode("b")
	if a2 := multi.MustNode("a"); a1 != a2 {
		t.Error("Node(a) twice returned different NodeMetrics")
	}
	if _, err := multi.Node("c"); !errors.Is(err, telemetry.ErrTooManyNodes) {
		t.Errorf("third node: %v, want ErrTooManyNodes", err)
	}
	multi.RemoveNode("b")
	multi.MustNode("c")
	if got := strings.Join(multi.Nodes(), ","); got != "a,c" {
		t.Errorf("Nodes = %s, want a,c", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(multi)
	for _, m := range gather(t, reg)["snowflake_refusals_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "b" {
			t.Error("removed node b still exported")
		}
	}
	lc := telemetry.NewLeaseCollector(telemetry.Options{PerNode: true, MaxNodes: 1})
	lc.MustNode("a")
	if _, err := lc.Node("b"); !errors.Is(err, telemetry.ErrTooManyNodes) {
		t.Errorf("lease: %v, want ErrTooManyNodes", err)
	}
}

func TestNilSafe(t *testing.T) {
	var n *telemetry.NodeMetrics
	n.Rewind(context.Background(), generator.RewindEvent{})
	n.Wait(context.Background(), generator.WaitRewind, 0, time.Millisecond)
	n.Refused(context.Background(), generator.ErrClosed)
	n.Attach(nil)
	n.Detach()
	var l *telemetry.LeaseMetrics
	l.SetState(telemetry.LeaseHeld)
	l.SetExpiry(time.Now())
	l.ObserveRenewal(telemetry.RenewalOK)
	l.ObserveHandoffWait(time.Second)
	l.ObservePeerCheck(time.Second, 1, true)
}

func TestRefusalReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&generator.RewindError{Err: generator.ErrClockBackwards}, "clock_backwards"},
		{&generator.RewindError{Err: generator.ErrWaitExceeded}, "wait_exceeded"},
		{&generator.RewindError{Err: generator.ErrLeadExceeded}, "lead_exceeded"},
		{fmt.Errorf("%w: %w", generator.ErrWaitExceeded, context.Canceled), "canceled"},
		{fmt.Errorf("%w: %w", generator.ErrWaitExceeded, context.DeadlineExceeded), "deadline"},
		{fmt.Errorf("%w: lease lost", generator.ErrFenced), "fenced"},
		{generator.ErrCheckpoint, "checkpoint"},
		{generator.ErrClosed, "closed"},
		{generator.ErrLifetime, "lifetime"},
		{generator.ErrBeforeEpoch, "before_epoch"},
		{errors.New("boom"), "other"},
	} {
		if got := telemetry.RefusalReason(tc.err); got != tc.want {
			t.Errorf("RefusalReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestLeaseMetrics(t *testing.T) {
	lc := telemetry.NewLeaseCollector(telemetry.Options{PerNode: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(lc)
	m := lc.MustNode("n1")
	m.SetState(telemetry.LeaseHeld)
	m.SetState(telemetry.LeaseLost)
	m.ObserveRenewal(telemetry.RenewalOK)
	m.ObserveRenewal(telemetry.RenewalLost)
	m.ObserveRenewal("bogus")
	m.SetExpiry(time.Unix(1_800_000_000, 500_000_000))
	m.ObserveHandoffWaitContext(context.Background(), 2*time.Second)
	fams := gather(t, reg)
	for state, want := range map[string]float64{"held": 0, "renewing": 0, "lost": 1, "released": 0} {
		if got := value(sample(t, fams, "snowflake_lease_state", map[string]string{"node": "n1", "state": state})); got != want {
			t.Errorf("lease_state{%s} = %v, want %v", state, got, want)
		}
	}
	for res, want := range map[string]float64{"ok": 1, "error": 1, "lost": 1} {
		if got := value(sample(t, fams, "snowflake_lease_renewals_total", map[string]string{"result": res})); got != want {
			t.Errorf("renewals{%s} = %v, want %v", res, got, want)
		}
	}
	if got := value(sample(t, fams, "snowflake_lease_expiry_timestamp_seconds", nil)); got != 1_800_000_000.5 {
		t.Errorf("expiry = %v", got)
	}
	if got := sample(t, fams, "snowflake_lease_handoff_wait_seconds", nil).GetHistogram().GetSampleSum(); got != 2 {
		t.Errorf("handoff sum = %v", got)
	}
}

// TestConcurrentScrape scrapes while generators issue, rewind, restart
// and refuse, for the race detector.
func TestConcurrentScrape(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true, KeptSpanGap: -1})
	reg.MustRegister(gc)
	clk := newScriptClock()
	n := gc.MustNode("n")
	g := newGen(t, clk, n, generator.PolicyLogical, 1)
	n.Attach(g)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				_, _ = g.Next()
				if i%100 == 0 {
					clk.step(-2 * time.Millisecond)
					clk.advance(3 * time.Millisecond)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	for restarts := 0; ; restarts++ {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
		if restarts%10 == 0 {
			n.Attach(g) // re-attaching the same generator must not double-count
			n.Detach()
			n.Attach(g)
		}
		select {
		case <-done:
			if got, want := n.Stats(), g.Stats(); got.Issued != want.Issued || got.RewindsLogical != want.RewindsLogical {
				t.Errorf("exported Issued %d, RewindsLogical %d; the generator's %d, %d",
					got.Issued, got.RewindsLogical, want.Issued, want.RewindsLogical)
			}
			return
		default:
		}
	}
}
