// Package metrics exports the harness's snowchaos_* series: IDs checked,
// duplicates and order violations found, faults injected by kind, the
// scenario running, its fault windows and each invariant's verdict. The
// product's own series (snowflake_*) are the telemetry package's.
package metrics

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowchaos/snowchaos/faults"
)

// OtherKind is the kind label of an injected fault whose kind is not in
// the fault vocabulary (faults.Kinds).
const OtherKind = "other"

// Verdict values of snowchaos_verdict: 1 pass, 0 fail, -1 unknown or not
// yet decided. A harness verdict (pass, fail, unknown, n/a) maps to these
// by its name (see SetVerdict).
const (
	gaugeUnknown = -1
	gaugeFail    = 0
	gaugePass    = 1
)

// FaultWindow names one timed fault of a scenario: snowchaos_fault_window's
// window and kind labels.
type FaultWindow struct {
	Name string      // unique within the scenario, e.g. "step-back-50ms" or "fault-3"
	Kind faults.Kind // a kind of the fault vocabulary
}

// ScenarioInfo declares a scenario run, so that every series it will move
// exists, at its starting value, from the start.
type ScenarioInfo struct {
	Scenario   string        // the scenario's name
	Target     string        // the target it runs against (in-process, http, ...)
	Windows    []FaultWindow // its fault windows, all inactive at first
	Invariants []string      // its invariants, all unknown at first
}

// MaxScenarioLabels bounds the windows and invariants one scenario may add
// beyond those it declared, so that a runaway script cannot explode the
// series count.
const MaxScenarioLabels = 256

// Collector exports the snowchaos_* series of scenario runs. It is a
// prometheus.Collector: register it on a registry of your own. Its methods
// are safe for concurrent use and do nothing on a nil *Collector.
//
// Counters accumulate over the process's scenarios; snowchaos_scenario_info
// and snowchaos_fault_window describe the current scenario (Begin replaces
// them); verdicts of earlier scenarios stay, one series per scenario,
// target and invariant.
type Collector struct {
	checked, duplicates, order prometheus.Counter
	faults                     *prometheus.CounterVec
	window                     *prometheus.GaugeVec
	info                       *prometheus.GaugeVec
	verdict                    *prometheus.GaugeVec

	mu struct {
		sync.Mutex
		cur        ScenarioInfo
		windows    map[string]faults.Kind // name -> kind of the current scenario
		invariants map[string]bool
	}
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns the harness series, all at zero.
func New() *Collector {
	h := &Collector{
		checked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowchaos_ids_checked_total",
			Help: "IDs the verifier checked.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowchaos_duplicates_total",
			Help: "IDs the verifier saw issued more than once, across all nodes and restarts.",
		}),
		order: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowchaos_order_violations_total",
			Help: "IDs not greater than their predecessor in a sequential stream, or than every ID before a restart.",
		}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowchaos_faults_injected_total",
			Help: "Faults injected by kind.",
		}, []string{"kind"}),
		window: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowchaos_fault_window",
			Help: "1 while the scenario's named fault window is active, else 0.",
		}, []string{"window", "kind"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowchaos_scenario_info",
			Help: "Always 1: the scenario running (or last run) and its target.",
		}, []string{"scenario", "target"}),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowchaos_verdict",
			Help: "Verdict per scenario invariant: 1 pass, 0 fail, -1 unknown or not yet decided.",
		}, []string{"scenario", "target", "invariant"}),
	}
	for _, k := range faults.Kinds(faults.InScenario) {
		h.faults.WithLabelValues(string(k))
	}
	h.faults.WithLabelValues(OtherKind)
	h.mu.windows = map[string]faults.Kind{}
	h.mu.invariants = map[string]bool{}
	return h
}

