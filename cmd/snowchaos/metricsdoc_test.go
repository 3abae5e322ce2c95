package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
)

// updateDocs rewrites the generated reference docs (make docs).
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/metrics.md from what the commands serve")

// metricsDoc is the generated metrics reference and its template.
const (
	metricsDoc      = "../../docs/metrics.md"
	metricsTemplate = "testdata/metrics.md.tmpl"
)

// instanceLabels are labels whose values come from the deployment or the
// scenario (a node's name, an NTP server, a worker ID): the reference
// names them without values. Every other label's values are listed as
// served, which are the known values every collector sets up at start.
var instanceLabels = map[string]bool{
	"node": true, "server": true, "scenario": true, "target": true, "invariant": true, "window": true,
	"worker_id": true, "datacenter_id": true, "layout": true, "policy": true,
	"snowchaos_fault_window/kind": true, // the scenario's fault windows
}

// servedBy is one command's /metrics, parsed.
type servedBy struct {
	cmd      string
	families map[string]*dto.MetricFamily
}

// TestMetricsReference generates the metrics reference from what the
// commands really serve, scraped from their /metrics: `snowchaos serve`
// with a lease and NTP checks, `snowchaos run --metrics-addr` and
// `snowchaos ntp check --watch --metrics-addr`; every family's name, type,
// help and labels (with their known values), by command. It fails when
// docs/metrics.md differs; `make docs` (-update-docs) rewrites it.
func TestMetricsReference(t *testing.T) {
	if testing.Short() {
		t.Skip("starts snowchaos serve, run and ntp check")
	}
	ntpAddr := chronytest.StartFake(t, chronytest.Fake{Offset: 2 * time.Millisecond, Stratum: 2})
	sources := []servedBy{scrapeServe(t, ntpAddr), scrapeRun(t), scrapeNTPCheck(t, ntpAddr)}
	got := renderMetricsDoc(t, sources)
	if *updateDocs {
		if err := os.WriteFile(metricsDoc, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the commands serve (run make docs and review the diff):\n%s", metricsDoc, testenv.FirstDiff(want, got, "file", "now"))
	}
}

// scrape parses url's text exposition, without the Go runtime and process
// families (client_golang's, documented by reference).
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	for name := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			delete(fams, name)
		}
	}
	return fams
}

// scrapeUntil scrapes url until the family want is served.
func scrapeUntil(t *testing.T, url, want string) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	testenv.WaitFor(t, 30*time.Second, func() bool {
		fams = scrape(t, url)
		return fams[want] != nil
	}, "%s never served %s", url, want)
	return fams
}

func scrapeServe(t *testing.T, ntpAddr string) servedBy {
	url, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--lease", "memory", "--worker", "3",
		"--checkpoint", filepath.Join(t.TempDir(), "mark"), "--ntp-server", ntpAddr, "--ntp-interval", "1h")
	fams := scrapeUntil(t, url+"/metrics", "snowflake_ntp_offset_seconds")
	if code := stop(); code != exitOK {
		t.Fatalf("serve exit %d:\n%s", code, stderr)
	}
	return servedBy{"serve", fams}
}

// urlIn waits until out holds a match of re and returns its group.
func urlIn(t *testing.T, out *testenv.SyncBuffer, re *regexp.Regexp, exited <-chan int) string {
	t.Helper()
	var url string
	testenv.WaitFor(t, 60*time.Second, func() bool {
		select {
		case code := <-exited:
			t.Fatalf("exited %d before serving metrics:\n%s", code, out)
		default:
		}
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	}, "no metrics address in:\n%s", out)
	return url
}

