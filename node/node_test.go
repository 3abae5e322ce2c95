package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/node/nodetest"
	"github.com/snowchaos/snowchaos/telemetry"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// disk is a host's checkpoint in memory.
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

func issue(t *testing.T, n *node.Node, k int) []generator.ID {
	t.Helper()
	ids := make([]generator.ID, k)
	got, err := n.Issue(context.Background(), ids)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return ids[:got]
}

func TestNodeWithoutLease(t *testing.T) {
	v := faults.NewVirtual(start, true)
	var d disk
	n, err := node.New(context.Background(), node.Config{
		Settings:   generator.Settings{Node: 7, Clock: v, Reserve: 100 * time.Millisecond},
		Checkpoint: &d,
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.mark < start.UnixMilli()+100 {
		t.Fatalf("New did not reserve a mark before serving: stored %d, clock %d ms", d.mark, start.UnixMilli())
	}
	if n.Keeper() != nil || n.FaultClock() != nil || n.Maintain(context.Background()) >= 0 {
		t.Fatalf("a node without lease or fault clock has keeper %v, fault clock %v", n.Keeper(), n.FaultClock())
	}
	ids := issue(t, n, 10)
	if w := generator.DefaultLayout().Decode(ids[0]).Node; w != 7 || n.Worker() != 7 {
		t.Fatalf("worker = %d (node says %d), want 7", w, n.Worker())
	}
	if d.mark == 0 {
		t.Fatal("no mark reserved before the first IDs")
	}
	reserved := d.mark
	if err := n.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if d.mark != reserved {
		t.Fatalf("a graceful stop lowered the stored mark from %d to %d", reserved, d.mark)
	}
	if _, err := n.Issue(context.Background(), make([]generator.ID, 1)); !errors.Is(err, node.ErrStopped) {
		t.Fatalf("Issue after Stop = %v, want ErrStopped", err)
	}
	if n.Worker() != -1 || n.Generator() != nil {
		t.Fatal("a stopped node still reports a worker or a generator")
	}

	// A restart on the same disk starts after the stored mark.
	n2, err := node.New(context.Background(), node.Config{Settings: generator.Settings{Node: 7, Clock: v}, Checkpoint: &d})
	if err != nil {
		t.Fatal(err)
	}
	if id := issue(t, n2, 1)[0]; id <= ids[len(ids)-1] {
		t.Fatalf("restart issued %v, not above the last ID %v", id, ids[len(ids)-1])
	}
}

func TestNodeRejectsPresetParts(t *testing.T) {
	for name, s := range map[string]generator.Settings{
		"fence":      {Fence: fenceFunc(func(int64) error { return nil })},
		"checkpoint": {Checkpoint: &disk{}},
	} {
		if _, err := node.New(context.Background(), node.Config{Settings: s}); !errors.Is(err, generator.ErrInvalidSettings) {
			t.Errorf("%s set by the caller: err = %v, want ErrInvalidSettings", name, err)
		}
	}
}

type fenceFunc func(int64) error

func (f fenceFunc) Check(mono int64) error { return f(mono) }

func TestNodeFaultClock(t *testing.T) {
	v := faults.NewVirtual(start, true)
	n, err := node.New(context.Background(), node.Config{Settings: generator.Settings{Clock: v}, ClockOffset: -time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n.FaultClock() == nil || n.FaultClock().Offset() != -time.Second {
		t.Fatalf("fault clock %v, want one stepped by -1s", n.FaultClock())
	}
	wall, _ := n.Clock().Now()
	if want := start.Add(-time.Second).UnixNano(); wall != want {
		t.Fatalf("the generator's clock reads %d, want %d", wall, want)
	}
}

// leased builds a node leasing from reg on a host clock of its own.
func leased(t *testing.T, reg lease.Registry, holder string, prefer int64, v generator.Clock, d *disk, m *telemetry.NodeMetrics, c node.Controls) (*node.Node, error) {
	t.Helper()
	rng := lease.Range{Min: 0, Max: 1}
	cfg := node.Config{
		Settings: generator.Settings{Node: prefer, Clock: v, Reserve: 100 * time.Millisecond},
		Lease:    &node.Lease{Registry: reg, Holder: holder, Range: &rng, TTL: time.Second, OneAttempt: true, Controls: c},
		Metrics:  m,
	}
	if d != nil {
		cfg.Checkpoint = d
	}
	return node.New(context.Background(), cfg)
}

func TestNodeLeaseFenceAndHandoff(t *testing.T) {
	v := faults.NewVirtual(start, true)
	reg := lease.NewMemory(v)
	a, err := leased(t, reg, "host-a", 1, v, nil, nil, node.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Worker() != 1 || a.Keeper() == nil {
		t.Fatalf("worker %d, keeper %v: want the preferred worker 1 under a keeper", a.Worker(), a.Keeper())
	}
	last := issue(t, a, 100)[99]

	// Crash: nothing is released; the worker stays held until expiry.
	if err := a.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	b, err := leased(t, reg, "host-b", 1, v, nil, nil, node.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Worker() != 0 {
		t.Fatalf("while a's crashed lease is unexpired b got worker %d, want the other one (0)", b.Worker())
	}
	_ = b.Stop(context.Background(), true)

	// After expiry a successor on worker 1 starts above every ID a issued
	// (the handoff guard), even with a clock 50 ms behind.
	v.Advance(2 * time.Second)
	late := faults.New(v)
	late.Step(-50 * time.Millisecond)
	c, err := leased(t, reg, "host-c", 1, late, nil, nil, node.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker() != 1 {
		t.Fatalf("successor got worker %d, want 1", c.Worker())
	}
	if id := issue(t, c, 1)[0]; id <= last {
		t.Fatalf("successor issued %v, not above the crashed holder's last ID %v", id, last)
	}
}

func TestNodeNoFenceControl(t *testing.T) {
	v := faults.NewVirtual(start, true)
	reg := lease.NewMemory(v)
	for _, c := range []struct {
		controls node.Controls
		fenced   bool
	}{{node.Controls{}, true}, {node.Controls{NoFence: true}, false}} {
		n, err := leased(t, reg, "h", 0, v, nil, nil, c.controls)
		if err != nil {
			t.Fatal(err)
		}
		reg.SetAvailable(false)
		// No renewal reaches the store for longer than the TTL.
		for range 20 {
			v.Advance(100 * time.Millisecond)
			n.Maintain(context.Background())
		}
		_, err = n.Issue(context.Background(), make([]generator.ID, 1))
		if got := errors.Is(err, generator.ErrFenced); got != c.fenced {
			t.Errorf("controls %+v: Issue after the lease ran out = %v, fenced %v, want %v", c.controls, err, got, c.fenced)
		}
		reg.SetAvailable(true)
		_ = n.Stop(context.Background(), false)
		v.Advance(2 * time.Second)
	}
}

// TestNodeRebind: a node whose lease expired while the store was cut off
// acquires another worker ID when the store is back and rebuilds its
// generator on it; the metrics follow the new generator.
func TestNodeRebind(t *testing.T) {
	v := faults.NewVirtual(start, true)
	reg := lease.NewMemory(v)
	part := &nodetest.Cut{Registry: reg}
	gc := telemetry.NewGeneratorCollector(telemetry.Options{})
	m := gc.MustNode("")
	rng := lease.Range{Min: 0, Max: 1}
	a, err := node.New(context.Background(), node.Config{
		Settings: generator.Settings{Node: 0, Clock: v},
		Lease:    &node.Lease{Registry: part, Holder: "a", Range: &rng, TTL: time.Second, OneAttempt: true},
		Metrics:  m,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := a.Generator()
	issue(t, a, 5)
	part.Off.Store(true)
	for range 15 {
		v.Advance(100 * time.Millisecond)
		a.Maintain(context.Background())
	}
	// b takes a's expired worker 0.
	b, err := leased(t, reg, "b", 0, v, nil, nil, node.Controls{})
	if err != nil || b.Worker() != 0 {
		t.Fatalf("b: worker %d, err %v; want worker 0", b.Worker(), err)
	}
	part.Off.Store(false)
	for range 10 {
		v.Advance(100 * time.Millisecond)
		a.Maintain(context.Background())
		b.Maintain(context.Background())
	}
	if a.Worker() != 1 || a.LeaseStats().Rebinds != 1 || a.Generator() == first || a.Settings().Node != 1 {
		t.Fatalf("after the store came back: worker %d (settings %d), rebinds %d, generator rebuilt %v; want worker 1, one rebind",
			a.Worker(), a.Settings().Node, a.LeaseStats().Rebinds, a.Generator() != first)
	}
	if w := generator.DefaultLayout().Decode(issue(t, a, 1)[0]).Node; w != 1 {
		t.Fatalf("rebuilt generator issues on worker %d, want 1", w)
	}
	if st := m.Stats(); st.Issued != 6 {
		t.Fatalf("metrics count %d IDs over both generators, want 6", st.Issued)
	}
}

// TestNodeRebindWindow holds a rebind between closing the generator bound
// to the lost lease and serving its successor: a call in that window, and
// every call racing the rebind, gets the lease change's refusal or IDs,
// never the closed generator's error; once the successor serves, calls
// get its IDs.
func TestNodeRebindWindow(t *testing.T) {
	r := nodetest.NewRebind(t, node.Config{})
	a := r.Node
	// Callers hammer the node through the whole rebind.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var closedErrs []error
	for range 4 {
		wg.Go(func() {
			for k := 1; ; k = k%3 + 1 {
				select {
				case <-stop:
					return
				default:
				}
				_, err := a.Issue(context.Background(), make([]generator.ID, k))
				if errors.Is(err, generator.ErrClosed) {
					mu.Lock()
					closedErrs = append(closedErrs, err)
					mu.Unlock()
				}
			}
		})
	}
	r.Hold(t)
	_, err := a.Issue(context.Background(), make([]generator.ID, 1))
	var fe *lease.FenceError
	if !errors.As(err, &fe) || fe.Reason != lease.ReasonChanged || !errors.Is(err, generator.ErrFenced) || errors.Is(err, generator.ErrClosed) {
		t.Errorf("Issue during the rebind = %v, want the lease change's refusal (a FenceError, ReasonChanged)", err)
	}
	if err := a.Ready(); !errors.As(err, &fe) || fe.Reason != lease.ReasonChanged {
		t.Errorf("Ready during the rebind = %v, want the lease change's refusal", err)
	}
	r.Release()
	close(stop)
	wg.Wait()
	if len(closedErrs) > 0 {
		t.Errorf("%d calls racing the rebind met the closed generator, first: %v", len(closedErrs), closedErrs[0])
	}
	if a.Worker() != 1 || a.Ready() != nil {
		t.Fatalf("after the rebind: worker %d, ready %v; want worker 1, ready", a.Worker(), a.Ready())
	}
	if w := generator.DefaultLayout().Decode(issue(t, a, 1)[0]).Node; w != 1 {
		t.Fatalf("after the rebind the node issues on worker %d, want 1", w)
	}
	if err := a.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Issue(context.Background(), make([]generator.ID, 1)); !errors.Is(err, node.ErrStopped) {
		t.Fatalf("Issue after Stop = %v, want ErrStopped", err)
	}
	if err := a.Ready(); !errors.Is(err, node.ErrStopped) {
		t.Fatalf("Ready after Stop = %v, want ErrStopped", err)
	}
}

// TestNodeRunKeepsTheLease: in production a node keeps its lease in its
// own goroutine; a graceful stop releases it.
func TestNodeRunKeepsTheLease(t *testing.T) {
	clock := generator.SystemClock()
	reg := lease.NewMemory(clock)
	n, err := node.New(context.Background(), node.Config{
		Settings: generator.Settings{Node: 3, Clock: clock},
		Lease:    &node.Lease{Registry: reg, Holder: "h", TTL: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Run(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for n.LeaseStats().RenewOK < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no three renewals in 10s: %+v", n.LeaseStats())
		}
		issue(t, n, 1)
		time.Sleep(20 * time.Millisecond)
	}
	if err := n.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	ls, err := reg.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || !ls[0].ExpiredAt(time.Now()) || ls[0].LastIssuedMs == 0 {
		t.Fatalf("after a graceful stop the store holds %+v, want worker 3 released with its last issued time", ls)
	}
}

// TestNodePeerClockCheck: a node whose clock is 10 s behind the live
// node beside it fails to start with lease.ErrPeerClockSkew (its lease
// released); with the NoPeerClockCheck control, or a bound above its
// skew, it starts.
func TestNodePeerClockCheck(t *testing.T) {
	v := faults.NewVirtual(start, true)
	reg := lease.NewMemory(v)
	peer, err := node.New(context.Background(), node.Config{
		Settings: generator.Settings{Node: 1, Clock: v},
		Lease:    &node.Lease{Registry: reg, Holder: "peer"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Stop(context.Background(), true)
	late := func(l node.Lease) (*node.Node, error) {
		l.Registry, l.Holder = reg, "late"
		return node.New(context.Background(), node.Config{Settings: generator.Settings{Node: 2, Clock: v}, ClockOffset: -10 * time.Second, Lease: &l})
	}
	if n, err := late(node.Lease{}); !errors.Is(err, lease.ErrPeerClockSkew) || n != nil {
		t.Fatalf("late node: %v, %v; want refused with ErrPeerClockSkew", n, err)
	}
	ls, err := reg.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now, _ := v.Now()
	for _, l := range ls {
		if l.Holder == "late" && !l.ExpiredAt(time.Unix(0, now)) {
			t.Errorf("the refused node's lease is still held: %+v", l)
		}
	}
	for _, l := range []node.Lease{{Controls: node.Controls{NoPeerClockCheck: true}}, {PeerClockMaxSkew: 11 * time.Second}} {
		n, err := late(l)
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		if err := n.Stop(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
}
