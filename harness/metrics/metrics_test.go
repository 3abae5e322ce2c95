package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// count returns how many samples of family name s holds.
func count(s map[string]float64, name string) int {
	n := 0
	for k := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			n++
		}
	}
	return n
}

// TestEveryKnownLabelValueFromTheStart: every fault kind of the
// vocabulary (and "other") is a series before any fault, and a declared
// scenario's windows and invariants exist, undecided, from its Begin.
func TestEveryKnownLabelValueFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := metrics.New()
	reg.MustRegister(h)
	h.Begin(metrics.ScenarioInfo{
		Scenario: "ntp-step", Target: "inprocess",
		Windows:    []metrics.FaultWindow{{Name: "step-back", Kind: faults.KindStep}, {Name: "leap", Kind: faults.KindLeap}},
		Invariants: []string{"no_duplicates", "order"},
	})
	s := promtest.Samples(t, reg)
	counts := map[string]int{
		"snowchaos_ids_checked_total":      1,
		"snowchaos_duplicates_total":       1,
		"snowchaos_order_violations_total": 1,
		"snowchaos_faults_injected_total":  len(faults.Kinds(faults.InScenario)) + 1,
		"snowchaos_fault_window":           2,
		"snowchaos_scenario_info":          1,
		"snowchaos_verdict":                2,
	}
	for name, want := range counts {
		if got := count(s, name); got != want {
			t.Errorf("%s has %d series, want %d", name, got, want)
		}
	}
	for _, k := range faults.Kinds(faults.InScenario) {
		if _, ok := s["snowchaos_faults_injected_total{"+string(k)+"}"]; !ok {
			t.Errorf("no series for fault kind %s before any fault", k)
		}
	}
	if v := s["snowchaos_verdict{order}{ntp-step}{inprocess}"]; v != -1 {
		t.Errorf("undecided verdict = %v, want -1", v)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

func TestCollector(t *testing.T) {
	h := metrics.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h)
	h.Begin(metrics.ScenarioInfo{Scenario: "a", Target: "inprocess", Windows: []metrics.FaultWindow{{Name: "w1", Kind: faults.KindStep}}, Invariants: []string{"no_duplicates"}})
	h.FaultInjected(faults.KindStep)
	h.FaultInjected("martian")
	if err := h.SetWindow(metrics.FaultWindow{Name: "w1", Kind: faults.KindStep}, true); err != nil {
		t.Fatal(err)
	}
	h.AddChecked(100)
	h.AddDuplicates(2)
	h.AddOrderViolations(3)
	_ = h.SetVerdict("no_duplicates", "fail")
	_ = h.SetVerdict("order", "pass")
	_ = h.SetVerdict("lag", "n/a")
	s := promtest.Samples(t, reg)
	for key, want := range map[string]float64{
		"snowchaos_faults_injected_total{step}":          1,
		"snowchaos_faults_injected_total{other}":         1,
		"snowchaos_faults_injected_total{leap}":          0,
		"snowchaos_fault_window{step}{w1}":               1,
		"snowchaos_ids_checked_total":                    100,
		"snowchaos_duplicates_total":                     2,
		"snowchaos_order_violations_total":               3,
		"snowchaos_verdict{no_duplicates}{a}{inprocess}": 0,
		"snowchaos_verdict{order}{a}{inprocess}":         1,
		"snowchaos_verdict{lag}{a}{inprocess}":           -1,
		"snowchaos_scenario_info{a}{inprocess}":          1,
	} {
		if got, ok := s[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	// A second scenario replaces info and windows and keeps old verdicts.
	h.Begin(metrics.ScenarioInfo{Scenario: "b", Target: "http", Invariants: []string{"no_duplicates"}})
	s = promtest.Samples(t, reg)
	if n := count(s, "snowchaos_scenario_info"); n != 1 {
		t.Errorf("scenario_info has %d series after the second Begin, want 1", n)
	}
	if n := count(s, "snowchaos_fault_window"); n != 0 {
		t.Error("first scenario's windows survived Begin")
	}
	if n := count(s, "snowchaos_verdict"); n != 4 {
		t.Errorf("verdict series = %d, want 4 (three of a, one of b)", n)
	}
	for i := 0; i < metrics.MaxScenarioLabels-1; i++ {
		if err := h.SetVerdict(fmt.Sprint("inv", i), "pass"); err != nil {
			t.Fatalf("invariant %d: %v", i, err)
		}
	}
	if err := h.SetVerdict("one-too-many", "pass"); err == nil {
		t.Error("no error past MaxScenarioLabels invariants")
	}
	h.End()
}

func TestNilSafe(t *testing.T) {
	var h *metrics.Collector
	h.Begin(metrics.ScenarioInfo{})
	h.AddChecked(1)
	h.AddDuplicates(1)
	h.AddOrderViolations(1)
	h.FaultInjected(faults.KindStep)
	_ = h.SetWindow(metrics.FaultWindow{}, true)
	_ = h.SetVerdict("x", "pass")
	h.End()
}

// TestPromtoolCheckMetrics: a real promtool finds nothing to lint in the
// harness's exposition.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := promtest.Binary(t, "promtool")
	reg := prometheus.NewPedanticRegistry()
	h := metrics.New()
	reg.MustRegister(h)
	h.Begin(metrics.ScenarioInfo{Scenario: "step", Target: "inprocess",
		Windows: []metrics.FaultWindow{{Name: "back-50ms", Kind: faults.KindStep}}, Invariants: []string{"duplicates == 0"}})
	h.FaultInjected(faults.KindStep)
	h.AddChecked(5004)
	_ = h.SetVerdict("duplicates == 0", "pass")
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.TrimSpace(out.String()) != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}
