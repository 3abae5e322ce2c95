package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// TestCrashHandoffToNodeBehind: after a crash, the mark in the store is
// at or above every ID the crashed holder issued (it was recorded before
// any ID passed it), so a successor whose clock is 12 s behind waits and
// repeats nothing. The negative control records the mark only at renewal,
// as before: the stored mark is about TTL/6 (1.5 s) behind A's last ID and B
// repeats A's IDs of that time.
func TestCrashHandoffToNodeBehind(t *testing.T) {
	for _, tc := range []struct {
		name          string
		markAtRenewal bool
	}{{"recorded-ahead", false}, {"mark-at-renewal", true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := leasetest.NewClock(epoch)
			b := leasetest.Backend{Registry: lease.NewMemory(clock), Advance: clock.Advance}
			rep := leasetest.CrashHandoff(t, b, clock, ttl, tc.markAtRenewal)
			if tc.markAtRenewal {
				if rep.Safe() || rep.Duplicates < 1000 {
					t.Fatalf("negative control not caught: %+v", rep)
				}
				t.Logf("control: stored mark %d ms behind A's last ID, %d duplicates", rep.LastAMs-rep.MarkB, rep.Duplicates)
				return
			}
			if !rep.Safe() {
				t.Fatalf("successor not safe: %+v", rep)
			}
		})
	}
}

// TestKeeperSaveWritesThrough: Save records the mark in the store before
// it returns, skips marks the store already holds, and fails (so the
// generator refuses to pass its old mark) when the store cannot take it.
// With DisableMarkWriteThrough the store sees the mark only at renewal.
func TestKeeperSaveWritesThrough(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, nil)
	l := r.acquire()
	stored := func() int64 {
		ls, err := r.mem.List(ctx)
		if err != nil || len(ls) != 1 {
			t.Fatalf("List = %v, %v", ls, err)
		}
		return ls[0].LastIssuedMs
	}
	if err := r.k.Save(ctx, 5000); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != 5000 {
		t.Fatalf("store holds %d after Save(5000), want 5000 before any renewal", got)
	}
	if err := r.k.Save(ctx, 4000); err != nil { // the final mark of a Close
		t.Fatal(err)
	}
	if st := r.k.Stats(); st.Records != 1 || stored() != 5000 {
		t.Errorf("Save(4000) below the stored 5000: %d records, store %d; want 1 and 5000", st.Records, stored())
	}
	r.mem.SetAvailable(false)
	err := r.k.Save(ctx, 6000)
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Save with the store down = %v, want ErrUnavailable", err)
	}
	if st := r.k.Stats(); st.RecordErrors != 1 || st.State != lease.StateHeld {
		t.Errorf("stats %+v: want 1 record error, still held", st)
	}
	r.mem.SetAvailable(true)
	if err := r.k.Save(ctx, 6000); err != nil || stored() != 6000 {
		t.Fatalf("Save after the store returned = %v, store %d", err, stored())
	}

	// The store gives the worker ID to another holder: Save fails with
	// ErrLost and the fence closes at once.
	r.clock.Advance(ttl)
	if _, err := r.mem.Acquire(ctx, lease.Request{Holder: "thief", Range: lease.Range{Min: l.WorkerID, Max: l.WorkerID}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := r.k.Save(ctx, 7000); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Save after the worker ID was taken = %v, want ErrLost", err)
	}
	wantReason(t, r.check(), lease.ReasonLost)

	c := newRig(t, func(c *lease.KeeperConfig) { c.DisableMarkWriteThrough = true })
	c.acquire()
	if err := c.k.Save(ctx, 5000); err != nil {
		t.Fatal(err)
	}
	ls, _ := c.mem.List(ctx)
	if ls[0].LastIssuedMs != 0 {
		t.Fatalf("control: store holds %d before a renewal, want 0", ls[0].LastIssuedMs)
	}
	c.clock.Advance(ttl / 3)
	c.tick()
	ls, _ = c.mem.List(ctx)
	if ls[0].LastIssuedMs != 5000 {
		t.Fatalf("control: store holds %d after the renewal, want 5000", ls[0].LastIssuedMs)
	}
}
