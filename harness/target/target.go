// Package target is what the harness runs scenarios against: a Target
// starts Nodes, and a Node issues IDs, stops, starts again and, when the
// target allows it, lets the harness fault its host's clock.
//
// The in-process targets live here: the generator package with any policy
// and layout ("inprocess"), and the known-bad reference generators
// ("bad-no-rewind-check", ...). HTTP nodes and child processes implement
// the same two interfaces and register themselves with Register.
//
// Vocabulary: a node is one worker's generator as the scenario names it; it
// runs on a host, which owns a clock and a disk (the checkpoint). A restart
// stops and starts the node on the same host; a clone is a second Start
// with the same NodeSpec on another host; a handoff stops a node and starts
// its worker ID on another host.
package target

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/verify"
)

// Target starts nodes of one kind of generator. Implementations are safe
// for concurrent use.
type Target interface {
	// Info describes the target and what it lets the harness do.
	Info() Info
	// Start starts a node on a host described by spec, with env's clock
	// and lease registry. A node whose lease cannot be acquired fails to
	// start (the error wraps the lease error).
	Start(ctx context.Context, spec NodeSpec, env Env) (Node, error)
}

// Info describes a target.
type Info struct {
	// Name is the name scenarios use for it ("inprocess",
	// "bad-no-rewind-check").
	Name string
	// Doc says in a sentence what it runs.
	Doc string
	// KnownBad marks a reference generator that is wrong on purpose.
	KnownBad bool
	// Caps says what the harness may do to its nodes.
	Caps Capabilities
}

// Capabilities says what a target lets the harness do to its nodes. The
// harness refuses a scenario that asks for more (for example a slew on a
// target whose clock it cannot control).
type Capabilities struct {
	// Faults lists the fault kinds the harness may inject.
	Faults []faults.Kind
	// Simulated is true when nodes take their host clock from Env.Base,
	// so they can run on virtual time.
	Simulated bool
	// Checkpoint is true when the node honours NodeSpec.Checkpoint.
	Checkpoint bool
	// Leases lists the lease backend kinds the node honours
	// (scenario.LeaseMemory, LeasePostgres, LeaseEtcd, LeaseZooKeeper).
	Leases []string
	// OffsetTolerance is how precisely ClockControl.Offset measures the
	// host clock's offset; zero means DefaultOffsetTolerance.
	OffsetTolerance time.Duration
}

// DefaultOffsetTolerance is the offset precision assumed when a target
// states none.
const DefaultOffsetTolerance = 100 * time.Microsecond

// Supports reports whether the harness may inject fault kind k.
func (c Capabilities) Supports(k faults.Kind) bool {
	for _, x := range c.Faults {
		if x == k {
			return true
		}
	}
	return false
}

// SupportsLease reports whether the node honours lease backend b: "none",
// "memory" or a lease store's URL, matched by its kind (scenario.LeaseKind).
func (c Capabilities) SupportsLease(b string) bool {
	k := scenario.LeaseKind(b)
	if k == scenario.LeaseNone {
		return true
	}
	if k == "" {
		return false
	}
	for _, x := range c.Leases {
		if x == k {
			return true
		}
	}
	return false
}

