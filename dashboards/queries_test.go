package dashboards_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/snowchaos/snowchaos/dashboards"
	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/telemetry"
)

// promqlParser parses PromQL as Prometheus v0.316 does by default.
var promqlParser = parser.NewParser(parser.Options{})

// synthetic are series Prometheus itself adds to every scrape.
var synthetic = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// liveMetricNames instantiates every collector the project exports (a real
// generator with a checkpoint behind the generator collector, the lease
// collector, the harness metrics with a declared scenario, the NTP
// collector fed by a real check against an in-process NTP server, and the
// HTTP node's metrics), gathers them and returns every series name a
// scrape shows, with histograms expanded into _bucket, _sum and _count.
// A metric renamed in its package disappears from this set, so the
// dashboards' tests break.
func liveMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := telemetry.NewRegistry()

	gc := telemetry.NewGeneratorCollector(telemetry.Options{})
	nd, err := node.New(context.Background(), node.Config{
		Checkpoint: generator.NewFileCheckpoint(filepath.Join(t.TempDir(), "mark")),
		Metrics:    gc.MustNode(""),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nd.Stop(context.Background(), true) })
	if _, err := nd.Issue(context.Background(), make([]generator.ID, 1)); err != nil {
		t.Fatal(err)
	}

	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	lm := lc.MustNode("")
	lm.SetState(telemetry.LeaseHeld)

	hm := metrics.New()
	hm.Begin(metrics.ScenarioInfo{
		Scenario: "names", Target: "in-process",
		Windows:    []metrics.FaultWindow{{Name: "step", Kind: faults.KindStep}},
		Invariants: []string{"no_duplicates"},
	})

	ntpAddr := chronytest.StartFake(t, chronytest.Fake{Offset: 3 * time.Millisecond})
	nc := ntpcheck.NewCollector(ntpAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := ntpcheck.Check(ctx, ntpcheck.Config{Servers: []string{ntpAddr}, Samples: 1, SampleGap: -1})
	if rep.Usable != 1 {
		t.Fatalf("NTP check against the in-process server: %d usable servers: %+v", rep.Usable, rep.Servers)
	}
	nc.Observe(rep)

	reg.MustRegister(gc, lc, hm, nc, server.NTPBudget(ntpcheck.DefaultStepThreshold))
	if _, err := server.New(server.Config{Node: nd, Registry: reg}); err != nil {
		t.Fatal(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range synthetic {
		names[s] = true
	}
	for _, mf := range mfs {
		n := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[n], names[n+"_sum"], names[n+"_count"] = true, true, true
		default:
			names[n] = true
		}
	}
	return names
}

// allQueries returns every query of every generated dashboard.
func allQueries(t *testing.T) []dashboards.Query {
	t.Helper()
	files, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	var qs []dashboards.Query
	for _, f := range files {
		q, err := dashboards.Queries(f.JSON)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q...)
	}
	if len(qs) == 0 {
		t.Fatal("no queries found")
	}
	return qs
}

// metricNames parses expr and returns the metric names its selectors
// name; a selector without a metric name is an error.
func metricNames(expr string) ([]string, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" && name == "" {
				name = m.Value
			}
		}
		if name == "" {
			bad = &selectorError{vs.String()}
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

type selectorError struct{ sel string }

func (e *selectorError) Error() string { return "selector " + e.sel + " names no metric" }

// TestQueriesParseAndNameLiveMetrics: every panel and annotation query
// parses as PromQL (after Grafana's variables are substituted) and names
// only metrics that the project's collectors really export; every variable
// query is label_values over such a metric.
func TestQueriesParseAndNameLiveMetrics(t *testing.T) {
	live := liveMetricNames(t)
	used := map[string]bool{}
	for _, q := range allQueries(t) {
		if q.Kind == dashboards.KindVariable {
			metric, label, err := dashboards.LabelValues(q.Expr)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			if metric == "" || !live[metric] {
				t.Errorf("%s: label_values over %q, which no collector exports", q, metric)
			}
			if label != dashboards.InstanceVar {
				t.Errorf("%s: label %q, want %q", q, label, dashboards.InstanceVar)
			}
			continue
		}
		if strings.TrimSpace(q.Expr) == "" {
			t.Errorf("%s: empty expression", q)
			continue
		}
		expr := dashboards.Expand(q.Expr, time.Minute, ".*")
		if strings.Contains(expr, "$") {
			t.Errorf("%s: unexpanded variable in %q", q, expr)
		}
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q, expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q, expr)
		}
		for _, n := range names {
			used[n] = true
			if !live[n] {
				t.Errorf("%s: metric %s is not exported by any snowchaos collector (renamed? see docs/metrics.md)", q, n)
			}
		}
	}
	// The dashboards cover every generator, lease, NTP and harness series
	// family they are meant to show.
	for _, want := range []string{
		"snowflake_ids_issued_total", "snowflake_clock_rewinds_total", "snowflake_clock_rewind_size_seconds_bucket",
		"snowflake_wait_seconds_bucket", "snowflake_sequence_exhaustions_total", "snowflake_logical_lead_seconds",
		"snowflake_refusals_total", "snowflake_ready", "snowflake_checkpoint_mark_timestamp_seconds",
		"snowflake_lease_state", "snowflake_lease_expiry_timestamp_seconds",
		"snowflake_ntp_offset_seconds", "snowflake_ntp_rtt_seconds", "snowflake_ntp_root_distance_seconds",
		"snowflake_ntp_stratum", "snowflake_ntp_leap",
		"snowchaos_ids_checked_total", "snowchaos_duplicates_total", "snowchaos_order_violations_total",
		"snowchaos_faults_injected_total", "snowchaos_fault_window", "snowchaos_scenario_info", "snowchaos_verdict",
	} {
		if !used[want] {
			t.Errorf("no dashboard query uses %s", want)
		}
	}
}