// Describe implements prometheus.Collector.
func (h *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []prometheus.Collector{h.checked, h.duplicates, h.order, h.faults, h.window, h.info, h.verdict} {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (h *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []prometheus.Collector{h.checked, h.duplicates, h.order, h.faults, h.window, h.info, h.verdict} {
		c.Collect(ch)
	}
}

// Begin starts a scenario: it replaces the scenario info and fault windows
// with s's (windows inactive) and sets s's invariants to unknown.
func (h *Collector) Begin(s ScenarioInfo) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.info.Reset()
	h.window.Reset()
	h.info.WithLabelValues(s.Scenario, s.Target).Set(1)
	h.mu.cur = ScenarioInfo{Scenario: s.Scenario, Target: s.Target}
	h.mu.windows = map[string]faults.Kind{}
	h.mu.invariants = map[string]bool{}
	for _, w := range s.Windows {
		h.addWindowLocked(w)
	}
	for _, inv := range s.Invariants {
		h.addInvariantLocked(inv)
	}
}

func (h *Collector) addWindowLocked(w FaultWindow) (prometheus.Gauge, error) {
	if kind, ok := h.mu.windows[w.Name]; ok {
		return h.window.WithLabelValues(w.Name, string(kind)), nil
	}
	if len(h.mu.windows) >= MaxScenarioLabels {
		return nil, fmt.Errorf("metrics: scenario %q: more than %d fault windows", h.mu.cur.Scenario, MaxScenarioLabels)
	}
	h.mu.windows[w.Name] = w.Kind
	g := h.window.WithLabelValues(w.Name, string(w.Kind))
	g.Set(0)
	return g, nil
}

func (h *Collector) addInvariantLocked(inv string) (prometheus.Gauge, error) {
	g := h.verdict.WithLabelValues(h.mu.cur.Scenario, h.mu.cur.Target, inv)
	if h.mu.invariants[inv] {
		return g, nil
	}
	if len(h.mu.invariants) >= MaxScenarioLabels {
		h.verdict.DeleteLabelValues(h.mu.cur.Scenario, h.mu.cur.Target, inv)
		return nil, fmt.Errorf("metrics: scenario %q: more than %d invariants", h.mu.cur.Scenario, MaxScenarioLabels)
	}
	h.mu.invariants[inv] = true
	g.Set(gaugeUnknown)
	return g, nil
}

// SetWindow marks the fault window w active or inactive. A window Begin
// did not declare is added (kind from w), up to MaxScenarioLabels; beyond
// that SetWindow returns an error and changes nothing.
func (h *Collector) SetWindow(w FaultWindow, active bool) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g, err := h.addWindowLocked(w)
	if err != nil {
		return err
	}
	if active {
		g.Set(1)
	} else {
		g.Set(0)
	}
	return nil
}

// SetVerdict records the current scenario's verdict on invariant: "pass"
// is 1, "fail" 0, anything else (unknown, n/a) -1. An invariant Begin did
// not declare is added, up to MaxScenarioLabels; beyond that SetVerdict
// returns an error and changes nothing.
func (h *Collector) SetVerdict(invariant, verdict string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g, err := h.addInvariantLocked(invariant)
	if err != nil {
		return err
	}
	switch verdict {
	case "pass":
		g.Set(gaugePass)
	case "fail":
		g.Set(gaugeFail)
	default:
		g.Set(gaugeUnknown)
	}
	return nil
}

// End marks every fault window of the current scenario inactive; the
// scenario info and verdicts stay.
func (h *Collector) End() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, kind := range h.mu.windows {
		h.window.WithLabelValues(name, string(kind)).Set(0)
	}
}

// AddChecked counts n IDs checked by the verifier.
func (h *Collector) AddChecked(n uint64) {
	if h != nil && n > 0 {
		h.checked.Add(float64(n))
	}
}

// AddDuplicates counts n duplicate IDs found.
func (h *Collector) AddDuplicates(n uint64) {
	if h != nil && n > 0 {
		h.duplicates.Add(float64(n))
	}
}

// AddOrderViolations counts n order violations found.
func (h *Collector) AddOrderViolations(n uint64) {
	if h != nil && n > 0 {
		h.order.Add(float64(n))
	}
}

// FaultInjected counts one injected fault of kind (OtherKind when kind is
// not in the vocabulary).
func (h *Collector) FaultInjected(kind faults.Kind) {
	if h == nil {
		return
	}
	if _, ok := faults.Lookup(kind); ok {
		h.faults.WithLabelValues(string(kind)).Inc()
		return
	}
	h.faults.WithLabelValues(OtherKind).Inc()
}
