package target

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/reference"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
)

// InProcessName is the name of the in-process generator target.
const InProcessName = "inprocess"

func init() {
	Register(&InProcess{})
	for _, r := range reference.All() {
		Register(&InProcess{Reference: r.Name})
	}
}

// InProcess runs nodes in this process on a faults.Clock over the host's
// base clock: the generator package with the NodeSpec's policy, layout,
// checkpoint and lease when Reference is empty, else the named known-bad
// reference generator (which ignores checkpoint, lease and policy: that is
// its bug). Every fault kind is supported.
//
// A leasing node keeps its lease through Maintain (Keeper.Tick, never a
// goroutine of its own), and when the Keeper loses the lease and acquires
// another, Maintain closes the generator, calls Keeper.Rebind and builds a
// new generator on the new worker ID.
type InProcess struct {
	// Reference names a reference generator ("bad-no-rewind-check"); empty
	// runs the generator package.
	Reference string
}

var (
	_ Target       = (*InProcess)(nil)
	_ LeaseNode    = (*procNode)(nil)
	_ CrashPointer = (*procNode)(nil)
)

// Info implements Target.
func (t *InProcess) Info() Info {
	caps := Capabilities{Faults: faults.Kinds(faults.InScenario), Simulated: true, OffsetTolerance: time.Microsecond}
	if t.Reference == "" {
		caps.Checkpoint = true
		caps.Leases = []string{scenario.LeaseMemory}
		return Info{Name: InProcessName, Doc: "the generator package in this process, with the node's policy, layout, checkpoint and lease", Caps: caps}
	}
	for _, r := range reference.All() {
		if r.Name == t.Reference {
			return Info{Name: r.Name, Doc: "known-bad: " + r.Bug + " (caught by " + r.CaughtBy + ")", KnownBad: true, Caps: caps}
		}
	}
	return Info{Name: t.Reference, Doc: "unknown reference generator", KnownBad: true, Caps: caps}
}

// Start implements Target.
func (t *InProcess) Start(ctx context.Context, spec NodeSpec, env Env) (Node, error) {
	if env.Base == nil {
		return nil, fmt.Errorf("%w: no base clock", ErrUnsupported)
	}
	n := &procNode{t: t, spec: spec, env: env, host: NewHost(env.Base, spec.ClockOffset)}
	n.disk.crash = &n.crash
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// issuer is what both a node and the reference generators offer.
type issuer interface {
	Issue(ctx context.Context, dst []generator.ID) (int, error)
}

// refIssuer adapts a reference generator.
type refIssuer struct{ g reference.Generator }

func (r refIssuer) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	return r.g.NextNContext(ctx, dst)
}

// procNode is an in-process node on its host (clock and disk). The
// generator package runs as a node.Node, composed as snowchaos serve
// composes it; a reference generator runs bare.
type procNode struct {
	t     *InProcess
	spec  NodeSpec
	env   Env
	host  *Host
	disk  disk
	crash crashState
	// kills counts the stops that were crashes: a call in flight when one
	// came is not answered (a killed process sends nothing), whatever the
	// old generator still computes.
	kills atomic.Uint64

	mu struct {
		sync.RWMutex
		node   *node.Node // nil for a reference generator or while stopped
		ref    reference.Generator
		leases lease.Counters // of the nodes stopped so far
	}
}

// disk is the host's persisted checkpoint: it survives restarts and is lost
// only when wiped. A Save replaces the mark, as generator.FileCheckpoint's
// rename does (a graceful stop's final mark may be below the reserved
// one). It writes, then syncs; a crash at an armed point between them
// (crash.reach) loses the write, and a crashed process writes nothing.
type disk struct {
	crash *crashState
	mu    sync.Mutex
	mark  int64
}

func (d *disk) Load() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mark, nil
}

func (d *disk) Save(_ context.Context, mark int64) error {
	if d.crash.reach(faults.PointBeforeWrite) {
		return errDead
	}
	// Written to the page cache: a crash before the sync loses it.
	if d.crash.reach(faults.PointBeforeSync) {
		return errDead
	}
	d.mu.Lock()
	d.mark = mark
	d.mu.Unlock()
	d.crash.reach(faults.PointAfterSync) // durable: a crash now keeps it
	return nil
}

func (d *disk) wipe() {
	d.mu.Lock()
	d.mark = 0
	d.mu.Unlock()
}

