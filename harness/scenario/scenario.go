// Package scenario is the model of a snowchaos scenario script and its YAML
// parser.
//
// A scenario names its nodes, the targets (generator variants) it runs
// against, an open-model load, a timed list of faults, the invariants each
// run must keep and, for negative controls, what a known-bad target must be
// caught doing. Parse turns a YAML file into a Scenario or into errors that
// name file, line and key; nothing unknown or misspelled is ever ignored.
//
// The package knows nothing about how a scenario is run: the harness
// package resolves target names and capabilities and checks the
// combinations that depend on them.
package scenario

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

// Mode is how a scenario's time passes.
type Mode string

// Modes.
const (
	// ModeSimulated runs on virtual time under the runner's discrete-event
	// scheduler: deterministic, and hours of scenario time pass in seconds.
	ModeSimulated Mode = "simulated"
	// ModeReal runs on the wall clock plus fault offsets with real
	// goroutines and real waits: for latency, throughput and races.
	ModeReal Mode = "real"
)

// DefaultStart is the reference wall time at which a simulated run starts
// unless the scenario sets start: half a minute before the end of a day
// that ends with a leap second in many a test suite.
var DefaultStart = time.Date(2026, 6, 30, 23, 59, 30, 0, time.UTC)

// Scenario is one parsed scenario script. Every Line field is the 1-based
// line of the element in File.
type Scenario struct {
	// File is the path the scenario was read from (for messages).
	File string
	// Name identifies the scenario in reports; unique within a suite.
	Name string
	// Description says what the scenario shows, in a sentence or two.
	Description string
	// Seed drives every random choice of a run (arrival jitter, routing).
	Seed int64
	// Mode is ModeSimulated unless the file says real.
	Mode Mode
	// Duration is how long the run lasts, from its start.
	Duration time.Duration
	// Start is the reference wall time at the start of a simulated run.
	Start time.Time
	// Nodes are the generator nodes, in file order.
	Nodes []Node
	// Targets are the generator variants to run the scenario against; one
	// report row each. Never empty after parsing: a file without targets
	// runs the nodes as declared (target "declared").
	Targets []Target
	// Load is the request load.
	Load Load
	// Faults are the faults in file order (not necessarily time order).
	Faults []Fault
	// Invariants must hold for every target without an expectation on the
	// same metric.
	Invariants []Expr
	// Expect holds the negative controls: per target, what the harness
	// must catch it doing.
	Expect []Expectation
	// Simulation tunes how simulated mode samples the load.
	Simulation Simulation
	// RealNA, when set, says why the scenario cannot be run in real mode
	// (hours of scenario time, a load the wall clock cannot deliver): in
	// real mode every run is then n/a with this reason.
	RealNA string
	// Line is the line of the document's first key.
	Line int
}

