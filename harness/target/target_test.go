package target_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/reference"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
)

var start = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

func spec(name string) target.NodeSpec {
	return target.NodeSpec{Name: name, Host: name, Worker: 1, Layout: generator.DefaultLayout(), Checkpoint: true, Reserve: 50 * time.Millisecond}
}

func issue(t *testing.T, n target.Node, k int) []generator.ID {
	t.Helper()
	out := make([]generator.ID, k)
	if got, err := n.Issue(context.Background(), out); err != nil || got != k {
		t.Fatalf("issue: %d %v", got, err)
	}
	return out
}

func TestRegistry(t *testing.T) {
	names := target.Names()
	want := []string{target.InProcessName}
	for _, r := range reference.All() {
		want = append(want, r.Name)
	}
	for _, w := range want {
		tg, err := target.Lookup(w)
		if err != nil {
			t.Fatalf("%s: %v (registered: %v)", w, err, names)
		}
		info := tg.Info()
		if info.Name != w || !info.Caps.Simulated || !info.Caps.Supports(faults.KindSlew) || info.Doc == "" {
			t.Fatalf("%s: %+v", w, info)
		}
		if info.KnownBad != (w != target.InProcessName) {
			t.Fatalf("%s: KnownBad %v", w, info.KnownBad)
		}
	}
	if _, err := target.Lookup("nope"); !errors.Is(err, target.ErrUnknown) {
		t.Fatal(err)
	}
}

// TestRestartKeepsCheckpoint: a restart in the same tick waits out the
// reserved mark with the checkpoint, and repeats IDs once it is wiped.
func TestRestartKeepsCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, wipe := range []bool{false, true} {
		v := faults.NewVirtual(start, true)
		tg, _ := target.Lookup(target.InProcessName)
		n, err := tg.Start(ctx, spec("a"), target.Env{Base: v})
		if err != nil {
			t.Fatal(err)
		}
		before := issue(t, n, 3)
		if err := n.Stop(ctx, target.StopOptions{Wipe: wipe}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Issue(ctx, make([]generator.ID, 1)); !errors.Is(err, target.ErrStopped) {
			t.Fatalf("stopped node issued: %v", err)
		}
		if n.Worker() != -1 {
			t.Fatal("stopped node has a worker")
		}
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		after := issue(t, n, 1)
		if repeated := after[0] <= before[2]; repeated != wipe {
			t.Fatalf("wipe %v: after restart %d, before %d", wipe, after[0], before[2])
		}
		n.Close()
	}
}

