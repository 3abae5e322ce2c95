package target

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/reference"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/lease"
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
	_ Target        = (*InProcess)(nil)
	_ LeaseNode     = (*procNode)(nil)
	_ GeneratorNode = (*procNode)(nil)
)

// Info implements Target.
func (t *InProcess) Info() Info {
	caps := Capabilities{Faults: scenario.Kinds(), Simulated: true, OffsetTolerance: time.Microsecond}
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
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// issuer is what both the generator and the reference generators offer.
type issuer interface {
	NextNContext(ctx context.Context, dst []generator.ID) (int, error)
	Close() error
}

// procNode is an in-process node and its host (clock and disk).
type procNode struct {
	t    *InProcess
	spec NodeSpec
	env  Env
	host *Host
	disk disk

	rebindDue atomic.Bool // the keeper acquired a lease the generator is not bound to

	mu struct {
		sync.RWMutex
		gen      issuer
		settings generator.Settings // of gen, for a rebuild
		keeper   *lease.Keeper
		worker   int64
		leases   LeaseStats // of the keepers stopped so far
		rebinds  uint64     // of the current keeper
	}
}

// disk is the host's persisted checkpoint: it survives restarts and is lost
// only when wiped.
type disk struct {
	mu   sync.Mutex
	mark int64
}

func (d *disk) Load() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mark, nil
}

func (d *disk) Save(_ context.Context, mark int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mark = max(d.mark, mark)
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
	if n.mu.gen != nil {
		return nil
	}
	s := generator.Settings{
		Layout: n.spec.Layout, Node: n.spec.Worker, Policy: n.spec.Policy,
		MaxWait: n.spec.MaxWait, MaxLead: n.spec.MaxLead, Reserve: n.spec.Reserve,
		Clock: n.host.Clock, Observer: n.env.Observer,
	}
	if n.t.Reference != "" {
		g, err := reference.New(n.t.Reference, s)
		if err != nil {
			return err
		}
		n.mu.gen, n.mu.worker = g, s.Node
		return nil
	}
	if n.spec.Checkpoint {
		s.Checkpoint = &n.disk
	}
	var k *lease.Keeper
	if n.spec.Lease == scenario.LeaseMemory {
		if n.env.Leases == nil {
			return fmt.Errorf("%w: node %s leases from memory but the run has no registry", ErrUnsupported, n.spec.Name)
		}
		cfg := lease.KeeperConfig{
			Registry:            n.env.Leases,
			Holder:              n.spec.Host,
			Range:               lease.NodeRange(n.spec.Layout.NodeBits),
			Prefer:              []int64{n.spec.Worker},
			TTL:                 n.spec.LeaseTTL,
			Clock:               n.host.Clock,
			DisableHandoffGuard: n.spec.NoHandoffGuard,
			OnChange: func(ev lease.Event) {
				if ev.Rebind {
					n.rebindDue.Store(true)
				}
			},
		}
		if r := n.spec.WorkerRange; r != nil {
			cfg.Range = *r
		}
		if n.spec.NoPauseCheck {
			cfg.PauseThreshold = time.Duration(math.MaxInt64)
		}
		cfg.DisableMarkWriteThrough = n.spec.NoMarkWriteThrough
		var err error
		k, err = lease.NewKeeper(cfg)
		if err != nil {
			return err
		}
		// One attempt: a node that cannot reach the store fails to start
		// (the harness decides when to try again); waiting here would stall
		// a simulation, whose store comes back only as its time moves on.
		l, err := k.TryAcquire(ctx)
		if err != nil {
			n.mu.leases = n.mu.leases.Add(keeperStats(k))
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		s.Node, s.Fence, s.Clock = l.WorkerID, k, k.Clock()
		if n.spec.NoFence {
			s.Fence = nil
		}
		if s.Checkpoint != nil {
			s.Checkpoint = generator.Checkpoints(s.Checkpoint, k)
		} else {
			s.Checkpoint = k
		}
	}
	g, err := generator.New(s)
	if err != nil {
		if k != nil {
			_ = k.Release(ctx)
			n.mu.leases = n.mu.leases.Add(keeperStats(k))
		}
		return err
	}
	n.rebindDue.Store(false)
	n.mu.gen, n.mu.settings, n.mu.keeper, n.mu.worker, n.mu.rebinds = g, s, k, s.Node, 0
	return nil
}

// keeperStats converts a Keeper's counters.
func keeperStats(k *lease.Keeper) LeaseStats {
	st := k.Stats()
	return LeaseStats{
		Acquisitions: st.Acquisitions, AcquireErrors: st.AcquireErrs,
		RenewOK: st.RenewOK, RenewFailed: st.RenewFailed, RenewLost: st.RenewLost,
		Fenced: st.Fenced, ClockJumps: st.ClockJumps, HandoffWaits: st.HandoffWaits,
	}
}

// LeaseStats implements LeaseNode.
func (n *procNode) LeaseStats() LeaseStats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	st := n.mu.leases
	if k := n.mu.keeper; k != nil {
		cur := keeperStats(k)
		cur.Rebinds = n.mu.rebinds
		st = st.Add(cur)
	}
	return st
}

