package telemetry

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Fault kinds, the values of snowchaos_faults_injected_total's kind label;
// any other kind is counted as FaultOther.
const (
	FaultStep    = "step"
	FaultFreeze  = "freeze"
	FaultLeap    = "leap"
	FaultSmear   = "smear"
	FaultSlew    = "slew"
	FaultDrift   = "drift"
	FaultPause   = "pause"
	FaultRestart = "restart"
	FaultClone   = "clone"
	FaultHandoff = "handoff"
	FaultRevert  = "revert"
	// FaultStoreOutage is a lease store made unreachable (all of it, or
	// for some nodes: a partition).
	FaultStoreOutage = "store_outage"
	FaultOther       = "other"
)

var faultKinds = []string{FaultStep, FaultFreeze, FaultLeap, FaultSmear, FaultSlew, FaultDrift,
	FaultPause, FaultRestart, FaultClone, FaultHandoff, FaultRevert, FaultStoreOutage, FaultOther}

// FaultKinds returns every value of the kind label of
// snowchaos_faults_injected_total.
func FaultKinds() []string { return append([]string(nil), faultKinds...) }

// Verdict is an invariant's result as snowchaos_verdict shows it.
type Verdict int8

// Verdict values: the gauge's value.
const (
	VerdictUnknown Verdict = -1 // not decided (yet), or a fault unconfirmed
	VerdictFail    Verdict = 0
	VerdictPass    Verdict = 1
)

// ParseVerdict maps "pass" and "fail" to their Verdict and anything else to
// VerdictUnknown.
func ParseVerdict(s string) Verdict {
	switch s {
	case "pass":
		return VerdictPass
	case "fail":
		return VerdictFail
	}
	return VerdictUnknown
}

// FaultWindow names one timed fault of a scenario: snowchaos_fault_window's
// window and kind labels.
type FaultWindow struct {
	Name string // unique within the scenario, e.g. "step-back-50ms" or "fault-3"
	Kind string // one of FaultKinds
}

// ScenarioInfo declares a scenario run, so that every series it will move
// exists, at its starting value, from the start.
type ScenarioInfo struct {
	Scenario   string        // the scenario's name
	Target     string        // the target it runs against (in-process, http, ...)
	Windows    []FaultWindow // its fault windows, all inactive at first
	Invariants []string      // its invariants, all VerdictUnknown at first
}

// MaxScenarioLabels bounds the windows and invariants one scenario may add
// beyond those it declared, so that a runaway script cannot explode the
// series count.
const MaxScenarioLabels = 256

// HarnessMetrics exports the snowchaos_* series of scenario runs. It is a
// prometheus.Collector: register it on a registry of your own. Its methods
// are safe for concurrent use and do nothing on a nil *HarnessMetrics.
//
// Counters accumulate over the process's scenarios; snowchaos_scenario_info
// and snowchaos_fault_window describe the current scenario (Begin replaces
// them); verdicts of earlier scenarios stay, one series per scenario,
// target and invariant.
type HarnessMetrics struct {
	checked, duplicates, order prometheus.Counter
	faults                     *prometheus.CounterVec
	window                     *prometheus.GaugeVec
	info                       *prometheus.GaugeVec
	verdict                    *prometheus.GaugeVec

	mu struct {
		sync.Mutex
		cur        ScenarioInfo
		windows    map[string]string // name -> kind of the current scenario
		invariants map[string]bool
	}
}

var _ prometheus.Collector = (*HarnessMetrics)(nil)