// Node is one generator node of a scenario.
type Node struct {
	// Name identifies the node in faults and reports.
	Name string
	// Worker is the node (worker) ID embedded in its IDs.
	Worker int64
	// Policy is the rewind policy (targets may override it).
	Policy generator.Policy
	// MaxWait bounds one call's waiting; zero means the generator default.
	MaxWait time.Duration
	// MaxLead bounds the logical policy's lead; zero means the default.
	MaxLead time.Duration
	// Reserve is how far ahead the checkpoint mark is reserved; zero
	// means the generator default, generator.NoReserve (reserve: 0 in a
	// file) none: the mark names the issuing tick.
	Reserve time.Duration
	// Layout is the bit layout, from a preset name or any T/N/S[@tick]
	// split of the 63 bits (generator.ParseLayout), with Epoch applied.
	Layout generator.Layout
	// LayoutName is the layout as written ("" for the default).
	LayoutName string
	// Checkpoint keeps a high-water mark on the node's disk across
	// restarts.
	Checkpoint bool
	// Lease is the worker-ID lease backend: "none", "memory", or the URL
	// of a lease store ("postgres://...", "etcd://host:port",
	// "zk://host:port/root"); LeaseKind
	// names its kind.
	Lease string
	// LeaseTTL is the lease's duration; zero means the lease package's
	// default (10s).
	LeaseTTL time.Duration
	// WorkerRange, when set, is the range of worker IDs the node may lease
	// from; nil means the layout's whole node field.
	WorkerRange *WorkerRange
	// NoHandoffGuard disables the lease's handoff guard (the node starts at
	// once whatever the worker ID's previous holder issued): only for
	// negative controls.
	NoHandoffGuard bool
	// NoPauseCheck disables the lease keeper's pause check (re-validating
	// the lease after the wall clock jumps ahead of the monotonic clock):
	// only for negative controls.
	NoPauseCheck bool
	// NoFence builds the generator without the lease's fence: the node
	// takes a lease and renews it but issues whether it holds it or not
	// (a negative control).
	NoFence bool
	// NoMarkWriteThrough writes the node's mark to the lease store only at
	// renewal and release instead of before any ID passes it (the
	// behaviour before marks were recorded ahead): after a crash the
	// stored mark lags what was issued. Only for negative controls.
	NoMarkWriteThrough bool
	// NoPeerClockCheck starts the node whatever its clock reads against its
	// live peers' (peer_clock_check: off): only for negative controls.
	NoPeerClockCheck bool
	// NoFenceMargin opens the lease's fence for the whole TTL, with no
	// safety margin for the store's clock running fast (fence_margin:
	// off): only for negative controls.
	NoFenceMargin bool
	// PeerClockMaxSkew is the peer clock check's bound; zero means the
	// lease package's default (1s).
	PeerClockMaxSkew time.Duration
	// Holder is the node's sticky lease holder identity (a StatefulSet's
	// pod name): restarts and handoffs keep it, so a handed-off node
	// claims its lease as the same holder; empty: the node's name,
	// replaced by a new host's name on a handoff.
	Holder string
	// ClockOffset is the node's clock error at the start (wall minus true
	// time).
	ClockOffset time.Duration
	// Exec is the command the node runs under an exec target (set by
	// Target.Apply); nil otherwise.
	Exec *Exec
	// Line is the node's line.
	Line int
}

// WorkerRange is an inclusive range of worker IDs.
type WorkerRange struct {
	Min, Max int64
}

// Len is the number of worker IDs in r.
func (r WorkerRange) Len() int64 { return r.Max - r.Min + 1 }

