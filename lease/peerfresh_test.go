package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// slowAcquire is a store whose acquisitions reach it delay after the
// caller read its clock for the report, as ZooKeeper's do: an acquisition
// reads every znode and opens a session before the write that times the
// report (61 ms on a fresh server, 9-15 ms warm, against an uncertainty
// of 4-5 ms: TestPeerEstimateAfterAcquisition in lease/zookeeper).
// Renewals reach it at once.
type slowAcquire struct {
	lease.Registry
	clock *leasetest.Clock
	delay time.Duration
}

func (s slowAcquire) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	s.clock.Advance(s.delay)
	return s.Registry.Acquire(ctx, req)
}

// slowPeer adds to f a peer on the true clock whose acquisition report is
// 60 ms late, as the only live peer: the fleet's one node has just
// (re)started.
func slowPeer(t *testing.T, f *fleet) *lease.Keeper {
	t.Helper()
	k, err := lease.NewKeeper(lease.KeeperConfig{Registry: slowAcquire{f.mem, f.clock, 60 * time.Millisecond}, Holder: "restarted",
		Range: lease.Range{Min: 0, Max: 7}, Prefer: []int64{3}, TTL: ttl, Clock: f.clock, PeerClockMaxSkew: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.peers = append(f.peers, k)
	return k
}

// acquireDriven runs k.Acquire while moving the fleet's time on whenever
// it sleeps, the peers renewing as they are due; it returns Acquire's
// result and how much time passed.
func acquireDriven(t *testing.T, f *fleet, k *lease.Keeper) (lease.Lease, time.Duration, error) {
	t.Helper()
	type result struct {
		l   lease.Lease
		err error
	}
	done := make(chan result, 1)
	_, start := f.clock.Now()
	go func() {
		l, err := k.Acquire(context.Background())
		done <- result{l, err}
	}()
	for {
		select {
		case r := <-done:
			_, end := f.clock.Now()
			return r.l, time.Duration(end - start), r.err
		default:
		}
		var finished bool
		testenv.WaitFor(t, 10*time.Second, func() bool {
			finished = len(done) > 0
			return finished || f.clock.Waiters() > 0
		}, "Acquire neither returned nor slept")
		if !finished {
			f.advance(100 * time.Millisecond)
		}
	}
}

// TestPeerCheckJudgesFreshReports: right after a peer's acquisition its
// report makes its clock look 60 ms behind (the delay between its reading
// and the store's receipt), far beyond the check's stated uncertainty, so
// a node 960 ms ahead looked 1.02 s ahead and was refused against a 1 s
// bound. Acquire judges a refusal again on the peer's next report (its
// renewal, read just before a one-write call): the node starts, the check
// saying so. A node really beyond the bound is still refused after the
// wait, and when the peer sends nothing fresh the first check stands.
func TestPeerCheckJudgesFreshReports(t *testing.T) {
	t.Run("one attempt sees the late report", func(t *testing.T) {
		f := newFleet(t)
		slowPeer(t, f)
		k, _ := f.newcomer(960*time.Millisecond, nil)
		_, err := k.TryAcquire(context.Background())
		var pe *lease.PeerClockSkewError
		if !errors.As(err, &pe) {
			t.Fatalf("TryAcquire = %v, want the refusal TryAcquire cannot judge again", err)
		}
		if c := pe.Check; c.Skew != 1020*time.Millisecond || c.Uncertainty > time.Millisecond || c.Fresh {
			t.Fatalf("check %+v: want skew 1.02s (60ms of it the report's delay) and an uncertainty that misses it", c)
		}
	})
	t.Run("960ms ahead starts", func(t *testing.T) {
		f := newFleet(t)
		slowPeer(t, f)
		k, events := f.newcomer(960*time.Millisecond, nil)
		l, waited, err := acquireDriven(t, f, k)
		if err != nil {
			t.Fatalf("Acquire = %v, want a start judged on the peer's renewal", err)
		}
		if waited > ttl/3+ttl/24 {
			t.Errorf("waited %v for the peer's renewal, due within %v", waited, ttl/3)
		}
		pc := (*events)[len(*events)-1].PeerCheck
		if pc == nil || !pc.Fresh || pc.Refused || len(pc.Peers) != 1 || pc.Skew != 960*time.Millisecond {
			t.Fatalf("check %+v, want a fresh one: 1 peer, skew 960ms, not refused", pc)
		}
		if l.WorkerID != 0 || k.State() != lease.StateHeld {
			t.Errorf("lease %v, state %v", l, k.State())
		}
	})
	t.Run("1.2s ahead is refused on the fresh report", func(t *testing.T) {
		f := newFleet(t)
		slowPeer(t, f)
		k, _ := f.newcomer(1200*time.Millisecond, nil)
		_, _, err := acquireDriven(t, f, k)
		var pe *lease.PeerClockSkewError
		if !errors.As(err, &pe) || !pe.Check.Fresh || pe.Check.Skew != 1200*time.Millisecond {
			t.Fatalf("Acquire = %v, want a refusal on the fresh report at skew 1.2s", err)
		}
	})
	t.Run("no fresh report: the first check stands", func(t *testing.T) {
		f := newFleet(t)
		slowPeer(t, f)
		f.peers = nil // the peer hangs: no renewal reaches the store before its lease runs out
		k, _ := f.newcomer(960*time.Millisecond, nil)
		_, waited, err := acquireDriven(t, f, k)
		var pe *lease.PeerClockSkewError
		if !errors.As(err, &pe) || pe.Check.Fresh || pe.Check.Skew != 1020*time.Millisecond {
			t.Fatalf("Acquire = %v, want the first refusal", err)
		}
		// A renewal interval plus CallTimeout, at most.
		if limit := ttl/3 + lease.DefaultCallTimeout(ttl) + 100*time.Millisecond; waited > limit {
			t.Errorf("waited %v, want at most %v", waited, limit)
		}
	})
}
