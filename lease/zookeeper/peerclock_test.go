package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/lease"
)

// aheadClock is the system clock with its wall reading shifted by off.
type aheadClock struct{ off time.Duration }

func (c aheadClock) Now() (wall, mono int64) {
	now := time.Now()
	return now.UnixNano() + int64(c.off), int64(time.Since(monoBase))
}

func (aheadClock) Sleep(d time.Duration) { time.Sleep(d) }

var monoBase = time.Now()

// TestPeerEstimateAfterAcquisition measures the peer clock check's error
// right after a peer's first acquisition on ZooKeeper, and checks that a
// node 960 ms ahead of that peer starts against the 1 s bound. The peer's
// acquisition report is read before the acquisition reads every znode,
// opens a session and claims the worker ID, so its clock looks behind by
// all of that: on a fresh server 61 ms, against a stated uncertainty of
// 4 ms (9-15 ms once warm); a renewal's report, read just before one
// write on the open session, is within the uncertainty. Keeper.Acquire
// judges a refusal again on the peer's renewal, so the node starts either
// way.
func TestPeerEstimateAfterAcquisition(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{})
	rt := root()
	ctx := ctxT(t, time.Minute)
	const ttl = 4 * time.Second
	peer, err := lease.NewKeeper(lease.KeeperConfig{Registry: open(t, []string{zs.Addr}, rt), Holder: "peer", Range: lease.Range{Min: 0, Max: 7},
		Prefer: []int64{1}, TTL: ttl, PeerClockMaxSkew: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Release(context.Background()) })

	// The estimate's error right after the acquisition, by a reader on
	// the same clock as the peer: the estimate should read its now.
	reader := open(t, []string{zs.Addr}, rt)
	sent := time.Now()
	ls, err := reader.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rtt := time.Since(sent)
	for _, l := range ls {
		if c, ok := l.EstimatedClock(); ok && l.Holder == "peer" {
			t.Logf("right after the acquisition the estimate is %v behind the peer's clock; stated uncertainty %v",
				sent.Add(rtt/2).Sub(c).Round(time.Microsecond), (rtt/2 + l.ReportAgeError).Round(time.Microsecond))
		}
	}

	var check *lease.PeerCheck
	k, err := lease.NewKeeper(lease.KeeperConfig{Registry: open(t, []string{zs.Addr}, rt), Holder: "ahead", Range: lease.Range{Min: 0, Max: 7},
		Prefer: []int64{2}, TTL: ttl, Clock: aheadClock{960 * time.Millisecond},
		OnChange: func(ev lease.Event) {
			if ev.PeerCheck != nil {
				check = ev.PeerCheck
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Acquire(ctx); err != nil {
		t.Fatalf("a node 960ms ahead of its one peer, bound 1s: %v", err)
	}
	t.Cleanup(func() { k.Release(context.Background()) })
	if check == nil || len(check.Peers) != 1 {
		t.Fatalf("check %+v, want one peer", check)
	}
	t.Logf("check: skew %v, uncertainty %v, judged on a fresh report: %v", check.Skew, check.Uncertainty, check.Fresh)
}