// NewHarnessMetrics returns the harness series, all at zero.
func NewHarnessMetrics() *HarnessMetrics {
	h := &HarnessMetrics{
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
	for _, k := range faultKinds {
		h.faults.WithLabelValues(k)
	}
	h.mu.windows = map[string]string{}
	h.mu.invariants = map[string]bool{}
	return h
}

// Describe implements prometheus.Collector.
func (h *HarnessMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []prometheus.Collector{h.checked, h.duplicates, h.order, h.faults, h.window, h.info, h.verdict} {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (h *HarnessMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []prometheus.Collector{h.checked, h.duplicates, h.order, h.faults, h.window, h.info, h.verdict} {
		c.Collect(ch)
	}
}

// Begin starts a scenario: it replaces the scenario info and fault windows
// with s's (windows inactive) and sets s's invariants to VerdictUnknown.
func (h *HarnessMetrics) Begin(s ScenarioInfo) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.info.Reset()
	h.window.Reset()
	h.info.WithLabelValues(s.Scenario, s.Target).Set(1)
	h.mu.cur = ScenarioInfo{Scenario: s.Scenario, Target: s.Target}
	h.mu.windows = map[string]string{}
	h.mu.invariants = map[string]bool{}
	for _, w := range s.Windows {
		h.addWindowLocked(w)
	}
	for _, inv := range s.Invariants {
		h.addInvariantLocked(inv)
	}
}

func (h *HarnessMetrics) addWindowLocked(w FaultWindow) (prometheus.Gauge, error) {
	if kind, ok := h.mu.windows[w.Name]; ok {
		return h.window.WithLabelValues(w.Name, kind), nil
	}
	if len(h.mu.windows) >= MaxScenarioLabels {
		return nil, fmt.Errorf("telemetry: scenario %q: more than %d fault windows", h.mu.cur.Scenario, MaxScenarioLabels)
	}
	h.mu.windows[w.Name] = w.Kind
	g := h.window.WithLabelValues(w.Name, w.Kind)
	g.Set(0)
	return g, nil
}

func (h *HarnessMetrics) addInvariantLocked(inv string) (prometheus.Gauge, error) {
	g := h.verdict.WithLabelValues(h.mu.cur.Scenario, h.mu.cur.Target, inv)
	if h.mu.invariants[inv] {
		return g, nil
	}
	if len(h.mu.invariants) >= MaxScenarioLabels {
		h.verdict.DeleteLabelValues(h.mu.cur.Scenario, h.mu.cur.Target, inv)
		return nil, fmt.Errorf("telemetry: scenario %q: more than %d invariants", h.mu.cur.Scenario, MaxScenarioLabels)
	}
	h.mu.invariants[inv] = true
	g.Set(float64(VerdictUnknown))
	return g, nil
}

// SetWindow marks the fault window w active or inactive. A window Begin
// did not declare is added (kind from w), up to MaxScenarioLabels; beyond
// that SetWindow returns an error and changes nothing.
func (h *HarnessMetrics) SetWindow(w FaultWindow, active bool) error {
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

// SetVerdict records the current scenario's verdict on invariant. An
// invariant Begin did not declare is added, up to MaxScenarioLabels; beyond
// that SetVerdict returns an error and changes nothing.
func (h *HarnessMetrics) SetVerdict(invariant string, v Verdict) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g, err := h.addInvariantLocked(invariant)
	if err != nil {
		return err
	}
	g.Set(float64(v))
	return nil
}

// End marks every fault window of the current scenario inactive; the
// scenario info and verdicts stay.
func (h *HarnessMetrics) End() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, kind := range h.mu.windows {
		h.window.WithLabelValues(name, kind).Set(0)
	}
}

// AddChecked counts n IDs checked by the verifier.
func (h *HarnessMetrics) AddChecked(n uint64) {
	if h != nil && n > 0 {
		h.checked.Add(float64(n))
	}
}

// AddDuplicates counts n duplicate IDs found.
func (h *HarnessMetrics) AddDuplicates(n uint64) {
	if h != nil && n > 0 {
		h.duplicates.Add(float64(n))
	}
}

// AddOrderViolations counts n order violations found.
func (h *HarnessMetrics) AddOrderViolations(n uint64) {
	if h != nil && n > 0 {
		h.order.Add(float64(n))
	}
}

// FaultInjected counts one injected fault of kind (FaultOther when kind
// is not one of FaultKinds).
func (h *HarnessMetrics) FaultInjected(kind string) {
	if h == nil {
		return
	}
	for _, k := range faultKinds {
		if k == kind {
			h.faults.WithLabelValues(k).Inc()
			return
		}
	}
	h.faults.WithLabelValues(FaultOther).Inc()
}
