package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/reference"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/scenarios"
	"github.com/snowchaos/snowchaos/telemetry"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func load(t *testing.T, pattern string) []*scenario.Scenario {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files for %s: %v", pattern, err)
	}
	var suite []*scenario.Scenario
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		suite = append(suite, s)
	}
	return suite
}

func run(t *testing.T, suite []*scenario.Scenario, o harness.Options) *harness.Report {
	t.Helper()
	if err := harness.Prepare(suite, o); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(context.Background(), suite, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func jsonOf(t *testing.T, rep *harness.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := report.JSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDeterministic: the same seed and scenarios give byte-identical JSON,
// whatever the parallelism.
func TestDeterministic(t *testing.T) {
	suite := load(t, "testdata/*.yaml")
	a := jsonOf(t, run(t, suite, harness.Options{Parallel: 1}))
	b := jsonOf(t, run(t, suite, harness.Options{Parallel: 4}))
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of the same suite gave different reports")
	}
	seed := int64(99)
	c := jsonOf(t, run(t, suite, harness.Options{Seed: &seed}))
	if bytes.Equal(a, c) {
		t.Fatal("a different seed gave the same report")
	}
}

// TestGolden compares the terminal matrix and the JSON report of the
// testdata suite with testdata/golden; -update rewrites them.
func TestGolden(t *testing.T) {
	rep := run(t, load(t, "testdata/*.yaml"), harness.Options{})
	if rep.Verdict != harness.Pass {
		var b bytes.Buffer
		report.Terminal(&b, rep)
		t.Fatalf("testdata suite verdict %s:\n%s", rep.Verdict, b.String())
	}
	var txt bytes.Buffer
	if err := report.Terminal(&txt, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/golden/matrix.txt", txt.Bytes())
	golden(t, "testdata/golden/report.json", jsonOf(t, rep))
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update and review the diff):\n%s", path, got)
	}
}

// TestBuiltinSuite runs the embedded suite: every verdict is as expected,
// and each known-bad generator is caught by at least one expectation.
func TestBuiltinSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole suite takes a while under -race; run without -short")
	}
	var suite []*scenario.Scenario
	files, _ := fs.Glob(scenarios.FS, "*.yaml")
	for _, f := range files {
		b, _ := fs.ReadFile(scenarios.FS, f)
		s, err := scenario.Parse(f, b)
		if err != nil {
			t.Fatal(err)
		}
		suite = append(suite, s)
	}
	rep := run(t, suite, harness.Options{})
	if rep.ExitCode() != 0 {
		var b bytes.Buffer
		report.Terminal(&b, rep)
		t.Fatalf("built-in suite: exit %d\n%s", rep.ExitCode(), b.String())
	}
	caught := map[string][]string{}
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			for _, c := range r.Checks {
				if c.Expected && c.Verdict == harness.Pass {
					caught[r.Target] = append(caught[r.Target], sr.Name+": "+c.Expr)
				}
			}
		}
	}
	for _, bad := range reference.All() {
		if len(caught[bad.Name]) == 0 {
			t.Errorf("%s is never caught by the built-in suite", bad.Name)
		} else {
			t.Logf("%s caught in %s", bad.Name, strings.Join(caught[bad.Name], "; "))
		}
	}
}