// NodeSpec is one node as the scenario (and target overrides) describe it.
type NodeSpec struct {
	// Name is the node's name in the scenario; a clone is "<name>-clone".
	Name string
	// Host identifies the host the node runs on; it is the lease holder.
	// Restarts keep it; clones and handoffs get a new one (a clone with
	// the original's identity keeps it, and so does a handoff of a node
	// with a sticky holder identity, scenario.Node.Holder).
	Host string
	// Worker is the worker ID, or with a lease the preferred one.
	Worker int64
	// Layout is the bit layout.
	Layout generator.Layout
	// Policy, MaxWait, MaxLead and Reserve configure the generator.
	Policy                    generator.Policy
	MaxWait, MaxLead, Reserve time.Duration
	// Checkpoint keeps a high-water mark on the host's disk.
	Checkpoint bool
	// Lease is the lease backend: "none", "memory" or a lease store's URL
	// (see scenario.LeaseKind).
	Lease string
	// ClockOffset is the host clock's error when the node first starts.
	ClockOffset time.Duration
	// LeaseTTL is the lease duration; zero means lease.DefaultTTL.
	LeaseTTL time.Duration
	// WorkerRange is the range of worker IDs to lease from; nil means the
	// layout's whole node field.
	WorkerRange *lease.Range
	// NoHandoffGuard starts a new holder at once whatever the previous
	// holder of its worker ID issued (a negative control).
	NoHandoffGuard bool
	// NoPauseCheck lets the node issue after a VM pause without first
	// re-validating its lease (a negative control).
	NoPauseCheck bool
	// NoFence lets the node issue whether it holds its lease or not (a
	// negative control).
	NoFence bool
	// Exec is the command of an exec target's node; nil for other targets.
	Exec *scenario.Exec
	// NoMarkWriteThrough writes the node's mark to the lease store only at
	// renewal and release (a negative control: after a crash the stored
	// mark lags what was issued).
	NoMarkWriteThrough bool
	// NoPeerClockCheck starts the node whatever its clock reads against
	// its live peers' (a negative control).
	NoPeerClockCheck bool
	// PeerClockMaxSkew is the peer clock check's bound; zero means
	// lease.DefaultPeerClockMaxSkew.
	PeerClockMaxSkew time.Duration
	// NoFenceMargin keeps the lease fence open for the whole TTL, with no
	// safety margin (a negative control).
	NoFenceMargin bool
}

// SpecOf returns the NodeSpec of a scenario node.
func SpecOf(n scenario.Node) NodeSpec {
	spec := NodeSpec{
		Name: n.Name, Host: n.Name, Worker: n.Worker, Layout: n.Layout,
		Policy: n.Policy, MaxWait: n.MaxWait, MaxLead: n.MaxLead, Reserve: n.Reserve,
		Checkpoint: n.Checkpoint, Lease: n.Lease, ClockOffset: n.ClockOffset,
		LeaseTTL: n.LeaseTTL, NoHandoffGuard: n.NoHandoffGuard, NoPauseCheck: n.NoPauseCheck, NoFence: n.NoFence,
		Exec:               n.Exec,
		NoMarkWriteThrough: n.NoMarkWriteThrough,
		NoPeerClockCheck:   n.NoPeerClockCheck, PeerClockMaxSkew: n.PeerClockMaxSkew,
		NoFenceMargin: n.NoFenceMargin,
	}
	if n.Holder != "" {
		spec.Host = n.Holder // the identity the node keeps on every host
	}
	if r := n.WorkerRange; r != nil {
		spec.WorkerRange = &lease.Range{Min: r.Min, Max: r.Max}
	}
	return spec
}

// Env is what the harness gives a node's host.
type Env struct {
	// Base is the host's true-time clock: a virtual clock per host in
	// simulated mode, the system clock in real mode. In-process nodes
	// build their faulted clock over it; remote nodes may ignore it.
	Base generator.Clock
	// Leases is the run's lease registry, shared by every node of the
	// run; nil when no node leases.
	Leases lease.Registry
	// Metrics, when set, receives the generator's events; nodes that run
	// the generator package also let it read their counters.
	Metrics *telemetry.NodeMetrics
	// Run identifies the run (scenario, target, seed and a sequence number
	// unique within this process). Targets that keep per-run state outside
	// the process, such as a lease schema in a shared store, key it by Run
	// and free it in EndRun (RunEnder).
	Run string
}

// RunEnder is implemented by targets that keep per-run state; the harness
// calls EndRun once a run's nodes are all closed.
type RunEnder interface {
	// EndRun frees what the target kept for run (Env.Run).
	EndRun(ctx context.Context, run string) error
}

