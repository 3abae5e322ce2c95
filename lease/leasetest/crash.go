package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
)

// CrashReport is what CrashHandoff saw.
type CrashReport struct {
	// LastA is the crashed holder's last ID and LastAMs its time (Unix ms).
	LastA   generator.ID
	LastAMs int64
	// MarkB is the mark the successor's lease carried from the store.
	MarkB int64
	// FirstB is the successor's first ID.
	FirstB generator.ID
	// IssuedB is how many IDs the successor issued; Duplicates how many
	// of them the crashed holder had issued too.
	IssuedB, Duplicates int
}

// Safe reports whether the successor repeated nothing and started above
// every ID of the crashed holder, having read a mark at or above it.
func (r CrashReport) Safe() bool {
	return r.MarkB >= r.LastAMs && r.FirstB > r.LastA && r.Duplicates == 0
}

// CrashBehind is how far the successor's clock is behind in CrashHandoff.
const CrashBehind = 12 * time.Second

// CrashHandoff runs a crash handoff on b's store with two
// Keepers and generators wired as snowchaos serve wires them (worker 3
// only, the refuse policy, a 100 ms reservation: a store write every 50 ms
// of issuing), both on clock (which is also b's store clock when b.Advance
// is set; otherwise the store runs on real time and the successor polls
// until the crashed lease expired).
//
// Node A issues one ID per millisecond for ttl/2, renewing at ttl/3, and
// crashes (no Close, no Release) halfway to its next renewal. Node B, another holder whose clock is
// CrashBehind behind, takes worker 3 once the store expired A's lease and
// issues one ID per millisecond for 3 s once its start fence lets it.
// markAtRenewal sets KeeperConfig.DisableMarkWriteThrough on A (the
// negative control: the store holds A's mark as of its last renewal).
func CrashHandoff(t *testing.T, b Backend, clock *Clock, ttl time.Duration, markAtRenewal bool) CrashReport {
	t.Helper()
	ctx := context.Background()
	var rep CrashReport
	ka, ga := crashNode(t, b.Registry, "node-a", clock, ttl, markAtRenewal)
	issuedA := map[generator.ID]bool{}
	for range ttl / 2 / time.Millisecond {
		id, err := ga.Next()
		if err != nil {
			t.Fatalf("A: %v", err)
		}
		issuedA[id], rep.LastA = true, id
		clock.Advance(time.Millisecond)
		ka.Tick(ctx)
	}
	if st := ka.Stats(); st.RenewOK == 0 {
		t.Fatalf("A never renewed: %+v", st)
	}
	rep.LastAMs = generator.DefaultLayout().Decode(rep.LastA).Time.UnixMilli()
	// A crashes here: its generator and keeper are dropped as they are.

	kb := newCrashKeeper(t, b.Registry, "node-b", clock.Offset(-CrashBehind), ttl, false)
	t.Cleanup(func() { kb.Release(context.Background()) })
	var lb lease.Lease
	eventually(t, b, ttl/4, "the crashed holder's lease to expire", func() bool {
		l, err := kb.TryAcquire(ctx)
		switch {
		case err == nil:
			lb = l
			return true
		case errors.Is(err, lease.ErrAllTaken):
			return false
		}
		t.Fatalf("B: acquire: %v", err)
		return false
	})
	rep.MarkB = lb.LastIssuedMs
	gb := crashGenerator(t, kb, lb)
	for i := 0; rep.IssuedB < 3000; i++ {
		if i > 30_000 {
			t.Fatalf("B issued %d IDs in 30 s", rep.IssuedB)
		}
		id, err := gb.Next()
		switch {
		case err == nil:
			if rep.IssuedB == 0 {
				rep.FirstB = id
			}
			rep.IssuedB++
			if issuedA[id] {
				rep.Duplicates++
			}
		case errors.Is(err, generator.ErrFenced):
			t.Fatalf("B fenced: %v", err)
		}
		clock.Advance(time.Millisecond)
		kb.Tick(ctx)
	}
	return rep
}

func newCrashKeeper(t *testing.T, reg lease.Registry, holder string, clock generator.Clock, ttl time.Duration, markAtRenewal bool) *lease.Keeper {
	t.Helper()
	k, err := lease.NewKeeper(lease.KeeperConfig{
		Registry: reg, Holder: holder, Range: lease.Range{Min: 3, Max: 3}, TTL: ttl, Clock: clock,
		DisableMarkWriteThrough: markAtRenewal,
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func crashNode(t *testing.T, reg lease.Registry, holder string, clock generator.Clock, ttl time.Duration, markAtRenewal bool) (*lease.Keeper, *generator.Generator) {
	t.Helper()
	k := newCrashKeeper(t, reg, holder, clock, ttl, markAtRenewal)
	l, err := k.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("%s: acquire: %v", holder, err)
	}
	return k, crashGenerator(t, k, l)
}

func crashGenerator(t *testing.T, k *lease.Keeper, l lease.Lease) *generator.Generator {
	t.Helper()
	g, err := generator.New(generator.Settings{
		Node: l.WorkerID, Policy: generator.PolicyRefuse, Clock: k.Clock(), Fence: k, Checkpoint: k,
		Reserve: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
