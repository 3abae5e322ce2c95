package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// node is a generator wired to a Keeper the way snowchaos serve wires it.
func node(t *testing.T, reg lease.Registry, holder string, clock generator.Clock, disableGuard bool) (*lease.Keeper, *generator.Generator) {
	t.Helper()
	k, err := lease.NewKeeper(lease.KeeperConfig{
		Registry: reg, Holder: holder, Range: lease.Range{Min: 3, Max: 3}, TTL: ttl, Clock: clock,
		SkewBudget: 5 * time.Millisecond, DisableHandoffGuard: disableGuard,
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := generator.New(generator.Settings{
		Node:       l.WorkerID,
		Policy:     generator.PolicyRefuse,
		Clock:      k.Clock(),
		Fence:      k,
		Checkpoint: k,
		Reserve:    10 * time.Millisecond, // Keeper.Save costs no I/O
	})
	if err != nil {
		t.Fatal(err)
	}
	return k, g
}

// TestHandoffToNodeBehind hands worker 3 from node A to node B, whose clock
// is 20ms behind, after a 5ms gap. With the handoff guard B refuses until
// its clock passes A's last issued time and every B ID is above every A
// ID; without it (the negative control) B issues at once, below A's IDs.
func TestHandoffToNodeBehind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
	}{{"guarded", false}, {"unguarded", true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := leasetest.NewClock(epoch)
			reg := lease.NewMemory(clock)
			ka, ga := node(t, reg, "node-a", clock, false)
			var lastA generator.ID
			for range 50 {
				for range 10 {
					id, err := ga.Next()
					if err != nil {
						t.Fatal(err)
					}
					lastA = id
				}
				clock.Advance(time.Millisecond)
			}
			if err := ga.Close(); err != nil {
				t.Fatal(err)
			}
			if err := ka.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			clock.Advance(5 * time.Millisecond)
			kb, gb := node(t, reg, "node-b", clock.Offset(-20*time.Millisecond), tc.disable)
			defer kb.Release(context.Background())
			first, err := gb.Next()
			if tc.disable {
				if err != nil {
					t.Fatalf("unguarded B refused: %v", err)
				}
				if first > lastA {
					t.Fatalf("negative control not caught: B's first ID %d above A's last %d", first, lastA)
				}
				return
			}
			if err == nil {
				t.Fatalf("guarded B issued %d at once, A's last was %d", first, lastA)
			}
			if errors.Is(err, generator.ErrFenced) {
				t.Fatalf("B refused by the fence, not the start fence: %v", err)
			}
			if st := kb.Stats(); st.HandoffWaits != 1 || st.HandoffWait <= 0 {
				t.Errorf("handoff stats %+v", st)
			}
			for i := 0; ; i++ {
				if i > 100 {
					t.Fatalf("B still refusing after 100ms: %v", err)
				}
				clock.Advance(time.Millisecond)
				if first, err = gb.Next(); err == nil {
					break
				}
			}
			if first <= lastA {
				t.Fatalf("B's first ID %d not above A's last %d", first, lastA)
			}
		})
	}
}

// TestGeneratorFencedWhenLeaseLost: the generator refuses with the Keeper's
// *FenceError once the lease is lost.
func TestGeneratorFencedWhenLeaseLost(t *testing.T) {
	clock := leasetest.NewClock(epoch)
	reg := lease.NewMemory(clock)
	k, g := node(t, reg, "node-a", clock, false)
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	reg.SetAvailable(false)
	clock.Advance(ttl)
	_, err := g.Next()
	var fe *lease.FenceError
	if !errors.Is(err, generator.ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("Next after the validity ran out = %v, want a lease *FenceError", err)
	}
	if g.Ready() == nil {
		t.Errorf("Ready while fenced")
	}
	_ = k
}