// Node is one running (or stopped) node. Issue may be called concurrently;
// the lifecycle methods are called by one goroutine at a time.
type Node interface {
	// Issue fills dst with IDs; n < len(dst) only with an error. A
	// stopped node fails with ErrStopped.
	Issue(ctx context.Context, dst []generator.ID) (int, error)
	// Stop stops the node. Everything the node held in memory is lost; a
	// graceful stop also closes the generator (persisting its final mark)
	// and releases its lease, and wipe loses the host's checkpoint too.
	Stop(ctx context.Context, o StopOptions) error
	// Start starts a stopped node again on the same host (a restart).
	Start(ctx context.Context) error
	// Clock returns the controls of the host's clock, or nil when the
	// harness cannot control it.
	Clock() ClockControl
	// Maintain does the periodic work due now (lease renewal) and returns
	// how long until it is due again; negative when the node needs none
	// (or does it by itself). Simulated runs call it on virtual time.
	Maintain(ctx context.Context) time.Duration
	// Worker returns the worker ID the node issues with (a lease may have
	// granted another than NodeSpec.Worker); -1 while stopped.
	Worker() int64
	// Close stops the node for good and frees its resources.
	Close() error
}

// WideTarget is implemented by targets whose nodes may issue IDs other
// than 64-bit Snowflakes: 128-bit IDs (UUIDs, ULIDs) or opaque strings.
// Their nodes implement WideNode.
type WideTarget interface {
	Target
	// IDKind returns the kind of ID the nodes Start makes for spec issue.
	IDKind(spec NodeSpec) verify.Kind
}

// KindOf returns the kind of ID the nodes t starts for spec issue:
// KindSnowflake unless t is a WideTarget. The harness checks one kind per
// run (every node of a run has the same target entry).
func KindOf(t Target, spec NodeSpec) verify.Kind {
	if wt, ok := t.(WideTarget); ok {
		return wt.IDKind(spec)
	}
	return verify.KindSnowflake
}

// WideNode is a node of a WideTarget whose kind is not KindSnowflake: the
// harness calls the method for the kind instead of Issue. Both methods
// fill dst as Issue does (n < len(dst) only with an error); the one for
// another kind than the node's fails with ErrUnsupported, as does Issue.
type WideNode interface {
	Node
	// IssueWide fills dst with 128-bit IDs.
	IssueWide(ctx context.Context, dst []verify.ID128) (int, error)
	// IssueStrings fills dst with string IDs.
	IssueStrings(ctx context.Context, dst []string) (int, error)
}

// LeaseNode is implemented by nodes that hold a worker-ID lease; the
// harness reads it for the report and to follow rebinds.
type LeaseNode interface {
	// LeaseStats returns the node's lease counters, summed over every
	// lease keeper the node ran (restarts included).
	LeaseStats() lease.Counters
}

// FaultExplainer is implemented by targets that can say why a fault cannot
// reach their nodes; the harness puts the reason on a not-applicable row.
type FaultExplainer interface {
	// NotApplicable returns why f cannot reach the target's nodes, or ""
	// when it can.
	NotApplicable(f scenario.Fault) string
}

// StopOptions says how a node stops.
type StopOptions struct {
	// Graceful closes the generator and releases the lease (a planned
	// shutdown, as before a handoff); otherwise the node crashes.
	Graceful bool
	// Wipe loses the host's persisted checkpoint too.
	Wipe bool
}

// ClockControl applies clock faults to a node's host and measures their
// effect.
type ClockControl interface {
	// Apply injects the fault now.
	Apply(ctx context.Context, f faults.Fault) error
	// Offset returns the host clock's current offset as the node itself
	// reads it: its wall reading minus true time. The harness compares it
	// before and after a fault to confirm the fault took effect, so it
	// must come from the node's own evidence, never from a process beside
	// it. An error wrapping ErrNotReached says the fault cannot have
	// reached the node; one wrapping ErrNoReading says the node offers no
	// reading of its own (the harness then looks for the faulted time in
	// the IDs it issues).
	Offset(ctx context.Context) (time.Duration, error)
}

