// Package nodetest holds a leasing node in the middle of a rebind, so that
// a test can show what callers of the node (node.Node.Issue, and the HTTP
// API that calls it) get while the node has closed the generator bound to
// its lost lease and not yet served its successor.
package nodetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
)

// Start is the virtual clock's start.
var Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Rebind is a node on worker 0 of a two-worker memory store, on a virtual
// clock (advanced by Sleep), whose lease expired while its store was cut
// off and went to another holder: once the store is back, the node's
// lease work acquires worker 1 and rebinds to it.
type Rebind struct {
	// Node is the node under test: it issued 5 IDs on worker 0.
	Node *node.Node
	// Clock is the virtual base clock of both nodes.
	Clock *faults.Virtual

	other      *node.Node
	gate       *gate
	maintained chan struct{}
}

// NewRebind builds the node and takes its lease away; the lease work has
// not yet noticed the store is back. Both nodes stop at the end of the
// test.
func NewRebind(t testing.TB, cfg node.Config) *Rebind {
	t.Helper()
	v := faults.NewVirtual(Start, true)
	reg := lease.NewMemory(v)
	cut := &Cut{Registry: reg}
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	rng := lease.Range{Min: 0, Max: 1}
	cfg.Settings.Node, cfg.Settings.Clock = 0, v
	cfg.Checkpoint = g
	cfg.Lease = &node.Lease{Registry: cut, Holder: "a", Range: &rng, TTL: time.Second, OneAttempt: true}
	a, err := node.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background(), true) })
	if _, err := a.Issue(context.Background(), make([]generator.ID, 5)); err != nil {
		t.Fatal(err)
	}
	cut.Off.Store(true)
	for range 15 {
		v.Advance(100 * time.Millisecond)
		a.Maintain(context.Background())
	}
	b, err := node.New(context.Background(), node.Config{
		Settings: generator.Settings{Node: 0, Clock: v},
		Lease:    &node.Lease{Registry: reg, Holder: "b", Range: &rng, TTL: time.Second, OneAttempt: true},
	})
	if err != nil || b.Worker() != 0 {
		t.Fatalf("the other holder: worker %d, err %v; want the expired worker 0", b.Worker(), err)
	}
	t.Cleanup(func() { b.Stop(context.Background(), true) })
	cut.Off.Store(false)
	return &Rebind{Node: a, Clock: v, other: b, gate: g, maintained: make(chan struct{})}
}

// Hold starts both nodes' lease work (Maintain on the virtual clock) in a
// goroutine and returns once the node's rebind has closed the generator
// bound to worker 0 and holds in its successor's first checkpoint write
// (its reservation), before serving it.
func (r *Rebind) Hold(t testing.TB) {
	t.Helper()
	// The old generator's final mark (Close) is below now; the new one's
	// reservation is above.
	wall, _ := r.Clock.Now()
	r.gate.above.Store(wall / int64(time.Millisecond))
	go func() {
		defer close(r.maintained)
		for range 10 {
			r.Clock.Advance(100 * time.Millisecond)
			r.Node.Maintain(context.Background())
			r.other.Maintain(context.Background())
		}
	}()
	select {
	case <-r.gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the rebind did not reach its first checkpoint write within 10s")
	}
}

// Release lets the rebind serve the new generator and waits for the lease
// work to end: the node then issues on worker 1.
func (r *Rebind) Release() {
	r.gate.once.Do(func() { close(r.gate.release) })
	<-r.maintained
}

// gate is a checkpoint whose first Save of a mark above above (once set)
// blocks until release is closed (at most 10 s), whatever its context
// says.
type gate struct {
	mu      sync.Mutex
	mark    int64
	above   atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gate) Load() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mark, nil
}

func (g *gate) Save(_ context.Context, mark int64) error {
	if a := g.above.Load(); a > 0 && mark > a && g.above.CompareAndSwap(a, 0) {
		close(g.entered)
		select {
		case <-g.release:
		case <-time.After(10 * time.Second):
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mark = max(g.mark, mark)
	return nil
}

// Cut is a lease registry that can be cut off: while Off, acquisitions
// and renewals fail with lease.ErrUnavailable.
type Cut struct {
	lease.Registry
	Off atomic.Bool
}

// Renew renews l unless the registry is cut off.
func (c *Cut) Renew(ctx context.Context, l lease.Lease, ms int64) (lease.Lease, error) {
	if c.Off.Load() {
		return lease.Lease{}, lease.ErrUnavailable
	}
	return c.Registry.Renew(ctx, l, ms)
}

// Acquire acquires a lease unless the registry is cut off.
func (c *Cut) Acquire(ctx context.Context, r lease.Request) (lease.Lease, error) {
	if c.Off.Load() {
		return lease.Lease{}, lease.ErrUnavailable
	}
	return c.Registry.Acquire(ctx, r)
}
