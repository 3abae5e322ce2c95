package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/verify"
)

// Verdict is the outcome of one check, one run or a whole report.
type Verdict string

// Verdicts.
const (
	// Pass: the check held (for an expectation: the harness caught the
	// known-bad target doing what it must be caught doing).
	Pass Verdict = "pass"
	// Fail: the check did not hold.
	Fail Verdict = "fail"
	// Unknown: the check could not be decided, for example because a
	// fault it depends on could not be confirmed, or nothing was measured.
	Unknown Verdict = "unknown"
	// NA (not applicable): the run was not made because the target cannot take
	// the scenario (a fault kind, a lease, a checkpoint, simulated time),
	// and the target was opted in to say so (Target.NotApplicable or
	// Options.AllowNA). It is neither a pass nor a failure: it never
	// changes a scenario's or the report's verdict. A check is n/a when the
	// run's kind of ID does not have its figure (the order of UUIDv4s, the
	// lead of strings); it does not count toward the run's verdict.
	NA Verdict = "n/a"
)

// What a negative control's verdict says: a known-bad target whose
// expectation held was caught by the harness, which is good news, though
// its row shows the duplicates it issued.
const (
	// Caught: the harness caught the known-bad target doing what the
	// scenario expects of it (the verdict is pass).
	Caught = "caught"
	// Escaped: the harness did not catch it (the verdict is fail).
	Escaped = "escaped"
)

// controlVerdict names verdict v of a negative control or its expectation.
func controlVerdict(v Verdict) string {
	switch v {
	case Pass:
		return Caught
	case Fail:
		return Escaped
	}
	return string(v)
}

// worse returns the worse of two verdicts: fail > unknown > pass; n/a
// never wins (a is kept).
func worse(a, b Verdict) Verdict {
	rank := func(v Verdict) int {
		switch v {
		case Fail:
			return 2
		case Unknown:
			return 1
		}
		return 0
	}
	if b != NA && (a == NA || rank(b) > rank(a)) {
		return b
	}
	return a
}

// Duration is a time.Duration that marshals to JSON as seconds.
type Duration time.Duration

// MarshalJSON writes the duration in seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'g', -1, 64), nil
}

// UnmarshalJSON reads a duration in seconds, so a JSON report reads back
// (to the nanosecond the float carries).
func (d *Duration) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > math.MaxInt64/1e9 {
		return fmt.Errorf("harness: duration %s: want seconds within ±292 years", b)
	}
	*d = Duration(math.Round(f * 1e9))
	return nil
}

// String renders the duration readably.
func (d Duration) String() string { return scenario.FormatDuration(time.Duration(d)) }

// Report is the result of running a suite.
type Report struct {
	// Mode is the mode the runs used ("simulated" or "real").
	Mode scenario.Mode `json:"mode"`
	// Scenarios are the results, in suite order.
	Scenarios []*ScenarioResult `json:"scenarios"`
	// Verdict is the worst verdict of every run.
	Verdict Verdict `json:"verdict"`
	// Stopped is true when --fail-fast stopped the suite early.
	Stopped bool `json:"stopped,omitempty"`
	// Summary counts runs by verdict.
	Summary Summary `json:"summary"`
	// Calibration, for a real-mode suite, is the machine's measured
	// timer and scheduling jitter and the tolerance derived from it.
	Calibration *Calibration `json:"calibration,omitempty"`
}