// Bracketed is implemented by a ClockControl whose readings come from a
// round trip to a process: OffsetWithin returns the offset and the
// half-width of the interval of true time the reading was taken in, which
// the harness adds to its tolerance (and which the fault's effect must
// stand above).
type Bracketed interface {
	ClockControl
	// OffsetWithin is Offset with the reading's half-width.
	OffsetWithin(ctx context.Context) (off, half time.Duration, err error)
}

// Diagnoser is implemented by a ClockControl that can describe how a fault
// looks from beside the node (a clock probe under the same interposer): a
// diagnostic for the report when the node's own evidence is missing or
// disagrees, never evidence that the fault reached the node.
type Diagnoser interface {
	// Diagnose returns one line saying what the probe beside the node
	// reads, or why it cannot.
	Diagnose(ctx context.Context) string
}

// Witness is implemented by nodes whose process the harness did not write:
// they keep what the process showed of itself that the harness judges a
// run by beyond its IDs.
type Witness interface {
	// Violations returns the protocol violations of the node's processes
	// from the i-th on (0: all), oldest first; the harness reads them
	// after failed calls, after every stop and once the node is closed.
	Violations(i int) []Violation
}

// Violation is an answer that broke the exec protocol: a line that is
// neither an ID of the declared kind nor a refusal, more or fewer lines
// or IDs than asked, an over-long line, output nobody asked for. A stdio
// process is killed at its first violation (its pipe is out of step); a
// run with a violation is never a pass.
type Violation struct {
	// Process numbers the node's processes from 0 (restarts count up).
	Process int
	// PID is the process's ID.
	PID int
	// Detail says what was wrong, quoting the offending text (clipped).
	Detail string
}

// Errors.
var (
	// ErrStopped: the node is stopped.
	ErrStopped = errors.New("target: node stopped")
	// ErrUnsupported: the target cannot do what was asked.
	ErrUnsupported = errors.New("target: unsupported")
	// ErrUnknown: no target of that name is registered.
	ErrUnknown = errors.New("target: unknown target")
	// ErrRefused: the node answered, refusing to issue (a process's
	// "refused: ..." line, an HTTP status other than 200): the harness
	// counts it as a refusal, not as an error of the transport.
	ErrRefused = errors.New("target: refused")
	// ErrProtocol: a node's answer broke its protocol (see Violation).
	ErrProtocol = errors.New("target: protocol violation")
	// ErrNotReached: a fault cannot have reached the node's process (the
	// interposer that carries clock faults is not loaded in it).
	ErrNotReached = errors.New("target: the fault cannot reach the process")
	// ErrNoReading: the node offers no clock reading of its own.
	ErrNoReading = errors.New("target: the process answers no clock reading")
	// ErrArtifact: the fault reached the process with an artifact the
	// scenario did not ask for (a freeze that landed after the instant it
	// holds may have shown it a step back): what the process did in its
	// window cannot be judged either way.
	ErrArtifact = errors.New("target: the fault may have reached the process with an artifact")
)

var registry = struct {
	sync.Mutex
	m map[string]Target
}{m: map[string]Target{}}

// Register makes a target available by its Info().Name; registering a
// name twice panics.
func Register(t Target) {
	registry.Lock()
	defer registry.Unlock()
	name := t.Info().Name
	if _, dup := registry.m[name]; dup {
		panic("target: duplicate target " + name)
	}
	registry.m[name] = t
}

// Lookup returns the registered target with the given name; the error
// wraps ErrUnknown and lists the known names.
func Lookup(name string) (Target, error) {
	registry.Lock()
	defer registry.Unlock()
	if t, ok := registry.m[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknown, name, namesLocked())
}

// Names returns the registered target names, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(registry.m))
	for n := range registry.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