func scrapeRun(t *testing.T) servedBy {
	p := writeScenario(t, "metrics.yaml", `name: metrics
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
faults: [{at: 300ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
targets: [wait]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- dispatch(ctx, []string{"run", "--metrics-addr", "127.0.0.1:0", "--metrics-linger", "2m", p}, &stdout, &stderr)
	}()
	url := urlIn(t, &stderr, regexp.MustCompile(`serving the final metrics at (http://\S+)`), exited)
	fams := scrape(t, url)
	cancel()
	if code := <-exited; code != exitOK {
		t.Fatalf("run exit %d:\n%s%s", code, &stdout, &stderr)
	}
	return servedBy{"run", fams}
}

func scrapeNTPCheck(t *testing.T, ntpAddr string) servedBy {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- dispatch(ctx, []string{"ntp", "check", "--server", ntpAddr, "--watch", "1h", "--metrics-addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	url := urlIn(t, &stderr, regexp.MustCompile(`serving metrics on (http://\S+)`), exited)
	fams := scrapeUntil(t, url, "snowflake_ntp_offset_seconds")
	cancel()
	<-exited
	return servedBy{"ntp check", fams}
}

// metricRow is one family of the reference.
type metricRow struct {
	Name, Type, Help, Labels, Commands string
}

// metricSection groups families by what defines them.
type metricSection struct {
	Title, Intro string
	Rows         []metricRow
}

// sections in the order of the reference; a family goes to the first
// whose prefix it has.
var metricSections = []struct{ prefix, title, intro string }{
	{"snowflake_lease_", "Worker-ID leases (`snowflake_lease_`)", "Fed by the lease keeper (`lease/leaseobs`) through `telemetry.LeaseMetrics`; served when the node holds a lease (`--lease`)."},
	{"snowflake_ntp_", "NTP checks (`snowflake_ntp_`)", "Defined by `ntpcheck`; served by `snowchaos serve --ntp-server` and `snowchaos ntp check --watch --metrics-addr`."},
	{"snowflake_http_", "HTTP (`snowflake_http_`)", "Defined by `server`: one series per route and status code the node serves."},
	{"snowflake_", "Generator (`snowflake_`)", "Defined by `telemetry.GeneratorCollector`: counters and gauges are read from `Generator.Stats()` at scrape time; the histograms and `snowflake_refusals_total` are fed by `telemetry.NodeMetrics`, the generator's Observer, on rare events."},
	{"snowchaos_", "Harness (`snowchaos_`)", "Fed by the harness through `harness/metrics`' Collector while `snowchaos run --metrics-addr` runs. Counters accumulate over the scenarios a process runs; `snowchaos_scenario_info` and `snowchaos_fault_window` describe the current scenario; verdicts of earlier scenarios stay."},
}

// renderMetricsDoc merges what the commands serve into the reference.
func renderMetricsDoc(t *testing.T, sources []servedBy) []byte {
	t.Helper()
	type merged struct {
		typ, help string
		labels    []string            // in order of first appearance
		values    map[string][]string // label -> sorted values
		byCmd     map[string][]string // label -> commands serving it
		cmds      []string
	}
	all := map[string]*merged{}
	for _, src := range sources {
		for name, f := range src.families {
			m := all[name]
			if m == nil {
				m = &merged{typ: strings.ToLower(f.GetType().String()), help: f.GetHelp(), values: map[string][]string{}, byCmd: map[string][]string{}}
				all[name] = m
			}
			if typ := strings.ToLower(f.GetType().String()); typ != m.typ || f.GetHelp() != m.help {
				t.Fatalf("%s: %s serves it as %s %q, another command as %s %q", name, src.cmd, typ, f.GetHelp(), m.typ, m.help)
			}
			m.cmds = append(m.cmds, src.cmd)
			for _, s := range f.GetMetric() {
				for _, lp := range s.GetLabel() {
					l := lp.GetName()
					if !slices.Contains(m.labels, l) {
						m.labels = append(m.labels, l)
					}
					if !slices.Contains(m.byCmd[l], src.cmd) {
						m.byCmd[l] = append(m.byCmd[l], src.cmd)
					}
					if !slices.Contains(m.values[l], lp.GetValue()) {
						m.values[l] = append(m.values[l], lp.GetValue())
					}
				}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	secs := make([]metricSection, len(metricSections))
	for i, s := range metricSections {
		secs[i] = metricSection{Title: s.title, Intro: s.intro}
	}
	for _, n := range names {
		m := all[n]
		i := slices.IndexFunc(metricSections, func(s struct{ prefix, title, intro string }) bool { return strings.HasPrefix(n, s.prefix) })
		if i < 0 {
			t.Fatalf("%s: no section of the reference takes this prefix (add one to metricSections)", n)
		}
		var labels []string
		for _, l := range m.labels {
			cell := "`" + l + "`"
			if !instanceLabels[l] && !instanceLabels[n+"/"+l] {
				vals := slices.Clone(m.values[l])
				sort.Strings(vals)
				cell += " = `" + strings.Join(vals, "`, `") + "`"
			}
			if len(m.byCmd[l]) < len(m.cmds) {
				cell += " (" + strings.Join(m.byCmd[l], ", ") + " only)"
			}
			labels = append(labels, cell)
		}
		secs[i].Rows = append(secs[i].Rows, metricRow{
			Name: n, Type: m.typ, Help: strings.ReplaceAll(m.help, "|", `\|`),
			Labels: strings.Join(labels, "; "), Commands: strings.Join(m.cmds, ", "),
		})
	}
	tmpl, err := template.ParseFiles(metricsTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, struct{ Sections []metricSection }{secs}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
