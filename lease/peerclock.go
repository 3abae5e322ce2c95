package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The peer clock check: before the first ID, a node compares its wall
// clock with the clocks of the other live holders (its peers), as each
// reported its clock to the store with every acquisition and renewal, and
// refuses to start when it is too far off the median of them. Twitter's
// Snowflake did this at start against the workers registered in
// ZooKeeper; docs/leases.md says what it protects and what it cannot.

// Bounds and defaults of KeeperConfig.PeerClockMaxSkew.
const (
	// DefaultPeerClockMaxSkew is the default bound: far above the offsets
	// of NTP-synchronised hosts (milliseconds) and the check's measurement
	// error with every backend (etcd's half second included), far below a
	// lease TTL (the least time a late node must lag to repeat the IDs of
	// a crashed holder whose mark the store lost).
	DefaultPeerClockMaxSkew = time.Second
	// MaxPeerClockSkew is the largest bound KeeperConfig accepts.
	MaxPeerClockSkew = time.Hour
	// PeerClockRateError is the clock rate difference the check allows
	// between a peer's clock and the store's while a report ages: NTP's
	// largest frequency tolerance, 500 ppm.
	PeerClockRateError = 500e-6
)

// ErrPeerClockSkew: the node's wall clock is off the median of its live
// peers' clocks by more than the bound; it did not start. The error is a
// *PeerClockSkewError naming the peers, their clocks and the skew.
var ErrPeerClockSkew = errors.New("lease: peer clock skew")

// PeerCheck is the result of the peer clock check a Keeper makes when it
// acquires its first lease (see KeeperConfig.PeerClockMaxSkew).
type PeerCheck struct {
	// Peers are the live peers compared with, by worker ID: the held
	// leases of other holders that carry a clock report. None: there was
	// nothing to compare with, and the node starts.
	Peers []PeerClock
	// Skew is this node's wall clock minus the median of the peers'
	// clocks. With an even number of peers it is the one of the two middle
	// skews nearer zero, or zero when they lie on either side of it: more
	// than half of the peers are at least that far off, in that direction.
	// Zero without peers.
	Skew time.Duration
	// Uncertainty bounds the error of Skew as measured: half the List call
	// by this node's monotonic clock, plus the largest ReportAgeError and
	// clock rate error (PeerClockRateError times ReportAge) among the
	// peers.
	Uncertainty time.Duration
	// Bound is the bound the check applied (KeeperConfig.PeerClockMaxSkew).
	Bound time.Duration
	// Refused is true when |Skew| exceeds Bound plus Uncertainty.
	Refused bool
	// Fresh is true when a first comparison refused and this one was made
	// again on the reports the same peers sent after it (their renewals;
	// Keeper.Acquire): a report sent with an acquisition may be read long
	// before the store receives it (ZooKeeper's acquisition reads every
	// znode and opens a session first), which makes the peer's clock look
	// behind by that delay, beyond Uncertainty. Peers that sent no fresh
	// report in time are left out; without any, the first comparison
	// stands and Fresh is false.
	Fresh bool
}

// PeerClock is one live peer's clock as this node estimated it.
type PeerClock struct {
	// WorkerID and Holder identify the peer's lease.
	WorkerID int64
	Holder   string
	// Clock is the peer's wall clock estimated for the store's now during
	// the List call (Lease.EstimatedClock).
	Clock time.Time
	// Skew is this node's clock at that moment minus Clock.
	Skew time.Duration
}

// ComparePeers compares this node's wall clock with the live peers in ls
// (a List answer): now is this node's wall clock at the middle of the List
// call and rtt the call's duration by its monotonic clock. Entries of
// self's worker ID or holder (this node's own lease, or a crashed earlier
// incarnation of it) are no peers, nor are entries without a report
// (released, expired, or written by a release without reports). A holder
// with several live leases (one it lost track of and one it acquired
// since) is one peer, compared by its freshest report.
func ComparePeers(ls []Lease, self Lease, now time.Time, rtt, bound time.Duration) PeerCheck {
	pc := PeerCheck{Bound: bound}
	var holders []string
	best := map[string]Lease{}
	for _, l := range ls {
		if l.ReportedMs <= 0 || l.WorkerID == self.WorkerID || l.Holder == self.Holder {
			continue
		}
		if b, dup := best[l.Holder]; !dup {
			holders = append(holders, l.Holder)
		} else if b.ReportAge <= l.ReportAge {
			continue
		}
		best[l.Holder] = l
	}
	var worst time.Duration
	for _, h := range holders {
		l := best[h]
		clock, _ := l.EstimatedClock()
		pc.Peers = append(pc.Peers, PeerClock{WorkerID: l.WorkerID, Holder: h, Clock: clock, Skew: now.Sub(clock)})
		worst = max(worst, l.ReportAgeError+time.Duration(float64(l.ReportAge)*PeerClockRateError))
	}
	if len(pc.Peers) == 0 {
		return pc
	}
	pc.Uncertainty = max(rtt, 0)/2 + worst
	skews := make([]time.Duration, len(pc.Peers))
	for i, p := range pc.Peers {
		skews[i] = p.Skew
	}
	slices.Sort(skews)
	n := len(skews)
	switch lo, hi := skews[(n-1)/2], skews[n/2]; {
	case n%2 == 1:
		pc.Skew = hi
	case lo > 0:
		pc.Skew = lo
	case hi < 0:
		pc.Skew = hi
	}
	pc.Refused = max(pc.Skew, -pc.Skew) > bound+pc.Uncertainty
	return pc
}

// PeerClockSkewError reports a start the peer clock check refused. It
// wraps ErrPeerClockSkew.
type PeerClockSkewError struct {
	// Check is the check's result (Refused is true).
	Check PeerCheck
	// Lease is the lease the Keeper had acquired and released.
	Lease Lease
}

