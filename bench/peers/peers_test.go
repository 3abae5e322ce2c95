package peers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// start starts peer p's node with worker 1 on base.
func start(t *testing.T, p *Peer, base generator.Clock) target.Node {
	t.Helper()
	n, err := p.Start(context.Background(), target.NodeSpec{Name: "a", Host: "a", Worker: 1, Layout: generator.DefaultLayout()}, target.Env{Base: base})
	if err != nil {
		t.Fatalf("%s: start: %v", p.Name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func issue(t *testing.T, n target.Node, k int) []generator.ID {
	t.Helper()
	ids := make([]generator.ID, k)
	got, err := n.Issue(context.Background(), ids)
	if err != nil || got != k {
		t.Fatalf("issue: %d of %d, %v", got, k, err)
	}
	return ids
}

func TestEachPeerIssues(t *testing.T) {
	l := generator.DefaultLayout()
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) {
			if got, err := target.Lookup(p.Name); err != nil || got != target.Target(p) {
				t.Fatalf("not registered: %v", err)
			}
			n := start(t, p, generator.SystemClock())
			wall, _ := generator.SystemClock().Now()
			ids := issue(t, n, 3000)
			for i, id := range ids {
				if i > 0 && id <= ids[i-1] {
					t.Fatalf("id %d: %d not above %d", i, id, ids[i-1])
				}
				at := l.Decode(id).Time.UnixNano()
				if d := time.Duration(at - wall); d < -time.Minute || d > time.Minute {
					t.Fatalf("id %d embeds %s, %s from now", i, l.Decode(id).Time, d)
				}
				if len(p.Faults) > 0 && p.Faults[0] == faults.KindRestart && p.Name != "ulid" {
					if w := l.Decode(id).Worker; w != 1 {
						t.Fatalf("id %d carries worker %d, want 1", i, w)
					}
				}
			}
			if n.Worker() != 1 {
				t.Fatalf("Worker() = %d", n.Worker())
			}
			if err := n.Stop(context.Background(), target.StopOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := n.Issue(context.Background(), make([]generator.ID, 1)); !errors.Is(err, target.ErrStopped) {
				t.Fatalf("stopped node issued: %v", err)
			}
			if n.Worker() != -1 {
				t.Fatalf("stopped Worker() = %d", n.Worker())
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			issue(t, n, 10)
		})
	}
}

// TestRestartAfterRewind checks that a step of the host clock while the
// node is down reaches each peer that restarts: the new instance's IDs
// embed a time about 1 s before the previous instance's.
func TestRestartAfterRewind(t *testing.T) {
	l := generator.DefaultLayout()
	for _, p := range All() {
		if p.NotApplicable(scenario.Fault{Fault: faults.Fault{Kind: faults.KindRestart}}) != "" {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			n := start(t, p, generator.SystemClock())
			before := l.Decode(issue(t, n, 1)[0]).Time
			if err := n.Stop(context.Background(), target.StopOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := n.Clock().Apply(context.Background(), faults.Fault{Kind: faults.KindStep, By: -time.Second}); err != nil {
				t.Fatal(err)
			}
			if off, _ := n.Clock().Offset(context.Background()); off != -time.Second {
				t.Fatalf("offset %s", off)
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := l.Decode(issue(t, n, 1)[0]).Time
			if d := before.Sub(after); d < 900*time.Millisecond {
				t.Fatalf("after the rewind the peer embeds %s, only %s before %s", after, d, before)
			}
		})
	}
}

// TestULIDOnVirtualTime runs ulid on a virtual clock stepped back 1 s: its
// IDs follow the host clock and stay distinct.
func TestULIDOnVirtualTime(t *testing.T) {
	l := generator.DefaultLayout()
	v := faults.NewVirtual(time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC), true)
	n := start(t, ulidPeer, v)
	seen := map[generator.ID]bool{}
	first := issue(t, n, 100)
	v.Advance(10 * time.Millisecond)
	if err := n.Clock().Apply(context.Background(), faults.Fault{Kind: faults.KindStep, By: -time.Second}); err != nil {
		t.Fatal(err)
	}
	second := issue(t, n, 100)
	for _, id := range append(first, second...) {
		if seen[id] {
			t.Fatalf("duplicate %d", id)
		}
		seen[id] = true
	}
	want := time.Date(2026, 6, 30, 11, 59, 59, 10e6, time.UTC)
	if got := l.Decode(second[0]).Time; !got.Equal(want) {
		t.Fatalf("after the step ulid embeds %s, want %s", got, want)
	}
}

func TestInterner(t *testing.T) {
	l := generator.DefaultLayout()
	release := acquire(l)
	ms := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	a, _ := intern(l, [16]byte{1}, ms)
	b, _ := intern(l, [16]byte{2}, ms)
	a2, _ := intern(l, [16]byte{1}, ms)
	c, _ := intern(l, [16]byte{3}, ms+1)
	if a != a2 || a == b || b == c {
		t.Fatalf("a=%d a2=%d b=%d c=%d", a, a2, b, c)
	}
	if got := l.Decode(c).Time.UnixMilli(); got != ms+1 {
		t.Fatalf("c embeds %d, want %d", got, ms+1)
	}
	release()
	release() // idempotent
	if in := internerFor(l); in.ids != nil || in.open != 0 {
		t.Fatalf("table kept after the last release: open %d, %d ids", in.open, len(in.ids))
	}

	tiny := generator.Layout{TimeBits: 61, NodeBits: 1, SeqBits: 1}
	defer acquire(tiny)()
	for i := range 4 {
		if _, err := intern(tiny, [16]byte{byte(i)}, ms); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	if _, err := intern(tiny, [16]byte{9}, ms); !errors.Is(err, errInternFull) {
		t.Fatalf("fifth value in a 2-bit tick: %v", err)
	}
}

// TestEveryKindAccountedFor checks that each peer either takes a fault
// kind or says why not.
func TestEveryKindAccountedFor(t *testing.T) {
	for _, p := range All() {
		caps := p.Info().Caps
		for _, k := range faults.Kinds(faults.InScenario) {
			_, na := p.NA[k]
			if caps.Supports(k) == na {
				t.Errorf("%s / %s: supported %v, n/a reason %v", p.Name, k, caps.Supports(k), na)
			}
			if !caps.Supports(k) && p.NotApplicable(scenario.Fault{Fault: faults.Fault{Kind: k}}) == "" {
				t.Errorf("%s / %s: unsupported but no reason", p.Name, k)
			}
		}
		if p.Module == "" || p.Licence == "" || p.Clock == "" || p.CeilingNote == "" {
			t.Errorf("%s: incomplete description", p.Name)
		}
	}
}

func TestLayoutMustFit(t *testing.T) {
	narrow := generator.Layout{TimeBits: 43, NodeBits: 10, SeqBits: 10}
	for _, p := range []*Peer{bwmarrinPeer} {
		_, err := p.Start(context.Background(), target.NodeSpec{Worker: 1, Layout: narrow}, target.Env{Base: generator.SystemClock()})
		if !errors.Is(err, target.ErrUnsupported) {
			t.Errorf("%s on 10 sequence bits: %v", p.Name, err)
		}
	}
	_, err := sonyflakePeer.Start(context.Background(), target.NodeSpec{Worker: 1, Lease: scenario.LeaseMemory}, target.Env{Base: generator.SystemClock()})
	if !errors.Is(err, target.ErrUnsupported) {
		t.Errorf("sonyflake with a lease: %v", err)
	}
}
