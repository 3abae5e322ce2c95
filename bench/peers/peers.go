package peers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// Peer is one ID library as a harness target: how an instance is built,
// which clock it reads, and which faults can reach it.
type Peer struct {
	// Name is the target name scenarios use ("bwmarrin").
	Name string
	// Module is the Go module and version ("github.com/bwmarrin/snowflake v0.3.0").
	Module string
	// Licence is the module's licence.
	Licence string
	// Clock says which clock the library reads.
	Clock string
	// Ceiling is the library's theoretical issue ceiling per instance, in
	// IDs per second; 0 means none that matters (128-bit random IDs).
	Ceiling float64
	// CeilingNote explains the ceiling ("4096 per 1 ms tick").
	CeilingNote string
	// Faults are the fault kinds that reach the library.
	Faults []faults.Kind
	// NA says, for each fault kind that does not reach it, why.
	NA map[faults.Kind]string
	// Simulated is true when the library reads only the time it is given,
	// so it runs on the harness's virtual time.
	Simulated bool

	// start builds a new instance on a host whose clock is host.
	start func(spec target.NodeSpec, host *faults.Clock) (instance, error)
}

// instance is one running copy of a library: what a process holds.
type instance interface {
	// next fills dst; n < len(dst) only with an error.
	next(dst []generator.ID) (int, error)
}

// All returns the peers in table order.
func All() []*Peer {
	return []*Peer{bwmarrinPeer, sonyflakePeer, sonyflakeV2Peer, uuidV7Peer, ulidPeer}
}

// Lookup returns the peer with the given name.
func Lookup(name string) (*Peer, bool) {
	for _, p := range All() {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

func init() {
	for _, p := range All() {
		target.Register(p)
	}
}

var _ target.Target = (*Peer)(nil)

// Info implements target.Target.
func (p *Peer) Info() target.Info {
	return target.Info{
		Name: p.Name,
		Doc:  fmt.Sprintf("%s (%s); reads %s", p.Module, p.Licence, p.Clock),
		Caps: target.Capabilities{
			Faults:          p.Faults,
			Simulated:       p.Simulated,
			OffsetTolerance: time.Microsecond,
		},
	}
}

// NotApplicable returns why fault f cannot reach the peer, or "" when it
// can. A restart that steps the clock while the node is down needs both
// restarts and a clock the new instance reads at start; every peer with
// restarts has that.
func (p *Peer) NotApplicable(f scenario.Fault) string {
	for _, k := range p.Faults {
		if k == f.Kind {
			return ""
		}
	}
	if why, ok := p.NA[f.Kind]; ok {
		return why
	}
	return fmt.Sprintf("%s does not take a %s fault", p.Name, f.Kind)
}

// Start implements target.Target: it starts a node on a host whose clock
// is a fault clock over env.Base, offset by spec.ClockOffset.
func (p *Peer) Start(ctx context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	if env.Base == nil {
		return nil, fmt.Errorf("%w: no base clock", target.ErrUnsupported)
	}
	if spec.Lease != "" && spec.Lease != scenario.LeaseNone {
		return nil, fmt.Errorf("%w: %s takes no worker-ID lease", target.ErrUnsupported, p.Name)
	}
	spec.Layout = normalize(spec.Layout)
	if err := spec.Layout.Validate(); err != nil {
		return nil, err
	}
	n := &node{p: p, spec: spec, env: env, host: target.NewHost(env.Base, spec.ClockOffset)}
	n.mu.worker = -1
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	n.release = acquire(spec.Layout)
	return n, nil
}

// normalize fills a zero layout, epoch and tick with the defaults.
func normalize(l generator.Layout) generator.Layout {
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	if l.Epoch.IsZero() {
		l.Epoch = generator.DefaultEpoch
	}
	if l.Tick == 0 {
		l.Tick = time.Millisecond
	}
	return l
}

// node is a peer's node and its host clock.
type node struct {
	p       *Peer
	spec    target.NodeSpec
	env     target.Env
	host    *target.Host
	release func()

	mu struct {
		sync.RWMutex
		inst   instance
		worker int64
		closed bool
	}
}

var _ target.Node = (*node)(nil)

// Issue implements target.Node. During a VM pause the call waits, on the
// host's base clock, for the pause to end, as a paused guest would.
func (n *node) Issue(_ context.Context, dst []generator.ID) (int, error) {
	n.mu.RLock()
	inst := n.mu.inst
	n.mu.RUnlock()
	if inst == nil {
		return 0, target.ErrStopped
	}
	n.host.WaitPause()
	return inst.next(dst)
}

// Stop implements target.Node: the instance and everything it held is
// gone. The libraries persist nothing, so a wipe changes nothing.
func (n *node) Stop(context.Context, target.StopOptions) error {
	n.mu.Lock()
	n.mu.inst, n.mu.worker = nil, -1
	n.mu.Unlock()
	return nil
}

// Start implements target.Node: a new instance, as a restarted process
// builds.
func (n *node) Start(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.inst != nil {
		return nil
	}
	inst, err := n.p.start(n.spec, n.host.Clock)
	if err != nil {
		return fmt.Errorf("%s: %w", n.p.Name, err)
	}
	n.mu.inst, n.mu.worker = inst, n.spec.Worker
	return nil
}

// Clock implements target.Node. Every fault lands on the host clock; it
// reaches the library only as the library reads that clock (see the
// package doc), which is why Info lists only the kinds that do.
func (n *node) Clock() target.ClockControl { return n.host }

// Maintain implements target.Node: peers need no periodic work.
func (n *node) Maintain(context.Context) time.Duration { return -1 }

// Worker implements target.Node.
func (n *node) Worker() int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.worker
}

// Close implements target.Node.
func (n *node) Close() error {
	n.mu.Lock()
	closed := n.mu.closed
	n.mu.inst, n.mu.worker, n.mu.closed = nil, -1, true
	n.mu.Unlock()
	if !closed && n.release != nil {
		n.release()
	}
	return nil
}

// compose builds the ID of (tick, node, seq) in layout l, which the caller
// has validated.
func compose(l generator.Layout, tick, node, seq int64) (generator.ID, error) {
	if tick < 0 || tick > l.MaxTicks() || node < 0 || node > l.MaxNode() || seq < 0 || seq > l.MaxSeq() {
		return l.Compose(tick, node, seq) // for its error
	}
	return generator.ID(tick<<(l.NodeBits+l.SeqBits) | node<<l.SeqBits | seq), nil
}

// fits checks that a Snowflake-style library's fields fit layout l, so
// re-encoding its IDs in l is one to one: the layout's tick divides the
// library's, and its node and sequence fields are wide enough.
func fits(l generator.Layout, name string, tick time.Duration, worker int64, workerBits, seqBits uint) error {
	switch {
	case l.Tick > tick || tick%l.Tick != 0:
		return fmt.Errorf("%w: %s ticks every %s; the node's layout %s must tick at a divisor of it", target.ErrUnsupported, name, tick, l.Name)
	case l.SeqBits < seqBits:
		return fmt.Errorf("%w: %s has %d sequence bits; the node's layout %s has %d", target.ErrUnsupported, name, seqBits, l.Name, l.SeqBits)
	case worker < 0 || worker >= 1<<workerBits || worker > l.MaxNode():
		return fmt.Errorf("%w: worker %d does not fit %s's %d-bit machine field and layout %s", target.ErrUnsupported, worker, name, workerBits, l.Name)
	}
	return nil
}