// Summary counts runs (scenario x target) by verdict.
type Summary struct {
	// Runs is every scenario x target selected; the others split it.
	Runs    int `json:"runs"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Unknown int `json:"unknown"`
	// NotApplicable counts runs reported n/a: the target cannot take the
	// scenario and was opted in to say so.
	NotApplicable int `json:"not_applicable,omitempty"`
	// Skipped counts runs not run (stopped by --fail-fast or a timeout).
	Skipped int `json:"skipped"`
}

// ExitCode maps a report to the process exit code: 0 when every verdict is
// as expected, 1 when any check failed, 2 when any is unknown.
func (r *Report) ExitCode() int {
	switch r.Verdict {
	case Fail:
		return 1
	case Unknown:
		return 2
	}
	return 0
}

// ScenarioResult is one scenario's runs, one per target.
type ScenarioResult struct {
	// Name, File, Description, Seed and Duration come from the scenario
	// (Seed as overridden).
	Name        string   `json:"name"`
	File        string   `json:"file"`
	Description string   `json:"description,omitempty"`
	Seed        int64    `json:"seed"`
	Duration    Duration `json:"duration_seconds"`
	// Faults are the scheduled faults with their observation windows.
	Faults []FaultSpec `json:"faults"`
	// Runs are the results per target, in the scenario's target order.
	Runs []*Result `json:"runs"`
	// Verdict is the worst verdict of the runs.
	Verdict Verdict `json:"verdict"`
	// Scenario is the parsed scenario.
	Scenario *scenario.Scenario `json:"-"`
}

// FaultSpec is a fault as scheduled, for reports.
type FaultSpec struct {
	// Name and Kind identify the fault; At is its offset from the start
	// and End the end of its observation window; Nodes are its nodes.
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	At    Duration `json:"at_seconds"`
	End   Duration `json:"window_end_seconds"`
	Nodes []string `json:"nodes"`
}

// Result is one run: a scenario against one target.
type Result struct {
	// Target is the row name; Use the registered target it ran.
	Target string `json:"target"`
	Use    string `json:"use"`
	// IDKind names the kind of ID the run checked when it is not a 64-bit
	// Snowflake: "uuidv7", "ulid", "uuidv4", "uuid" or "string" (see
	// IDKind); the order and lead figures of a kind without order or
	// embedded time are zero and its checks on them n/a.
	IDKind string `json:"id_kind,omitempty"`
	// KnownBad marks a reference generator.
	KnownBad bool `json:"known_bad,omitempty"`
	// Control is true when the scenario states what this target must be
	// caught doing.
	Control bool `json:"control,omitempty"`
	// Verdict is the worst verdict of the checks, or n/a.
	Verdict Verdict `json:"verdict"`
	// NotApplicable says why the target cannot take the scenario when the
	// verdict is n/a (the run was not made).
	NotApplicable string `json:"not_applicable,omitempty"`
	// Error says why the run could not complete; the verdict is then
	// unknown.
	Error string `json:"error,omitempty"`
	// Unknown lists why the run is unknown beyond its checks: a node
	// incarnation that never served, a protocol violation.
	Unknown []string `json:"unknown_reasons,omitempty"`
	// Protocol lists the first protocol violations (Figures counts them
	// all).
	Protocol []ViolationResult `json:"protocol_violations,omitempty"`
	// CallErrors are the texts of the errors calls failed with (refusals
	// and errors; not calls to a node that was down), most frequent first.
	CallErrors []CallError `json:"call_errors,omitempty"`
	// Stopped is true when --fail-fast stopped the run at a duplicate.
	Stopped bool `json:"stopped,omitempty"`
	// Checks are the invariants and expectations, in scenario order.
	Checks []Check `json:"checks"`
	// Figures are the run's key figures.
	Figures Figures `json:"figures"`
	// Faults say whether each injected fault was confirmed.
	Faults []FaultResult `json:"faults"`
	// Windows are the figures per fault window.
	Windows []WindowResult `json:"windows"`
	// Nodes are the figures per node incarnation.
	Nodes []NodeResult `json:"nodes"`
	// Duplicates are the first duplicates found, with both issuers.
	Duplicates []DuplicateResult `json:"duplicates,omitempty"`
	// Lease says what the worker-ID leases did; nil when no node leased.
	Lease *LeaseResult `json:"lease,omitempty"`
	// Sim describes how a simulated run sampled its load.
	Sim *SimInfo `json:"simulation,omitempty"`
	// Real, for a real-mode run, is the scheduling jitter measured while
	// it ran and the tolerance its timing bounds were judged with.
	Real *RealInfo `json:"real,omitempty"`
	// Timeline is the run's time series, for the HTML report.
	Timeline *Timeline `json:"-"`
}

// Kind returns the kind of ID the run checked (KindSnowflake when IDKind
// is empty).
func (r *Result) Kind() verify.Kind {
	k, _ := verify.ParseKind(r.IDKind) // "" and unknown names: a Snowflake
	return k
}

// ControlVerdict is, for a negative control (Control), Caught, Escaped or
// the verdict (unknown, n/a); for any other run "".
func (r *Result) ControlVerdict() string {
	if !r.Control {
		return ""
	}
	return controlVerdict(r.Verdict)
}

// MarshalJSON writes the result with "control_verdict" (ControlVerdict)
// first for a negative control; the other keys are as tagged.
func (r *Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		ControlVerdict string `json:"control_verdict,omitempty"`
		*plain
	}{r.ControlVerdict(), (*plain)(r)})
}

// Check is one invariant or expectation and its verdict.
type Check struct {
	// Expr is the expression as written.
	Expr string `json:"expr"`
	// Expected is true for a negative control's expectation.
	Expected bool `json:"expected,omitempty"`
	// Info is true for an invariant shown for a negative control that does
	// not count toward its verdict.
	Info bool `json:"info,omitempty"`
	// Verdict is pass, fail, unknown, or n/a when the run's kind of ID
	// does not have the figure (no order, no embedded time).
	Verdict Verdict `json:"verdict"`
	// Observed is the measured figure, formatted in the metric's unit.
	Observed string `json:"observed"`
	// Reason explains an unknown or n/a verdict.
	Reason string `json:"reason,omitempty"`
	// Bound, in real mode, is the timing bound as judged: the expression
	// widened by the calibrated tolerance (tightened for a negative
	// control's expectation); "" when judged as written.
	Bound string `json:"bound,omitempty"`
	// Line is the expression's line in the scenario file.
	Line int `json:"line"`
}

// ControlVerdict is, for a negative control's expectation (Expected),
// Caught, Escaped or the verdict (unknown); for any other check "".
func (c Check) ControlVerdict() string {
	if !c.Expected {
		return ""
	}
	return controlVerdict(c.Verdict)
}

// MarshalJSON writes the check with "control_verdict" (ControlVerdict)
// first for an expectation; the other keys are as tagged.
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	return json.Marshal(struct {
		ControlVerdict string `json:"control_verdict,omitempty"`
		plain
	}{c.ControlVerdict(), plain(c)})
}

// Figures are a run's key figures.
type Figures struct {
	// Requests counts every request, IDs every ID issued; Duplicates,
	// OrderViolations and RestartViolations the findings; Refusals the
	// requests not answered with IDs, of which Refused the ones the node
	// refused (it answered) and Down the ones sent while the node was
	// down (restarting, or not yet started) or that it went down during.
	Requests          uint64  `json:"requests"`
	IDs               uint64  `json:"ids"`
	Duplicates        uint64  `json:"duplicates"`
	OrderViolations   uint64  `json:"order_violations"`
	RestartViolations uint64  `json:"restart_violations"`
	Refusals          uint64  `json:"refusals"`
	Refused           uint64  `json:"refused"`
	Down              uint64  `json:"down"`
	Availability      float64 `json:"availability"`
	// MaxWait ... LongestGap are the extremes and 99th percentiles of the
	// wait per request and the embedded-time lead and lag per ID, and the
	// longest time a node answered no request.
	MaxWait Duration `json:"max_wait_seconds"`
	P99Wait Duration `json:"p99_wait_seconds"`
	MaxLead Duration `json:"max_lead_seconds"`
	P99Lead Duration `json:"p99_lead_seconds"`
	// MaxLeadOwn is the largest lead over the issuing node's own clock
	// (the invariant max_lead_own).
	MaxLeadOwn Duration `json:"max_lead_own_seconds"`
	MaxLag     Duration `json:"max_lag_seconds"`
	P99Lag     Duration `json:"p99_lag_seconds"`
	LongestGap Duration `json:"longest_gap_seconds"`
	// RefusedStarts counts node starts the lease refused (a worker ID, or
	// the peer clock check); Rebinds the generators rebuilt on a new lease
	// after a loss.
	RefusedStarts int    `json:"refused_starts,omitempty"`
	Rebinds       uint64 `json:"rebinds,omitempty"`
	// LeaseOverruns counts IDs a leasing node issued while, by the lease
	// store's clock, it held no unexpired lease on their worker ID.
	LeaseOverruns uint64 `json:"lease_overruns,omitempty"`
	// LeaseOverrunsHeld counts the lease overruns a simulated node issued
	// within a TTL after the simulation held its lease keeper back for
	// longer than a renewal interval (TTL/3), and KeeperHeld the longest
	// such hold: a simulated host busy with a call that waits (a rewind,
	// a pause) does its keeper's work only once the run's time reaches
	// the host's, where a real process renews on a goroutine of its own.
	// The simulation cannot judge those overruns.
	LeaseOverrunsHeld uint64   `json:"lease_overruns_keeper_held,omitempty"`
	KeeperHeld        Duration `json:"keeper_held,omitempty"`
	// ProtocolViolations counts answers that broke the node's protocol.
	ProtocolViolations int `json:"protocol_violations,omitempty"`
}

// LeaseResult says what a run's worker-ID leases did, summed over every
// node and incarnation.
type LeaseResult struct {
	// Counters are the lease keepers' counts, summed over every node and
	// incarnation (lease.Counters documents each).
	lease.Counters
	// Refused lists the starts the lease refused, with its error (which
	// names the range and the holders, or the peers and the clock skew).
	Refused []string `json:"refused,omitempty"`
	// Rebound lists the rebinds: node, time and worker ID.
	Rebound []string `json:"rebound,omitempty"`
	// CountersNA is true when no node's lease keeper could be read (the
	// nodes ran as processes, each keeping its lease itself): Counters and
	// Rebound are then no figures (zero and empty, printed n/a); Refused
	// still lists the starts the lease refused.
	CountersNA bool `json:"counters_na,omitempty"`
}

// FaultResult says whether one fault took effect.
type FaultResult struct {
	// Name, Kind and At identify the fault; Confirmed says whether every
	// node's measured clock offset (or restart) showed it took effect.
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	At        Duration `json:"at_seconds"`
	Confirmed bool     `json:"confirmed"`
	// Detail says what was measured per node, e.g. "a: offset -5ms (want -5ms)".
	Detail []string `json:"detail"`
	// Artifact is set when the fault may have reached a node with an
	// artifact the scenario did not ask for (a freeze that landed late):
	// every check that depends on it is unknown, a failure included.
	Artifact bool `json:"artifact,omitempty"`

	// failed is set when a node's evidence showed the fault did not
	// reach it (or could not be measured); pending counts the nodes whose
	// evidence their IDs must still give (see reachWatch).
	failed  bool
	pending int
}

// WindowResult holds the figures of one fault window.
type WindowResult struct {
	// Name is the fault's name; Start and End bound the window; the rest
	// are the figures of the requests that arrived in it.
	Name         string   `json:"name"`
	Start        Duration `json:"start_seconds"`
	End          Duration `json:"end_seconds"`
	Requests     uint64   `json:"requests"`
	Availability float64  `json:"availability"`
	LongestGap   Duration `json:"longest_gap_seconds"`
	Duplicates   uint64   `json:"duplicates"`
	MaxWait      Duration `json:"max_wait_seconds"`
	MaxLead      Duration `json:"max_lead_seconds"`
	MaxLeadOwn   Duration `json:"max_lead_own_seconds"`
	MaxLag       Duration `json:"max_lag_seconds"`
}

// NodeResult holds the figures of one node incarnation.
type NodeResult struct {
	// Name, Incarnation and Worker identify the issuer; the rest are its
	// figures.
	Name        string `json:"name"`
	Incarnation int    `json:"incarnation"`
	Worker      int64  `json:"worker"`
	// Started says the incarnation's start succeeded: the harness sent it
	// requests from StartedAt + ReadyAfter on (offsets from the run's
	// start; ReadyAfter is how long the start took). One that started and
	// issued no ID leaves the run unknown.
	Started    bool     `json:"started"`
	StartedAt  Duration `json:"started_at_seconds"`
	ReadyAfter Duration `json:"ready_after_seconds"`
	Requests   uint64   `json:"requests"`
	IDs        uint64   `json:"ids"`
	// FirstID and LastID are the offsets of the first and last call that
	// returned IDs; nil when none did.
	FirstID    *Duration `json:"first_id_at_seconds,omitempty"`
	LastID     *Duration `json:"last_id_at_seconds,omitempty"`
	Duplicates uint64    `json:"duplicates"`
	// Availability is the share of its requests answered with IDs; nil
	// when it had no request.
	Availability *float64 `json:"availability"`
	MaxWait      Duration `json:"max_wait_seconds"`
	MaxLead      Duration `json:"max_lead_seconds"`
	MaxLeadOwn   Duration `json:"max_lead_own_seconds"`
}

// CallError is one error text calls failed with, and how many.
type CallError struct {
	Text  string `json:"text"`
	Count uint64 `json:"count"`
}

// DuplicateResult is one ID issued twice.
type DuplicateResult struct {
	ID string `json:"id"`
	// First and Second are the issuers ("name#incarnation"); At the
	// offsets from the start at which each issued it (First's is the
	// earliest time it may have).
	First    string   `json:"first"`
	FirstAt  Duration `json:"first_at_seconds"`
	Second   string   `json:"second"`
	SecondAt Duration `json:"second_at_seconds"`
	// Windows are the fault windows the second issue fell in.
	Windows []string `json:"windows,omitempty"`
}

// SimInfo describes how a simulated run sampled its load: the full rate
// ran in the hot windows around each fault and Factor of it elsewhere.
type SimInfo struct {
	// Budget is the request budget, Factor the quiet-period sampling
	// factor, Hot the hot span after each hot point, HotSpans their
	// number and Events the events simulated.
	Budget   int      `json:"budget"`
	Factor   float64  `json:"quiet_factor"`
	Hot      Duration `json:"hot_seconds"`
	HotSpans int      `json:"hot_spans"`
	Events   uint64   `json:"events"`
}

// Timeline is a run's time series in equal buckets, for plotting.
type Timeline struct {
	// Bucket is the width of a bucket; Buckets their number.
	Bucket  time.Duration
	Buckets int
	// Nodes are the series per node (incarnations merged).
	Nodes []*NodeSeries
	// Duplicates are the offsets at which duplicates were issued (capped).
	Duplicates []time.Duration
}

// NodeSeries is one node's series.
type NodeSeries struct {
	Name string
	// IDs counts IDs issued per bucket (sampled in quiet periods of a
	// simulated run).
	IDs []uint64
	// Failed counts failed requests per bucket.
	Failed []uint64
	// Offset is the host clock's offset at the end of each bucket (NaN
	// when unknown or down, encoded as a bool in Known).
	Offset []time.Duration
	Known  []bool
	// Lead is the largest embedded-time lead per bucket.
	Lead []time.Duration
	// From is the first bucket in which the node existed (a clone starts
	// late).
	From int
}