// TestLeaseCloneAndHandoff: a clone with the same worker ID is granted
// another by the memory lease; a graceful handoff carries the last issued
// time to a host whose clock is behind.
func TestLeaseCloneAndHandoff(t *testing.T) {
	ctx := context.Background()
	reg := lease.NewMemory(faults.NewVirtual(start, true))
	tg, _ := target.Lookup(target.InProcessName)
	s := spec("a")
	s.Lease, s.Checkpoint = scenario.LeaseMemory, false
	va := faults.NewVirtual(start, true)
	a, err := tg.Start(ctx, s, target.Env{Base: va, Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	if a.Worker() != 1 {
		t.Fatalf("worker %d", a.Worker())
	}
	cs := s
	cs.Name, cs.Host = "a-clone", "a-clone"
	clone, err := tg.Start(ctx, cs, target.Env{Base: faults.NewVirtual(start, true), Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	if clone.Worker() == 1 {
		t.Fatal("the clone got the same worker ID")
	}
	last := issue(t, a, 5)
	if err := a.Stop(ctx, target.StopOptions{Graceful: true}); err != nil {
		t.Fatal(err)
	}
	hs := s
	hs.Host, hs.ClockOffset = "a-host2", -20*time.Millisecond
	vb := faults.NewVirtual(start, true)
	b, err := tg.Start(ctx, hs, target.Env{Base: vb, Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	if b.Worker() != 1 {
		t.Fatalf("the handoff got worker %d", b.Worker())
	}
	if off, _ := b.Clock().Offset(ctx); off != -20*time.Millisecond {
		t.Fatalf("offset %v", off)
	}
	first := issue(t, b, 1)
	if first[0] <= last[4] {
		t.Fatalf("the new holder issued %d, not above the old holder's %d", first[0], last[4])
	}
	if vb.Elapsed() < 20*time.Millisecond {
		t.Fatalf("the new holder waited %v, want at least the 20ms its clock is behind", vb.Elapsed())
	}
}

// TestPauseBlocksIssue: a paused node answers only when the pause ends.
func TestPauseBlocksIssue(t *testing.T) {
	ctx := context.Background()
	v := faults.NewVirtual(start, true)
	tg, _ := target.Lookup(target.InProcessName)
	n, err := tg.Start(ctx, spec("a"), target.Env{Base: v})
	if err != nil {
		t.Fatal(err)
	}
	issue(t, n, 1)
	t0 := v.Elapsed()
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindPause, For: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	issue(t, n, 1)
	if d := v.Elapsed() - t0; d < 2*time.Second {
		t.Fatalf("a call during a 2s pause returned after %v", d)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: "bogus"}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatal(err)
	}
}

func TestClockFaults(t *testing.T) {
	ctx := context.Background()
	v := faults.NewVirtual(start, true)
	tg, _ := target.Lookup(reference.NameNoRewindCheck)
	n, err := tg.Start(ctx, spec("a"), target.Env{Base: v})
	if err != nil {
		t.Fatal(err)
	}
	ctl := n.Clock()
	ctl.Apply(ctx, faults.Fault{Kind: faults.KindStep, By: -5 * time.Millisecond})
	if off, _ := ctl.Offset(ctx); off != -5*time.Millisecond {
		t.Fatalf("step: %v", off)
	}
	ctl.Apply(ctx, faults.Fault{Kind: faults.KindRevert})
	if off, _ := ctl.Offset(ctx); off != 0 {
		t.Fatalf("revert: %v", off)
	}
	ctl.Apply(ctx, faults.Fault{Kind: faults.KindDrift, PPM: 100})
	v.Advance(time.Second)
	if off, _ := ctl.Offset(ctx); off != 100*time.Microsecond {
		t.Fatalf("drift: %v", off)
	}
}

// TestLeaseRebind: a node whose lease expired during a store outage and
// whose worker ID another holder took meanwhile rebuilds its generator on
// the worker ID the lease gives it next, in Maintain. A node without the
// fence stops all the same once it needs to record a new mark the store
// cannot take; only a node without both issues through the outage.
func TestLeaseRebind(t *testing.T) {
	ctx := context.Background()
	v := faults.NewVirtual(start, true)
	reg := lease.NewMemory(v)
	tg, _ := target.Lookup(target.InProcessName)
	s := spec("a")
	s.Lease, s.LeaseTTL, s.WorkerRange = scenario.LeaseMemory, 2*time.Second, &lease.Range{Min: 1, Max: 2}
	n, err := tg.Start(ctx, s, target.Env{Base: v, Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	us := s
	us.Name, us.Host, us.NoFence, us.NoMarkWriteThrough = "u", "u", true, true
	u, err := tg.Start(ctx, us, target.Env{Base: v, Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	fs := s
	fs.Name, fs.Host, fs.NoFence, fs.WorkerRange = "f", "f", true, &lease.Range{Min: 3, Max: 3}
	f, err := tg.Start(ctx, fs, target.Env{Base: v, Leases: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n.Worker() != 1 || u.Worker() != 2 {
		t.Fatalf("workers %d and %d, want 1 and 2", n.Worker(), u.Worker())
	}
	before := issue(t, n, 3)
	reg.SetAvailable(false)
	for range 40 { // 4s of 100ms steps: renewals fail, the leases expire
		v.Advance(100 * time.Millisecond)
		n.Maintain(ctx)
		u.Maintain(ctx)
		f.Maintain(ctx)
	}
	if _, err := n.Issue(ctx, make([]generator.ID, 1)); !errors.Is(err, generator.ErrFenced) {
		t.Fatalf("issued with an expired lease: %v", err)
	}
	issue(t, u, 1) // no fence, no recorded mark: a negative control
	if _, err := f.Issue(ctx, make([]generator.ID, 1)); !errors.Is(err, generator.ErrCheckpoint) || !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("unfenced node past its mark with the store down: %v, want ErrCheckpoint wrapping lease.ErrUnavailable", err)
	}
	reg.SetAvailable(true)
	if _, err := reg.Acquire(ctx, lease.Request{Holder: "thief", Range: lease.Range{Min: 1, Max: 1}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Acquire(ctx, lease.Request{Holder: "thief2", Range: lease.Range{Min: 2, Max: 2}, TTL: time.Millisecond}); err != nil {
		t.Fatal(err) // u's expired worker 2, held for a millisecond only
	}
	v.Advance(time.Millisecond)
	for range 5 {
		v.Advance(200 * time.Millisecond)
		n.Maintain(ctx)
	}
	if n.Worker() != 2 {
		t.Fatalf("after the rebind the node issues with worker %d, want 2", n.Worker())
	}
	after := issue(t, n, 1)
	if p := generator.DefaultLayout().Decode(after[0]); p.Node != 2 || after[0] <= before[2] {
		t.Fatalf("after the rebind issued %d (node %d)", after[0], p.Node)
	}
	ln := n.(target.LeaseNode)
	if st := ln.LeaseStats(); st.Rebinds != 1 || st.RenewLost != 1 || st.Acquisitions != 2 || st.RenewFailed == 0 {
		t.Fatalf("lease stats %+v", st)
	}
	if err := n.Stop(ctx, target.StopOptions{Graceful: true}); err != nil {
		t.Fatal(err)
	}
	if st := ln.LeaseStats(); st.Rebinds != 1 || st.Acquisitions != 2 {
		t.Fatalf("lease stats after stop %+v", st)
	}
	// Fill the range (thief holds 1; thief3 takes 2, which a released): a
	// new node is refused.
	if _, err := reg.Acquire(ctx, lease.Request{Holder: "thief3", Range: lease.Range{Min: 1, Max: 2}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ws := s
	ws.Name, ws.Host = "w", "w"
	if _, err := tg.Start(ctx, ws, target.Env{Base: v, Leases: reg}); !errors.Is(err, lease.ErrAllTaken) {
		t.Fatalf("start in a full range: %v, want ErrAllTaken", err)
	}
}

// TestKillDropsCallInFlight: a call waiting inside the generator when its
// process is killed is not answered, whatever the old generator computes
// once its wait ends: a killed process sends nothing, and its answer would
// repeat IDs its successor issues from the mark it loaded before the kill.
func TestKillDropsCallInFlight(t *testing.T) {
	ctx := context.Background()
	v := faults.NewVirtual(start, false)
	tg, _ := target.Lookup(target.InProcessName)
	sp := spec("a")
	sp.Policy = generator.PolicyWait
	sp.MaxWait = time.Second
	n, err := tg.Start(ctx, sp, target.Env{Base: v})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	issue(t, n, 3) // saves a mark 50 ms ahead
	if err := n.Stop(ctx, target.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		k   int
		err error
	}
	done := make(chan answer, 1)
	go func() {
		k, err := n.Issue(ctx, make([]generator.ID, 1)) // waits out the mark
		done <- answer{k, err}
	}()
	if !v.BlockUntilWaiters(1, 5*time.Second) {
		t.Fatal("the call did not wait for the stored mark")
	}
	if err := n.Stop(ctx, target.StopOptions{}); err != nil { // kill -9
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	v.Advance(200 * time.Millisecond)
	select {
	case a := <-done:
		if a.k != 0 || !errors.Is(a.err, target.ErrStopped) {
			t.Fatalf("the killed incarnation answered %d IDs, err %v; want none, ErrStopped", a.k, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight never returned")
	}
	issue(t, n, 1)
}