// TestDroppedExpectation: a known-bad target without its expectation makes
// the run fail.
func TestDroppedExpectation(t *testing.T) {
	src, err := os.ReadFile("testdata/small-step.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "expect:\n  bad-no-rewind-check: {duplicates: \"> 0\"}\n", "", 1)
	s, err := scenario.Parse("edited.yaml", []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	if rep.ExitCode() != 1 {
		t.Fatalf("exit %d, want 1", rep.ExitCode())
	}
	r := rep.Scenarios[0].Runs[2]
	if r.Target != "bad-no-rewind-check" || r.Verdict != harness.Fail || r.Figures.Duplicates == 0 || len(r.Duplicates) == 0 {
		t.Fatalf("run %+v", r)
	}
	d := r.Duplicates[0]
	if !strings.HasPrefix(d.First, "a#") || !strings.HasPrefix(d.Second, "a#") || len(d.Windows) == 0 || d.Windows[0] != "step" {
		t.Fatalf("duplicate without both issuers and its window: %+v", d)
	}
}

// wrapTarget runs in-process nodes under another name, each wrapped.
type wrapTarget struct {
	target.InProcess
	name string
	wrap func(target.Node) target.Node
}

func (w *wrapTarget) Info() target.Info {
	i := w.InProcess.Info()
	i.Name = w.name
	return i
}

func (w *wrapTarget) Start(ctx context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	n, err := w.InProcess.Start(ctx, spec, env)
	if err != nil {
		return nil, err
	}
	return w.wrap(n), nil
}

// test-deaf runs in-process nodes whose clock faults never take effect,
// like a node whose admin API ignores them.
type deafNode struct{ target.Node }

func (n deafNode) Clock() target.ClockControl { return deafClock{n.Node.Clock()} }

type deafClock struct{ target.ClockControl }

func (deafClock) Apply(context.Context, faults.Fault) error { return nil }

// fixedTarget cannot control its nodes' clocks.
type fixedTarget struct{ target.InProcess }

func (f *fixedTarget) Info() target.Info {
	i := f.InProcess.Info()
	i.Name = "test-fixed-clock"
	i.Caps.Faults = []faults.Kind{faults.KindRestart}
	return i
}

func init() {
	target.Register(&wrapTarget{name: "test-deaf", wrap: func(n target.Node) target.Node { return deafNode{n} }})
	target.Register(&fixedTarget{})
}

// TestUnconfirmedFault: a fault that does not take effect makes the checks
// that depend on it unknown (exit 2), never pass.
func TestUnconfirmedFault(t *testing.T) {
	s, err := scenario.Parse("deaf.yaml", []byte(`name: deaf
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
faults: [{at: 200ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0", "availability >= 0.9 during step"]
targets: [test-deaf, wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	deaf, ok := rep.Scenarios[0].Runs[0], rep.Scenarios[0].Runs[1]
	if deaf.Verdict != harness.Unknown || deaf.Faults[0].Confirmed {
		t.Fatalf("deaf run: %+v", deaf)
	}
	for _, c := range deaf.Checks {
		if c.Verdict != harness.Unknown || !strings.Contains(c.Reason, "not confirmed") {
			t.Fatalf("check %+v", c)
		}
	}
	if ok.Verdict != harness.Pass || !ok.Faults[0].Confirmed {
		t.Fatalf("wait run: %+v", ok)
	}
	if rep.ExitCode() != 2 {
		t.Fatalf("exit %d, want 2", rep.ExitCode())
	}
}

// TestValidate: impossible combinations are errors naming file and line.
func TestValidate(t *testing.T) {
	cases := map[string]string{
		"slew on a fixed clock": `name: x
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
faults: [{at: 100ms, kind: slew, by: -100us}]
invariants: ["duplicates == 0"]
targets: [test-fixed-clock]
`,
		"unknown target": `name: x
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: ["duplicates == 0"]
targets: [wiat]
`,
		"load over budget": `name: x
duration: 10s
nodes: [{name: a, worker: 1}]
load: {rate: max}
invariants: ["duplicates == 0"]
`,
	}
	want := map[string]string{
		"slew on a fixed clock": "x.yaml:5: targets[0]: target test-fixed-clock cannot take a slew fault",
		"unknown target":        "x.yaml:6: targets[0]: unknown target \"wiat\"",
		"load over budget":      "x.yaml:4: load: the load needs about",
	}
	for name, src := range cases {
		s, err := scenario.Parse("x.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = harness.Prepare([]*scenario.Scenario{s}, harness.Options{})
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: %v, want %q", name, err, want[name])
		}
	}
}

// TestFailFast stops at the first unexpected duplicate.
func TestFailFast(t *testing.T) {
	s, err := scenario.Parse("ff.yaml", []byte(`name: ff
duration: 2s
nodes: [{name: a, worker: 1}]
load: {rate: 5000/s}
faults: [{at: 200ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
targets: [bad-no-rewind-check, wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{FailFast: true, Parallel: 1})
	r := rep.Scenarios[0].Runs[0]
	if !r.Stopped || r.Figures.Duplicates != 1 || rep.ExitCode() != 1 || !rep.Stopped {
		t.Fatalf("fail-fast: stopped %v, dups %d, exit %d", r.Stopped, r.Figures.Duplicates, rep.ExitCode())
	}
	if rep.Summary.Skipped != 1 {
		t.Fatalf("summary %+v", rep.Summary)
	}
}

// TestFailFastKeepsControls: a negative control expected to issue many
// duplicates is not stopped at its first, so fail-fast does not turn a
// caught control into a failure.
func TestFailFastKeepsControls(t *testing.T) {
	s, err := scenario.Parse("ffc.yaml", []byte(`name: ffc
duration: 2s
nodes: [{name: a, worker: 1}]
load: {rate: 5000/s}
faults: [{at: 200ms, kind: step, by: -50ms}]
invariants: ["duplicates == 0"]
targets: [bad-no-rewind-check, wait]
expect:
  bad-no-rewind-check: {duplicates: "> 100"}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{FailFast: true, Parallel: 1})
	r := rep.Scenarios[0].Runs[0]
	if r.Stopped || r.Figures.Duplicates <= 100 || r.Verdict != harness.Pass || rep.ExitCode() != 0 {
		t.Fatalf("control under fail-fast: stopped %v, dups %d, verdict %s, exit %d", r.Stopped, r.Figures.Duplicates, r.Verdict, rep.ExitCode())
	}
}

// TestHistory writes one valid NDJSON line per request.
func TestHistory(t *testing.T) {
	var b bytes.Buffer
	suite := load(t, "testdata/small-step.yaml")
	rep := run(t, suite, harness.Options{History: &b, Targets: []string{"wait"}})
	sc := bufio.NewScanner(&b)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var line struct {
			Scenario, Target, Ref, Node, Outcome string
			T                                    float64
			IDs                                  []string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		if line.Scenario != "small-step" || line.Target != "wait" || line.Node == "" || line.Outcome != "ok" || len(line.IDs) != 1 {
			t.Fatalf("line %d: %s", n, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, line.Ref); err != nil {
			t.Fatal(err)
		}
		if _, err := generator.ParseID(line.IDs[0]); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if want := rep.Scenarios[0].Runs[0].Figures.Requests; uint64(n) != want {
		t.Fatalf("%d lines, %d requests", n, want)
	}
}

// TestRealMode runs a short scenario on the wall clock with real
// goroutines: no duplicates, the fault confirmed. The freeze is confirmed
// by a probe 20 ms into it (20 times the 1 ms tolerance), which must run
// before the freeze ends: under make test-loaded the harness's timers
// fired up to 53 ms late (its calibration's largest sleep overshoot), so a
// 50 ms freeze went unconfirmed there; it lasts 300 ms.
func TestRealMode(t *testing.T) {
	s, err := scenario.Parse("real.yaml", []byte(`name: real
mode: real
duration: 900ms
nodes: [{name: a, worker: 1, checkpoint: on, reserve: 20ms, lease: memory}, {name: b, worker: 2, checkpoint: on, reserve: 20ms}]
load: {per: node, clients: 3, rate: 2000/s}
faults:
  - {at: 100ms, kind: step, by: -5ms, nodes: [a]}
  - {at: 200ms, kind: restart, nodes: [b]}
  - {at: 300ms, kind: clone, for: 100ms, nodes: [a]}
  - {at: 450ms, kind: freeze, for: 300ms, nodes: [b]}
  - {at: 500ms, kind: store_outage, for: 50ms}
invariants: ["duplicates == 0", "order_violations == 0", "restart_violations == 0"]
targets: [wait, bad-no-rewind-check]
expect:
  bad-no-rewind-check: {duplicates: ">= 0"}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{Timeline: true})
	if rep.Mode != scenario.ModeReal {
		t.Fatalf("mode %s", rep.Mode)
	}
	r := rep.Scenarios[0].Runs[0]
	if r.Verdict != harness.Pass || r.Figures.IDs == 0 || r.Sim != nil {
		var b bytes.Buffer
		report.Terminal(&b, rep)
		t.Fatalf("real run:\n%s\n%+v", b.String(), r.Faults)
	}
	for _, f := range r.Faults {
		if !f.Confirmed {
			t.Fatalf("fault %+v", f)
		}
	}
}

// TestMetrics: a run with metrics moves the snowchaos_* series and serves
// snowflake_* series for its in-process nodes while they run.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	hm := metrics.New()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true})
	reg.MustRegister(hm, gc)
	suite := load(t, "testdata/small-step.yaml")
	rep := run(t, suite, harness.Options{Metrics: hm, Generators: gc})
	if rep.Verdict != harness.Pass {
		t.Fatalf("verdict %s", rep.Verdict)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[f.GetName()+"#"] += 1
			}
		}
	}
	if got["snowchaos_ids_checked_total"] == 0 || got["snowchaos_duplicates_total"] == 0 || got["snowchaos_faults_injected_total"] != 3 {
		t.Fatalf("harness series: %v", got)
	}
	if got["snowchaos_verdict#"] == 0 {
		t.Fatalf("no verdict series: %v", got)
	}
	// The last run's nodes stay exported with their final counters (for a
	// scrape after the run); earlier runs' nodes are gone.
	rep = run(t, suite, harness.Options{Metrics: hm, Generators: gc, Targets: []string{"refuse"}})
	last := rep.Scenarios[0].Runs[len(rep.Scenarios[0].Runs)-1]
	nodes := gc.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("nodes after the run: %v, want the last run's two", nodes)
	}
	var issued uint64
	for _, n := range nodes {
		if !strings.Contains(n, "/"+last.Target+"/") {
			t.Fatalf("node %q is not the last run's (%s)", n, last.Target)
		}
		issued += gc.MustNode(n).Stats().Issued
	}
	if issued != uint64(last.Figures.IDs) {
		t.Fatalf("last run's nodes issued %d, its report says %d", issued, last.Figures.IDs)
	}
}

// explainTarget cannot take a step fault and says why.
type explainTarget struct{ target.InProcess }

func (e *explainTarget) Info() target.Info {
	i := e.InProcess.Info()
	i.Name = "test-explains"
	i.Caps.Faults = []faults.Kind{faults.KindRestart}
	return i
}

func (e *explainTarget) NotApplicable(f scenario.Fault) string {
	if f.Kind == faults.KindRestart {
		return ""
	}
	return "its clock is the host's own"
}

func init() { target.Register(&explainTarget{}) }

const naSrc = `name: na
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
faults: [{at: 200ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
targets: [wait, %s]
`

// TestNotApplicable: a target that cannot take a fault is an error unless
// opted in (per target or by Options.AllowNA); opted in, its row is n/a
// with the reason in every report, and the exit code ignores it.
func TestNotApplicable(t *testing.T) {
	parse := func(targets string) *scenario.Scenario {
		t.Helper()
		s, err := scenario.Parse("na.yaml", []byte(strings.Replace(naSrc, "%s", targets, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain := parse("test-fixed-clock")
	if err := harness.Prepare([]*scenario.Scenario{plain}, harness.Options{}); err == nil || !strings.Contains(err.Error(), "na.yaml:5: targets[1]: target test-fixed-clock cannot take a step fault") {
		t.Fatalf("without opting in: %v", err)
	}
	for name, tc := range map[string]struct {
		s *scenario.Scenario
		o harness.Options
	}{
		"per target": {parse("{name: test-fixed-clock, not_applicable: ok}"), harness.Options{}},
		"allow-na":   {plain, harness.Options{AllowNA: true}},
	} {
		t.Run(name, func(t *testing.T) {
			rep := run(t, []*scenario.Scenario{tc.s}, tc.o)
			r := rep.Scenarios[0].Runs[1]
			if r.Verdict != harness.NA || !strings.Contains(r.NotApplicable, "cannot take a step fault") || len(r.Checks) != 0 {
				t.Fatalf("run %+v", r)
			}
			if rep.ExitCode() != 0 || rep.Verdict != harness.Pass || rep.Scenarios[0].Verdict != harness.Pass ||
				rep.Summary.NotApplicable != 1 || rep.Summary.Passed != 1 {
				t.Fatalf("report verdict %s, exit %d, summary %+v", rep.Verdict, rep.ExitCode(), rep.Summary)
			}
			var txt, js, ju, ht bytes.Buffer
			for _, w := range []struct {
				f func(io.Writer, *harness.Report) error
				b *bytes.Buffer
			}{{report.Terminal, &txt}, {report.JSON, &js}, {report.JUnit, &ju}, {report.HTML, &ht}} {
				if err := w.f(w.b, rep); err != nil {
					t.Fatal(err)
				}
			}
			for what, want := range map[string][]string{
				txt.String(): {"test-fixed-clock  n/a", "n/a: target test-fixed-clock cannot take a step fault", "1 passed, 0 failed, 0 unknown, 1 n/a; verdict PASS (exit 0)"},
				js.String():  {`"verdict": "n/a"`, `"not_applicable": "target test-fixed-clock cannot take a step fault`, `"not_applicable": 1`},
				ju.String():  {`name="test-fixed-clock: n/a"`, `<skipped message="not applicable: target test-fixed-clock cannot take a step fault`},
				ht.String():  {`<td class="na" title="target test-fixed-clock cannot take`, "1 n/a"},
			} {
				for _, w := range want {
					if !strings.Contains(what, w) {
						t.Errorf("report lacks %q:\n%s", w, what)
					}
				}
			}
		})
	}
	// The target's own reason, when it gives one.
	s := parse("{name: test-explains, not_applicable: ok}")
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	if r := rep.Scenarios[0].Runs[1]; r.Verdict != harness.NA || !strings.HasSuffix(r.NotApplicable, "its clock is the host's own") {
		t.Fatalf("run %+v", r)
	}
	// A scenario that no target can take is an error, opted in or not.
	only, err := scenario.Parse("only.yaml", []byte(`name: only
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
faults: [{at: 200ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
targets: [{name: test-fixed-clock, not_applicable: ok}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []harness.Options{{}, {AllowNA: true}} {
		if err := harness.Prepare([]*scenario.Scenario{only}, o); err == nil || !strings.Contains(err.Error(), "no target can take this scenario") {
			t.Errorf("AllowNA %v: %v", o.AllowNA, err)
		}
	}
}

// TestLeaseRefusedAtStart: nodes starting at once in a range too small
// for them all: the ones refused stay down (their requests fail), the run
// goes on, and the refusals are counted and named.
func TestLeaseRefusedAtStart(t *testing.T) {
	s, err := scenario.Parse("full.yaml", []byte(`name: full
duration: 1s
nodes:
  - {name: a, worker: 0, lease: memory, worker_range: 0-1}
  - {name: b, worker: 1, lease: memory, worker_range: 0-1}
  - {name: c, worker: 1, lease: memory, worker_range: 0-1}
load: {per: node, rate: 1000/s}
invariants: ["duplicates == 0", "refused_starts == 1", "availability < 0.7"]
targets: [wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	r := rep.Scenarios[0].Runs[0]
	if r.Verdict != harness.Pass || r.Error != "" || r.Lease == nil || len(r.Lease.Refused) != 1 ||
		!strings.Contains(r.Lease.Refused[0], "c at 0s: lease: all worker IDs taken: range [0,1] held by 0=a 1=b") {
		var b bytes.Buffer
		report.Terminal(&b, rep)
		t.Fatalf("%+v\n%s", r.Lease, b.String())
	}
}

// TestLeaseSettingsValidate: lease settings a lease keeper cannot work
// with, or that no node would use, are errors.
func TestLeaseSettingsValidate(t *testing.T) {
	prepareFails(t, map[string]string{
		`name: x
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: ["duplicates == 0"]
targets: [{name: w, use: wait, handoff_guard: off}]
`: "x.yaml:6: targets[0]: target w sets a lease setting but none of its nodes leases a worker ID",
	})
}

// TestStartDuringOutage: nodes that start while the lease store is down (a
// restart, a clone, a handoff) wait for it, down, and start once it is
// back; nothing waits inside the simulation.
func TestStartDuringOutage(t *testing.T) {
	s, err := scenario.Parse("down.yaml", []byte(`name: down
duration: 3s
nodes:
  - {name: a, worker: 1, lease: memory, lease_ttl: 1s}
  - {name: b, worker: 2, lease: memory, lease_ttl: 1s}
  - {name: c, worker: 3, lease: memory, lease_ttl: 1s}
load: {per: node, rate: 1000/s}
faults:
  - {name: outage, at: 300ms, kind: store_outage, for: 1s}
  - {at: 500ms, kind: restart, nodes: [a]}
  - {at: 600ms, kind: clone, nodes: [b]}
  - {at: 700ms, kind: handoff, nodes: [c]}
invariants: ["duplicates == 0", "restart_violations == 0", "availability < 1 during outage"]
targets: [wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{})
	r := rep.Scenarios[0].Runs[0]
	var b bytes.Buffer
	report.Terminal(&b, rep)
	if r.Verdict != harness.Pass || r.Error != "" {
		t.Fatalf("%s", b.String())
	}
	late := map[string]bool{}
	for _, n := range r.Nodes {
		if n.IDs > 0 && n.Incarnation > 0 || n.Name == "b-clone" && n.IDs > 0 {
			late[n.Name] = true
		}
	}
	if !late["a"] || !late["b-clone"] || !late["c"] {
		t.Fatalf("nodes that started during the outage never issued: %+v\n%s", r.Nodes, b.String())
	}
}

// test-hang runs in-process nodes whose calls never return once armed,
// like a generator that loops without bound.
// Closing one ends its hung calls, as killing a process does.
type hangNode struct {
	target.Node
	calls  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

// hangClosed counts the test-hang nodes closed.
var hangClosed atomic.Int64

func (n *hangNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	if n.calls.Add(1) > 100 {
		<-n.closed
		return 0, errors.New("closed while hung")
	}
	return n.Node.Issue(ctx, dst)
}

func (n *hangNode) Close() error {
	n.once.Do(func() { hangClosed.Add(1); close(n.closed) })
	return n.Node.Close()
}

func init() {
	target.Register(&wrapTarget{name: "test-hang", wrap: func(n target.Node) target.Node {
		return &hangNode{Node: n, closed: make(chan struct{})}
	}})
}

// TestStalledRunFails: a call that never returns fails its run (exit 1)
// once the stall timeout passes, the run's nodes are closed (which ends
// the hung call, as killing a process does, so the driver returns), and
// the suite goes on to the next run.
func TestStalledRunFails(t *testing.T) {
	s, err := scenario.Parse("hang.yaml", []byte(`name: hang
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
invariants: ["duplicates == 0"]
targets: [test-hang, wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, []*scenario.Scenario{s}, harness.Options{StallTimeout: 300 * time.Millisecond, Parallel: 1})
	hung, ok := rep.Scenarios[0].Runs[0], rep.Scenarios[0].Runs[1]
	if hung.Verdict != harness.Fail || !strings.Contains(hung.Error, "stalled") || len(hung.Checks) != 1 || hung.Checks[0].Verdict != harness.Fail {
		t.Fatalf("hung run: %+v", hung)
	}
	if hangClosed.Load() == 0 || strings.Contains(hung.Error, "did not close") || strings.Contains(hung.Error, "driver did not return") {
		t.Fatalf("the stalled run's node was not closed, or its teardown did not finish: %d closed; %s", hangClosed.Load(), hung.Error)
	}
	if ok.Verdict != harness.Pass {
		t.Fatalf("wait run after it: %+v", ok)
	}
	if rep.ExitCode() != 1 {
		t.Fatalf("exit %d, want 1", rep.ExitCode())
	}
}

// prepareFails parses each scenario (as x.yaml) and wants Prepare to
// reject it with an error containing its text.
func prepareFails(t *testing.T, cases map[string]string) {
	t.Helper()
	for src, want := range cases {
		s, err := scenario.Parse("x.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := harness.Prepare([]*scenario.Scenario{s}, harness.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %q", err, want)
		}
	}
}