// TestMetricNamesCatchesRenames guards the check itself: an unknown
// metric is reported, a bare selector is an error.
func TestMetricNamesCatchesRenames(t *testing.T) {
	names, err := metricNames(`sum(rate(snowflake_renamed_total{instance=~".*"}[1m])) / on() group_left snowflake_ready`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"snowflake_renamed_total", "snowflake_ready"}) {
		t.Fatalf("names = %v", names)
	}
	if _, err := metricNames(`{instance="x"}`); err == nil {
		t.Fatal("a selector without a metric name passed")
	}
	if _, err := metricNames(`rate(x[$__rate_interval])`); err == nil {
		t.Fatal("an unexpanded Grafana variable parsed")
	}
}

// panelJSON is the part of a rendered panel the layout checks read.
type panelJSON struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds *struct {
				Steps []struct {
					Value *float64 `json:"value"`
					Color string   `json:"color"`
				} `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				ThresholdsStyle *struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Options struct {
		ColorMode string `json:"colorMode"`
		Legend    *struct {
			ShowLegend bool `json:"showLegend"`
		} `json:"legend"`
	} `json:"options"`
	Targets []struct {
		RefID      string `json:"refId"`
		Exemplar   *bool  `json:"exemplar"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

type dashJSON struct {
	UID        string      `json:"uid"`
	Timezone   string      `json:"timezone"`
	Panels     []panelJSON `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"annotations"`
}

func loadDashboards(t *testing.T) map[string]dashJSON {
	t.Helper()
	files, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dashJSON{}
	for _, f := range files {
		var d dashJSON
		if err := json.Unmarshal(f.JSON, &d); err != nil {
			t.Fatal(err)
		}
		out[d.UID] = d
	}
	return out
}

// TestDashboardShape checks what the issue asks of each dashboard: its
// panels, UTC, the data source and instance variables, units, legends,
// thresholds, exemplars and annotations, and a sane grid.
func TestDashboardShape(t *testing.T) {
	ds := loadDashboards(t)
	want := map[string][]string{
		dashboards.GeneratorUID: {
			"IDs issued per second", "Readiness", "Refusals per second by reason", "Nodes",
			"Clock rewinds by outcome", "Rewind size", "Rewind size p50 / p99 and last", "Logical-clock lead",
			"Wait time by reason, p50 / p99", "Sequence exhaustions per second",
			"Checkpoint mark ahead of the wall clock", "Checkpoint writes per second",
			"Lease state", "Lease time to expiry", "Lease renewals per second",
			"NTP offset", "NTP round-trip time", "NTP root distance", "NTP stratum", "NTP leap indicator",
		},
		dashboards.HarnessUID: {
			"Duplicates", "Order violations", "IDs checked", "Scenario", "Verdicts",
			"IDs checked per second", "Duplicates and order violations", "Faults injected by kind", "Fault windows",
		},
	}
	wantAnnotations := map[string][]string{
		dashboards.GeneratorUID: {"Rewinds", "Faults injected"},
		dashboards.HarnessUID:   {"Faults injected", "Fault windows"},
	}
	if len(ds) != len(want) {
		t.Fatalf("%d dashboards, want %d", len(ds), len(want))
	}
	for uid, d := range ds {
		if d.Timezone != "utc" {
			t.Errorf("%s: timezone %q, want utc", uid, d.Timezone)
		}
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Type+":"+v.Name)
		}
		if !slices.Equal(vars, []string{"datasource:" + dashboards.DatasourceVar, "query:" + dashboards.InstanceVar}) {
			t.Errorf("%s: variables %v", uid, vars)
		}
		var annos []string
		for _, a := range d.Annotations.List {
			annos = append(annos, a.Name)
		}
		for _, a := range wantAnnotations[uid] {
			if !slices.Contains(annos, a) {
				t.Errorf("%s: no %q annotation (have %v)", uid, a, annos)
			}
		}
		var titles []string
		ids := map[int]bool{}
		type cell struct{ x, y int }
		used := map[cell]string{}
		for _, p := range d.Panels {
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("%s: panel %q: id %d missing or reused", uid, p.Title, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q: bad gridPos %+v", uid, p.Title, g)
			}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := used[cell{x, y}]; ok {
						t.Errorf("%s: panels %q and %q overlap at (%d,%d)", uid, other, p.Title, x, y)
					}
					used[cell{x, y}] = p.Title
				}
			}
			if p.Type == "row" {
				continue
			}
			titles = append(titles, p.Title)
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", uid, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${"+dashboards.DatasourceVar+"}" {
					t.Errorf("%s: panel %q %s: data source not the $%s variable", uid, p.Title, tg.RefID, dashboards.DatasourceVar)
				}
			}
			if p.Type == "timeseries" {
				if p.FieldConfig.Defaults.Unit == "" {
					t.Errorf("%s: panel %q has no unit", uid, p.Title)
				}
				if p.Options.Legend == nil || !p.Options.Legend.ShowLegend {
					t.Errorf("%s: panel %q shows no legend", uid, p.Title)
				}
			}
		}
		if !slices.Equal(titles, want[uid]) {
			t.Errorf("%s: panels\n got %q\nwant %q", uid, titles, want[uid])
		}
	}

	byTitle := func(uid, title string) panelJSON {
		for _, p := range ds[uid].Panels {
			if p.Title == title {
				return p
			}
		}
		t.Fatalf("%s: no panel %q", uid, title)
		return panelJSON{}
	}
	// Exemplars on the rewind size and wait panels.
	for _, title := range []string{"Rewind size", "Rewind size p50 / p99 and last", "Wait time by reason, p50 / p99"} {
		p := byTitle(dashboards.GeneratorUID, title)
		if p.Targets[0].Exemplar == nil || !*p.Targets[0].Exemplar {
			t.Errorf("panel %q: exemplars not enabled", title)
		}
	}
	// The NTP budget as threshold lines at ±budget.
	off := byTitle(dashboards.GeneratorUID, "NTP offset")
	var steps []float64
	if th := off.FieldConfig.Defaults.Thresholds; th != nil {
		for _, s := range th.Steps {
			if s.Value != nil {
				steps = append(steps, *s.Value)
			}
		}
	}
	sort.Float64s(steps)
	if !slices.Equal(steps, []float64{-dashboards.NTPBudget, dashboards.NTPBudget}) || dashboards.NTPBudget != 0.128 {
		t.Errorf("NTP offset thresholds %v, want ±%v (128 ms)", steps, dashboards.NTPBudget)
	}
	if s := off.FieldConfig.Defaults.Custom.ThresholdsStyle; s == nil || !strings.Contains(s.Mode, "dashed") && !strings.Contains(s.Mode, "line") {
		t.Errorf("NTP offset: thresholds not drawn as lines: %+v", s)
	}
	// Duplicates: a big red stat from one on.
	dup := byTitle(dashboards.HarnessUID, "Duplicates")
	if dup.Type != "stat" || !strings.HasPrefix(dup.Options.ColorMode, "background") {
		t.Errorf("Duplicates: type %s colorMode %s, want a stat coloured as background", dup.Type, dup.Options.ColorMode)
	}
	if th := dup.FieldConfig.Defaults.Thresholds; th == nil || len(th.Steps) != 2 || th.Steps[1].Color != "red" || *th.Steps[1].Value != 1 {
		t.Errorf("Duplicates: thresholds %+v, want red from 1", dup.FieldConfig.Defaults.Thresholds)
	}
}

// TestExpand covers Grafana's variables.
func TestExpand(t *testing.T) {
	got := dashboards.Expand(`rate(x{instance=~"$instance"}[$__rate_interval]) + y{instance=~"${instance}"}[${__range}] offset $__interval`, 90*time.Second, "a|b")
	want := `rate(x{instance=~"a|b"}[1m30s]) + y{instance=~"a|b"}[1m30s] offset 1m30s`
	if got != want {
		t.Fatalf("Expand:\n got %s\nwant %s", got, want)
	}
}

// TestLabelValues covers the variable-query parser.
func TestLabelValues(t *testing.T) {
	for _, c := range []struct{ in, metric, label string }{
		{"label_values(up, instance)", "up", "instance"},
		{" label_values(job) ", "", "job"},
	} {
		m, l, err := dashboards.LabelValues(c.in)
		if err != nil || m != c.metric || l != c.label {
			t.Errorf("LabelValues(%q) = %q, %q, %v", c.in, m, l, err)
		}
	}
	for _, bad := range []string{"up", "label_values(a, b, c)", "query_result(up)"} {
		if _, _, err := dashboards.LabelValues(bad); err == nil {
			t.Errorf("LabelValues(%q) accepted", bad)
		}
	}
}