// Start implements Node.
func (n *procNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.node != nil || n.mu.ref != nil {
		return nil
	}
	n.crash.reset()
	s := generator.Settings{
		Layout: n.spec.Layout, Node: n.spec.Worker, Policy: n.spec.Policy,
		MaxWait: n.spec.MaxWait, MaxLead: n.spec.MaxLead, Reserve: n.spec.Reserve,
		Clock: n.host.Clock,
	}
	if n.t.Reference != "" {
		if n.env.Metrics != nil {
			s.Observer = n.env.Metrics
		}
		g, err := reference.New(n.t.Reference, s)
		if err != nil {
			return err
		}
		n.mu.ref = g
		return nil
	}
	cfg := node.Config{Settings: s, Metrics: n.env.Metrics, Name: n.spec.Name}
	if n.spec.Checkpoint {
		cfg.Checkpoint = &n.disk
	}
	if n.spec.Lease == scenario.LeaseMemory {
		if n.env.Leases == nil {
			return fmt.Errorf("%w: node %s leases from memory but the run has no registry", ErrUnsupported, n.spec.Name)
		}
		// One attempt: a node that cannot reach the store fails to start
		// (the harness decides when to try again); waiting here would stall
		// a simulation, whose store comes back only as its time moves on.
		cfg.Lease = &node.Lease{
			Registry: n.env.Leases, Holder: n.spec.Host, Range: n.spec.WorkerRange, TTL: n.spec.LeaseTTL, OneAttempt: true,
			PeerClockMaxSkew: n.spec.PeerClockMaxSkew,
			Controls: node.Controls{NoHandoffGuard: n.spec.NoHandoffGuard, NoPauseCheck: n.spec.NoPauseCheck, NoFence: n.spec.NoFence,
				NoMarkWriteThrough: n.spec.NoMarkWriteThrough, NoPeerClockCheck: n.spec.NoPeerClockCheck, NoFenceMargin: n.spec.NoFenceMargin},
		}
	}
	nd, err := node.New(ctx, cfg)
	if err != nil {
		if cfg.Lease != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		return err
	}
	n.mu.node = nd
	return nil
}

// LeaseStats implements LeaseNode.
func (n *procNode) LeaseStats() lease.Counters {
	n.mu.RLock()
	defer n.mu.RUnlock()
	st := n.mu.leases
	if nd := n.mu.node; nd != nil {
		st = st.Add(nd.LeaseStats().Counters)
	}
	return st
}

// Issue implements Node. During a VM pause the call waits, on the host's
// base clock, for the pause to end, as a paused guest would.
func (n *procNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	n.mu.RLock()
	nd, ref, kills := n.mu.node, n.mu.ref, n.kills.Load()
	n.mu.RUnlock()
	var is issuer
	switch {
	case nd != nil:
		is = nd
	case ref != nil:
		is = refIssuer{ref}
	default:
		return 0, ErrStopped
	}
	if n.crash.dead() {
		return 0, ErrStopped
	}
	n.host.WaitPause()
	tok := untracked
	if n.crash.watch.Load() { // a crash point is armed (simulated runs only)
		var stats func() generator.Stats
		if nd != nil {
			stats = func() generator.Stats {
				if g := nd.Generator(); g != nil {
					return g.Stats()
				}
				return generator.Stats{}
			}
		}
		tok = n.crash.enter(len(dst), stats)
	}
	k, err := is.Issue(ctx, dst)
	if tok == outermost && k > 0 {
		n.crash.answered()
	}
	if n.crash.leave(tok) {
		return 0, ErrCrashed // the process died before it answered
	}
	if n.kills.Load() != kills {
		// Killed during the call: the old process is gone, and what it
		// would have answered never reaches the client. Left to answer,
		// it would issue beside its successor, from a mark its successor
		// loaded before it saved the next one.
		return 0, ErrStopped
	}
	if errors.Is(err, node.ErrStopped) {
		err = ErrStopped
	}
	return k, err
}

// ArmCrash implements CrashPointer (the generator package's nodes only: a
// reference generator keeps no checkpoint).
func (n *procNode) ArmCrash(point string, inFlight func()) error {
	if n.t.Reference != "" {
		return fmt.Errorf("%w: %s keeps no checkpoint, so no call reaches a crash point", ErrUnsupported, n.t.Reference)
	}
	return n.crash.arm(point, inFlight)
}

// Crashed implements CrashPointer.
func (n *procNode) Crashed() bool { return n.crash.dead() }

// Stop implements Node.
func (n *procNode) Stop(ctx context.Context, o StopOptions) error {
	n.mu.Lock()
	nd, ref := n.mu.node, n.mu.ref
	n.mu.node, n.mu.ref = nil, nil
	if !o.Graceful {
		n.kills.Add(1)
	}
	n.mu.Unlock()
	var err error
	if ref != nil && o.Graceful {
		err = ref.Close()
	}
	if nd != nil {
		err = nd.Stop(ctx, o.Graceful)
		n.mu.Lock()
		n.mu.leases = n.mu.leases.Add(nd.LeaseStats().Counters)
		n.mu.Unlock()
	}
	n.crash.reset()
	if o.Wipe {
		n.disk.wipe()
	}
	return err
}

// Clock implements Node.
func (n *procNode) Clock() ClockControl { return n.host }

// Maintain implements Node: the node's lease work due now, on the node's
// clock (node.Node.Maintain: the keeper's renewals and a rebind after a
// lost lease). A paused node does nothing until its pause ends, as a
// paused VM runs no goroutine.
func (n *procNode) Maintain(ctx context.Context) time.Duration {
	n.mu.RLock()
	nd := n.mu.node
	n.mu.RUnlock()
	if nd == nil || nd.Keeper() == nil {
		return -1
	}
	if d := n.host.PauseLeft(); d > 0 {
		return d
	}
	return nd.Maintain(ctx)
}

// Worker implements Node.
func (n *procNode) Worker() int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	switch {
	case n.mu.node != nil:
		return n.mu.node.Worker()
	case n.mu.ref != nil:
		return n.spec.Worker
	}
	return -1
}

// Close implements Node: a graceful stop.
func (n *procNode) Close() error {
	return n.Stop(context.Background(), StopOptions{Graceful: true})
}
