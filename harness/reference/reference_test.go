package reference

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

var start = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*faults.Virtual, *faults.Clock, generator.Settings) {
	t.Helper()
	v := faults.NewVirtual(start, true)
	c := faults.New(v)
	return v, c, generator.Settings{Node: 7, Clock: c}
}

// issue calls g n times, advancing virtual time by every between calls,
// and returns the IDs.
func issue(t *testing.T, g Generator, v *faults.Virtual, n int, every time.Duration) []generator.ID {
	t.Helper()
	var out []generator.ID
	for i := 0; i < n; i++ {
		id, err := g.NextContext(context.Background())
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		out = append(out, id)
		v.Advance(every)
	}
	return out
}

func dups(ids []generator.ID) int {
	seen := map[generator.ID]bool{}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
		seen[id] = true
	}
	return n
}

func TestStepBack(t *testing.T) {
	cases := []struct {
		name     string
		wantDups bool
	}{
		{NameNoRewindCheck, true},
		{NameSeqResetFirst, true},
		{NameMemoryOnly, false},
		{NameUnboundedLogical, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, clk, s := setup(t)
			g, err := New(c.name, s)
			if err != nil {
				t.Fatal(err)
			}
			ids := issue(t, g, v, 100, 100*time.Microsecond)
			clk.Step(-5 * time.Millisecond)
			ids = append(ids, issue(t, g, v, 100, 100*time.Microsecond)...)
			if got := dups(ids) > 0; got != c.wantDups {
				t.Fatalf("duplicates = %d, want some: %v", dups(ids), c.wantDups)
			}
		})
	}
}

func TestMemoryOnlyRestart(t *testing.T) {
	v, _, s := setup(t)
	g, _ := NewMemoryOnly(s)
	ids := issue(t, g, v, 3, 0)
	g.Close()
	if _, err := g.NextContext(context.Background()); !errors.Is(err, generator.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	g2, _ := NewMemoryOnly(s)
	ids = append(ids, issue(t, g2, v, 3, 0)...)
	if dups(ids) != 3 {
		t.Fatalf("restart in the same tick: %d duplicates, want 3", dups(ids))
	}
}

func TestUnboundedLogicalLead(t *testing.T) {
	_, _, s := setup(t)
	g, _ := NewUnboundedLogical(s)
	dst := make([]generator.ID, 100_000)
	n, err := g.NextNContext(context.Background(), dst)
	if err != nil || n != len(dst) {
		t.Fatal(n, err)
	}
	if dups(dst) != 0 {
		t.Fatal("duplicates")
	}
	l := generator.DefaultLayout()
	lead := l.Decode(dst[n-1]).Time.Sub(start)
	if lead < 24*time.Millisecond {
		t.Fatalf("lead after 100,000 IDs in no time = %v, want >= 24ms", lead)
	}
}

func TestExhaustionWaits(t *testing.T) {
	for _, name := range []string{NameNoRewindCheck, NameSeqResetFirst, NameMemoryOnly} {
		v, _, s := setup(t)
		g, _ := New(name, s)
		dst := make([]generator.ID, 10_000)
		if _, err := g.NextNContext(context.Background(), dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := 1; i < len(dst); i++ {
			if dst[i] <= dst[i-1] {
				t.Fatalf("%s: not increasing at %d", name, i)
			}
		}
		if e := v.Elapsed(); e < 2*time.Millisecond {
			t.Fatalf("%s: 10,000 IDs took %v of virtual time, want >= 2ms", name, e)
		}
	}
}

func TestStall(t *testing.T) {
	_, clk, s := setup(t)
	g, _ := NewNoRewindCheck(s)
	clk.Freeze(0)
	dst := make([]generator.ID, 5000)
	if _, err := g.NextNContext(context.Background(), dst); !errors.Is(err, ErrStalled) {
		t.Fatalf("frozen clock: %v, want ErrStalled", err)
	}
}

func TestUnknown(t *testing.T) {
	if _, err := New("nope", generator.Settings{}); err == nil {
		t.Fatal("no error")
	}
	for _, in := range All() {
		if g, err := New(in.Name, generator.Settings{Clock: generator.SystemClock()}); err != nil || g == nil {
			t.Errorf("New(%q): %v", in.Name, err)
		} else {
			g.Close()
		}
	}
	if len(All()) != 5 {
		t.Fatal("All")
	}
}

// TestNarrowWorker: the top worker ID issues its bottom-half twin's IDs,
// and a worker outside the node field is still refused.
func TestNarrowWorker(t *testing.T) {
	for _, p := range generator.Presets() {
		_, _, s := setup(t)
		s.Layout = p
		s.Node = p.MaxNode()
		top, err := New(NameNarrowWorker, s)
		if err != nil {
			t.Fatal(err)
		}
		s.Node = p.MaxNode() >> 1
		twin, err := New(NameNarrowWorker, s)
		if err != nil {
			t.Fatal(err)
		}
		a, err := top.NextContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, err := twin.NextContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: worker %d issued %d, its twin %d issued %d: want the same ID", p.Name, p.MaxNode(), a, p.MaxNode()>>1, b)
		}
		if got := p.Decode(a).Node; got != p.MaxNode()>>1 {
			t.Errorf("%s: node field %d, want %d", p.Name, got, p.MaxNode()>>1)
		}
		s.Node = p.MaxNode() + 1
		if _, err := New(NameNarrowWorker, s); !errors.Is(err, generator.ErrNodeRange) {
			t.Errorf("%s: worker %d: %v, want ErrNodeRange", p.Name, s.Node, err)
		}
	}
}