// String returns "min-max".
func (r WorkerRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// Lease backends a node may name, and the kinds LeaseKind returns: a
// Postgres, etcd or ZooKeeper lease is written as the store's URL.
const (
	LeaseNone      = "none"
	LeaseMemory    = "memory"
	LeasePostgres  = "postgres"
	LeaseEtcd      = "etcd"
	LeaseZooKeeper = "zookeeper"
)

// LeaseKind returns the kind of lease backend v names: LeaseNone for ""
// or "none", LeaseMemory, LeasePostgres for a postgres:// or postgresql://
// URL, LeaseEtcd for an etcd:// URL, LeaseZooKeeper for a zk:// URL, and
// "" for anything else. It only looks at the scheme; the parser checks the
// rest.
func LeaseKind(v string) string {
	switch v {
	case "", LeaseNone:
		return LeaseNone
	case LeaseMemory:
		return LeaseMemory
	}
	scheme, _, ok := strings.Cut(v, "://")
	if !ok {
		return ""
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return LeasePostgres
	case "etcd":
		return LeaseEtcd
	case zkurl.Scheme:
		return LeaseZooKeeper
	}
	return ""
}

// Target is one generator variant to run the scenario against. Fields
// other than Name and Use override the nodes' settings when set.
type Target struct {
	// Name is the row name in reports; unique within the scenario.
	Name string
	// Use is the registered target kind that runs the nodes (for example
	// "wait", "bad-no-rewind-check"); it defaults to Name.
	Use string
	// Policy, when non-nil, replaces every node's policy.
	Policy *generator.Policy
	// MaxWait, MaxLead and Reserve replace the nodes' values when non-zero.
	MaxWait, MaxLead, Reserve time.Duration
	// Lease replaces every node's lease backend when non-empty.
	Lease string
	// Checkpoint, when non-nil, replaces every node's checkpoint setting.
	Checkpoint *bool
	// LeaseTTL replaces the nodes' lease TTL when non-zero.
	LeaseTTL time.Duration
	// HandoffGuard, PauseCheck, Fence and MarkWriteThrough, when non-nil,
	// switch the lease's handoff guard, pause check, fence and mark
	// write-through on every node (off: a negative control).
	HandoffGuard, PauseCheck, Fence, MarkWriteThrough *bool
	// PeerClockCheck, when non-nil, switches the peer clock check at start
	// on every node (off: a negative control); PeerClockMaxSkew replaces
	// its bound when non-zero.
	PeerClockCheck   *bool
	PeerClockMaxSkew time.Duration
	// FenceMargin, when non-nil, switches the lease fence's safety margin
	// on every node (off: a negative control).
	FenceMargin *bool
	// Exec is the command an exec target (Use "exec") runs; nil for the
	// other targets.
	Exec *Exec
	// NotApplicable opts the target in to the "n/a" outcome: when its
	// capabilities do not cover the scenario (a fault kind, a lease, a
	// checkpoint, simulated time) its row is reported as not applicable,
	// with the reason, instead of the scenario being rejected.
	NotApplicable bool
	// Invariants are thresholds for this target only (the cost its policy
	// should have): they add to the scenario's invariants and replace
	// those on the same subject.
	Invariants []Expr
	// RealNA, when set, says why the target's run means nothing in real
	// mode (a negative control the wall clock cannot catch reliably): in
	// real mode its run is then n/a with this reason, never a pass.
	RealNA string
	// Line is the target's line.
	Line int
}

// Apply returns the node with the target's overrides applied.
func (t Target) Apply(n Node) Node {
	if t.Policy != nil {
		n.Policy = *t.Policy
	}
	if t.MaxWait != 0 {
		n.MaxWait = t.MaxWait
	}
	if t.MaxLead != 0 {
		n.MaxLead = t.MaxLead
	}
	if t.Reserve != 0 {
		n.Reserve = t.Reserve
	}
	if t.Lease != "" {
		n.Lease = t.Lease
	}
	if t.Checkpoint != nil {
		n.Checkpoint = *t.Checkpoint
	}
	if t.LeaseTTL != 0 {
		n.LeaseTTL = t.LeaseTTL
	}
	if t.HandoffGuard != nil {
		n.NoHandoffGuard = !*t.HandoffGuard
	}
	if t.PauseCheck != nil {
		n.NoPauseCheck = !*t.PauseCheck
	}
	if t.Fence != nil {
		n.NoFence = !*t.Fence
	}
	if t.Exec != nil {
		n.Exec = t.Exec
	}
	if t.MarkWriteThrough != nil {
		n.NoMarkWriteThrough = !*t.MarkWriteThrough
	}
	if t.PeerClockCheck != nil {
		n.NoPeerClockCheck = !*t.PeerClockCheck
	}
	if t.PeerClockMaxSkew != 0 {
		n.PeerClockMaxSkew = t.PeerClockMaxSkew
	}
	if t.FenceMargin != nil {
		n.NoFenceMargin = !*t.FenceMargin
	}
	return n
}

// Load is an open-model request load: requests arrive on schedule whether
// or not earlier ones were answered (except in "max" stages).
type Load struct {
	// PerNode is true when each stage's rate applies to every node; false
	// when it is the total, spread over the running nodes.
	PerNode bool
	// Clients is the number of independent clients (arrival streams) per
	// node (PerNode) or in total; each is one sequential stream.
	Clients int
	// Batch is the number of IDs each request asks for.
	Batch int
	// Stages run one after another from the start of the run.
	Stages []Stage
	// FaultBurst, in real mode, is how long before and after each clock
	// fault's instant the clients of its nodes send back to back (each
	// its next request as soon as the last is answered) instead of at the
	// stage's rate, so that calls are in flight across the instant and in
	// every millisecond a small step back replays. Zero: off.
	FaultBurst time.Duration
	// Line is the load's line.
	Line int
}

// Stage is one load stage.
type Stage struct {
	// Rate is requests per second; ignored when Max.
	Rate float64
	// Max means as fast as possible: each client sends its next request
	// as soon as the previous one is answered.
	Max bool
	// For is the stage's length.
	For time.Duration
	// Line is the stage's line.
	Line int
}

// Simulation tunes how simulated mode samples the load. Around each
// fault's hot points the full rate is simulated; elsewhere the rate is
// capped so that a run stays within Budget requests.
type Simulation struct {
	// Budget is the number of requests a run aims to stay under; zero
	// means DefaultBudget.
	Budget int
	// Hot is how long after each hot point the full rate runs; zero means
	// DefaultHot.
	Hot time.Duration
	// Service is the simulated cost of one call in "max" stages; zero
	// means DefaultService.
	Service time.Duration
	// Line is the section's line (0 when absent).
	Line int
}

// Simulation defaults.
const (
	DefaultBudget  = 200_000
	DefaultHot     = 2 * time.Second
	DefaultService = 2 * time.Microsecond
	// HotLead is how long before each hot point the full rate starts.
	HotLead = 100 * time.Millisecond
	// DefaultTail is how long a fault's observation window lasts after
	// its effect ends, unless the fault sets observe.
	DefaultTail = time.Second
)

// Fault is one timed fault: where and when it strikes, and (embedded) its
// kind and parameters in the one shape every interface shares. The
// embedded faults.Fault's At, a leap's instant, is shadowed by the
// offset At here: a scenario's leap strikes at its own At. Encoding a
// Fault as JSON writes the embedded kind and parameters only, in the
// admin API's form (faults.Fault.MarshalJSON).
type Fault struct {
	// Name identifies the fault in invariants ("during leap") and reports;
	// it defaults to the kind, with -2, -3... for repeats.
	Name string
	faults.Fault
	// At is the offset from the run's start.
	At time.Duration
	// Nodes are the names of the nodes it acts on, never empty.
	Nodes []string
	// All is true when the file said nodes: all.
	All bool
	// Partition is true for a store outage that names its nodes: only
	// their hosts lose the store, everyone else (clones and handoffs
	// started meanwhile included) still reaches it.
	Partition bool
	// Observe is the length of the fault's observation window from At;
	// zero means Span() plus DefaultTail.
	Observe time.Duration
	// Line is the fault's line.
	Line int
}

// Span is how long the fault's effect lasts from At: the time a clock
// needs to catch up after a step back, a freeze or pause, a smear window,
// a slew's duration, a restart's down time, a handoff's gap plus the new
// host's lag. Drift and a clone without `for` last until the end (the
// remaining duration is passed in).
func (f Fault) Span(remaining time.Duration) time.Duration {
	switch f.Kind {
	case faults.KindStep:
		if f.By < 0 {
			return -f.By
		}
		return 0
	case faults.KindFreeze, faults.KindPause:
		if f.For == 0 {
			return remaining
		}
		return f.For
	case faults.KindLeap:
		return time.Second
	case faults.KindSmear:
		return f.Window
	case faults.KindSlew:
		return f.SlewDuration()
	case faults.KindDrift:
		return remaining
	case faults.KindRestart:
		d := f.For
		if f.OffsetWhileDown < 0 {
			d += -f.OffsetWhileDown
		}
		return d
	case faults.KindClone:
		if f.For == 0 {
			return remaining
		}
		return f.For
	case faults.KindStoreOutage, faults.KindStorePause:
		return f.For
	case faults.KindStoreStep:
		return max(f.By, -f.By)
	case faults.KindStoreDrift:
		return remaining
	case faults.KindHandoff:
		d := f.Gap
		if f.Behind > f.Gap {
			d = f.Behind
		}
		return d
	}
	return 0
}

// SlewDuration is how long a slew of By at PPM takes.
func (f Fault) SlewDuration() time.Duration {
	ppm := f.PPM
	if ppm == 0 {
		ppm = faults.DefaultSlewPPM
	}
	by := f.By
	if by < 0 {
		by = -by
	}
	return time.Duration(float64(by) * 1e6 / ppm)
}

// Observed is the fault's observation window [start, end) as offsets from
// the run's start, clipped to the run's duration: availability, gaps and
// other figures "during" the fault are measured over it.
func (f Fault) Observed(duration time.Duration) (start, end time.Duration) {
	start = f.At
	if f.Observe > 0 {
		end = f.At + f.Observe
	} else {
		end = f.At + f.Span(duration-f.At) + DefaultTail
	}
	if end > duration {
		end = duration
	}
	if end <= start {
		end = start + 1
	}
	return start, end
}

// HotPoints are the offsets at which the fault changes something abruptly;
// simulated mode runs the full load around each.
func (f Fault) HotPoints(duration time.Duration) []time.Duration {
	pts := []time.Duration{f.At}
	if end := f.At + f.Span(duration-f.At); end != f.At && end < duration {
		pts = append(pts, end)
	}
	return pts
}

// Expectation is a negative control: what the harness must catch a target
// doing. The run passes for the target when every expression holds.
type Expectation struct {
	// Target is the target's name.
	Target string
	// Exprs must all hold.
	Exprs []Expr
	// Line is the expectation's line.
	Line int
}

// ExpectationFor returns the expectation for the named target, if any.
func (s *Scenario) ExpectationFor(target string) (Expectation, bool) {
	for _, e := range s.Expect {
		if e.Target == target {
			return e, true
		}
	}
	return Expectation{}, false
}

// Node returns the named node.
func (s *Scenario) Node(name string) (Node, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// FaultsNamed returns the faults an invariant's "during X" refers to: the
// fault named X, or else every fault of kind X.
func (s *Scenario) FaultsNamed(x string) []Fault {
	for _, f := range s.Faults {
		if f.Name == x {
			return []Fault{f}
		}
	}
	var out []Fault
	for _, f := range s.Faults {
		if string(f.Kind) == x {
			out = append(out, f)
		}
	}
	return out
}

// ChecksFor returns the expressions a target is judged by. For a target
// without an expectation: the scenario's invariants. For a negative
// control (a target with an expectation): its expectations decide the
// verdict (marked Expected), and the invariants on other subjects follow,
// marked Informational: they are measured and shown but do not count.
func (s *Scenario) ChecksFor(target string) []Expr {
	invs := s.invariantsFor(target)
	exp, ok := s.ExpectationFor(target)
	if !ok {
		return invs
	}
	restated := map[string]bool{}
	var out []Expr
	for _, e := range exp.Exprs {
		restated[e.Subject()] = true
		e.Expected = true
		out = append(out, e)
	}
	for _, e := range invs {
		if !restated[e.Subject()] {
			e.Informational = true
			out = append(out, e)
		}
	}
	return out
}

// invariantsFor merges the scenario's invariants with the target's own:
// a target invariant replaces a scenario invariant on the same subject.
func (s *Scenario) invariantsFor(target string) []Expr {
	var own []Expr
	for _, t := range s.Targets {
		if t.Name == target {
			own = t.Invariants
		}
	}
	mine := map[string]bool{}
	for _, e := range own {
		mine[e.Subject()] = true
	}
	var out []Expr
	for _, e := range s.Invariants {
		if !mine[e.Subject()] {
			out = append(out, e)
		}
	}
	return append(out, own...)
}

// TimeOrder returns the faults sorted by At (stable, so file order breaks
// ties).
func (s *Scenario) TimeOrder() []Fault {
	out := append([]Fault(nil), s.Faults...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// String returns "name (file)".
func (s *Scenario) String() string {
	if s.File == "" {
		return s.Name
	}
	return fmt.Sprintf("%s (%s)", s.Name, s.File)
}

// Error is one problem in a scenario file, at a line. Key is the dotted
// path of the offending key, for example "faults[2].by".
type Error struct {
	File   string
	Line   int
	Column int
	Key    string
	Msg    string
}

// Error returns "file:line: key: msg".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%d: ", e.Line)
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one file, in line order.
type ErrorList []*Error

// Error joins the problems, one a line.
func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the problems, for errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list, else the list sorted by line.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
	return l
}