// Error returns e.g. "lease: peer clock skew: this node's clock is 10s
// behind the median of its 2 live peers, beyond the bound 1s (measurement
// uncertainty 2ms): worker 2 (node-b) at 2025-06-01T00:00:15Z, skew -10s;
// worker 3 (node-c) at 2025-06-01T00:00:15.001Z, skew -10.001s; worker 1
// released".
func (e *PeerClockSkewError) Error() string {
	c := e.Check
	dir, by := "ahead of", c.Skew
	if by < 0 {
		dir, by = "behind", -by
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v: this node's clock is %v %s the median of its %d live peers, beyond the bound %v (measurement uncertainty %v):",
		ErrPeerClockSkew, by, dir, len(c.Peers), c.Bound, c.Uncertainty)
	for i, p := range c.Peers {
		if i == maxNamed {
			fmt.Fprintf(&b, " (and %d more)", len(c.Peers)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " worker %d (%s) at %s, skew %v", p.WorkerID, p.Holder, p.Clock.UTC().Format(time.RFC3339Nano), p.Skew)
	}
	fmt.Fprintf(&b, "; worker %d released", e.Lease.WorkerID)
	return b.String()
}

// Unwrap returns ErrPeerClockSkew.
func (e *PeerClockSkewError) Unwrap() error { return ErrPeerClockSkew }

// checkPeersLocked lists the store's leases and compares this node's
// clock with its live peers' (ComparePeers), within CallTimeout. With
// fresh, a comparison that refuses is made again on fresher reports
// (awaitFreshLocked).
func (k *Keeper) checkPeersLocked(ctx context.Context, self Lease, fresh bool) (PeerCheck, error) {
	first, err := k.listPeers(ctx)
	if err != nil {
		return PeerCheck{}, err
	}
	pc := ComparePeers(first.leases, self, first.now, first.rtt, k.cfg.PeerClockMaxSkew)
	if !pc.Refused || !fresh {
		return pc, nil
	}
	return k.awaitFreshLocked(ctx, self, pc, first)
}

// peerListing is one List call of the peer clock check.
type peerListing struct {
	leases     []Lease
	now        time.Time     // this node's wall clock at the middle of the call
	rtt        time.Duration // the call's duration, by the monotonic clock
	sent, done int64         // monotonic readings before and after it
}

func (k *Keeper) listPeers(ctx context.Context) (peerListing, error) {
	wall, sent := k.clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.cfg.CallTimeout)
	ls, err := k.cfg.Registry.List(cctx)
	cancel()
	if err != nil {
		return peerListing{}, fmt.Errorf("peer clock check: listing the leases: %w", err)
	}
	_, done := k.clock.Now()
	rtt := time.Duration(done - sent)
	return peerListing{leases: ls, now: time.Unix(0, wall).Add(rtt / 2), rtt: rtt, sent: sent, done: done}, nil
}

// awaitFreshLocked makes a refusing check again on fresh reports: it
// lists the leases when the peers of first are due to renew, and every
// TTL/48 after, until each has
// reported again since the first listing (the same worker ID, holder and
// token: a renewal, not a new acquisition) or is gone, for at most a
// renewal interval plus CallTimeout (peers renew every TTL/3, as this
// node does) and never past half the lease's remaining validity, then
// compares with the fresh reports alone. Without any, the first check
// stands.
func (k *Keeper) awaitFreshLocked(ctx context.Context, self Lease, pc PeerCheck, first peerListing) (PeerCheck, error) {
	type peer struct {
		holder string
		token  int64
	}
	want := map[int64]peer{}
	for _, p := range pc.Peers {
		for _, l := range first.leases {
			if l.WorkerID == p.WorkerID {
				want[l.WorkerID] = peer{l.Holder, l.Token}
			}
		}
	}
	deadline := first.done + k.interval + int64(k.cfg.CallTimeout)
	if g := k.cur.Load(); g != nil {
		if v := g.validUntil.Load(); v != math.MinInt64 {
			deadline = min(deadline, first.done+(v-first.done)/2)
		}
	}
	// The first listing's peers are due to renew interval less their
	// reports' ages later; look then, and every step after until each
	// has renewed or the deadline.
	step := k.interval / 16
	due := first.done
	for _, l := range first.leases {
		if _, ok := want[l.WorkerID]; ok {
			due = max(due, first.done+k.interval-int64(l.ReportAge))
		}
	}
	for {
		_, mono := k.clock.Now()
		wake := min(max(due, mono)+step, deadline)
		if mono >= deadline || !k.sleep(ctx, time.Duration(wake-mono)) {
			return pc, nil
		}
		next, err := k.listPeers(ctx)
		if err != nil {
			return PeerCheck{}, err
		}
		// A report is fresh when the store received it after the first
		// listing ended: its age is below the time since, less what the
		// two clocks' rates and the store's reading may take off.
		since := time.Duration(next.sent - first.done)
		var fresh []Lease
		waiting := 0
		for _, l := range next.leases {
			p, ok := want[l.WorkerID]
			if !ok || l.Holder != p.holder || l.Token != p.token || l.ReportedMs <= 0 {
				continue
			}
			if l.ReportAge+l.ReportAgeError < since-time.Duration(float64(since)*PeerClockRateError) {
				fresh = append(fresh, l)
			} else {
				waiting++
			}
		}
		if waiting > 0 && next.done < deadline {
			continue
		}
		if len(fresh) == 0 {
			return pc, nil
		}
		again := ComparePeers(fresh, self, next.now, next.rtt, k.cfg.PeerClockMaxSkew)
		again.Fresh = true
		return again, nil
	}
}