// Issue implements Node. During a VM pause the call waits, on the host's
// base clock, for the pause to end, as a paused guest would.
func (n *procNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	n.mu.RLock()
	g := n.mu.gen
	n.mu.RUnlock()
	if g == nil {
		return 0, ErrStopped
	}
	n.host.WaitPause()
	return g.NextNContext(ctx, dst)
}

// Stop implements Node.
func (n *procNode) Stop(ctx context.Context, o StopOptions) error {
	n.mu.Lock()
	g, k, rebinds := n.mu.gen, n.mu.keeper, n.mu.rebinds
	n.mu.gen, n.mu.keeper, n.mu.worker, n.mu.rebinds = nil, nil, -1, 0
	n.mu.Unlock()
	var err error
	if o.Graceful && g != nil {
		err = g.Close()
		if k != nil {
			if e := k.Release(ctx); e != nil && err == nil {
				err = e
			}
		}
	}
	if k != nil {
		st := keeperStats(k)
		st.Rebinds = rebinds
		n.mu.Lock()
		n.mu.leases = n.mu.leases.Add(st)
		n.mu.Unlock()
	}
	if o.Wipe {
		n.disk.wipe()
	}
	return err
}

// Clock implements Node.
func (n *procNode) Clock() ClockControl { return n.host }

// Maintain implements Node: it does the lease keeper's due work on the
// node's clock (Keeper.Tick) and, when the keeper acquired a new lease
// after losing its old one, rebuilds the generator on it. A paused node
// does nothing until its pause ends, as a paused VM runs no goroutine.
func (n *procNode) Maintain(ctx context.Context) time.Duration {
	n.mu.RLock()
	k := n.mu.keeper
	n.mu.RUnlock()
	if k == nil {
		return -1
	}
	if d := n.host.PauseLeft(); d > 0 {
		return d
	}
	d := k.Tick(ctx)
	if n.rebindDue.Swap(false) {
		n.rebind(k)
	}
	return d
}

// rebind closes the generator bound to the lost lease, binds the keeper to
// its new one and builds a generator with the new worker ID. While that
// fails (the new lease was lost again at once) the node keeps refusing:
// the keeper's next acquisition asks for another rebind.
func (n *procNode) rebind(k *lease.Keeper) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.keeper != k || n.mu.gen == nil {
		return
	}
	_ = n.mu.gen.Close() // its final mark cannot reach the lost lease: Save is fenced
	l, err := k.Rebind()
	if err != nil {
		return
	}
	s := n.mu.settings
	s.Node = l.WorkerID
	g, err := generator.New(s)
	if err != nil {
		return
	}
	n.mu.gen, n.mu.settings, n.mu.worker = g, s, l.WorkerID
	n.mu.rebinds++
}

// Worker implements Node.
func (n *procNode) Worker() int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.mu.gen == nil {
		return -1
	}
	return n.mu.worker
}

// Close implements Node: a graceful stop.
func (n *procNode) Close() error {
	return n.Stop(context.Background(), StopOptions{Graceful: true})
}

// Generator returns the running generator when the node runs the
// generator package (for metrics), else nil.
func (n *procNode) Generator() *generator.Generator {
	n.mu.RLock()
	defer n.mu.RUnlock()
	g, _ := n.mu.gen.(*generator.Generator)
	return g
}
