package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// peerEntry is a List entry of a live peer whose clock reads now+off at
// the store's now (reported age ago).
func peerEntry(id int64, holder string, now time.Time, off, age, ageErr time.Duration) lease.Lease {
	return lease.Lease{WorkerID: id, Holder: holder, Token: 1, ReportedMs: now.Add(off - age).UnixMilli(), ReportAge: age, ReportAgeError: ageErr}
}

func TestComparePeers(t *testing.T) {
	now := epoch
	self := lease.Lease{WorkerID: 9, Holder: "me"}
	peers := func(offs ...time.Duration) []lease.Lease {
		var ls []lease.Lease
		for i, o := range offs {
			ls = append(ls, peerEntry(int64(i), fmt.Sprintf("p%d", i), now, o, 2*time.Second, 0))
		}
		return ls
	}
	for _, tc := range []struct {
		name    string
		ls      []lease.Lease
		rtt     time.Duration
		peers   int
		skew    time.Duration
		refused bool
	}{
		{name: "no peers", ls: nil},
		{name: "self, own holder and unreported are no peers", ls: []lease.Lease{
			peerEntry(9, "other", now, time.Hour, 0, 0),         // this node's own worker ID
			peerEntry(4, "me", now, time.Hour, 0, 0),            // a crashed incarnation of this node
			{WorkerID: 5, Holder: "quiet", Token: 1},            // no report
			{WorkerID: 6, Holder: "gone", LastIssuedMs: 123456}, // released
		}},
		{name: "agrees", ls: peers(0, 3*time.Millisecond, -2*time.Millisecond), peers: 3},
		{name: "a holder with two leases is one peer, by its freshest report", ls: []lease.Lease{
			peerEntry(1, "p", now, 0, time.Second, 0),
			peerEntry(2, "twice", now, 10*time.Second, 8*time.Second, 0), // an old lease it lost track of
			peerEntry(3, "twice", now, 0, time.Second, 0),
		}, peers: 2},
		{name: "ten seconds behind", ls: peers(10*time.Second, 10*time.Second, 10*time.Second), peers: 3, skew: -10 * time.Second, refused: true},
		{name: "ten seconds ahead", ls: peers(-10*time.Second, -10*time.Second), peers: 2, skew: 10 * time.Second, refused: true},
		{name: "one peer off: the majority rules", ls: peers(0, time.Hour, 0), peers: 3},
		{name: "one of two off: no majority", ls: peers(0, 10*time.Second), peers: 2},
		{name: "two of two off: the one nearer", ls: peers(5*time.Second, 10*time.Second), peers: 2, skew: -5 * time.Second, refused: true},
		{name: "median of four, nearer zero", ls: peers(-3*time.Second, -4*time.Second, -5*time.Second, 1*time.Second), peers: 4, skew: 3 * time.Second, refused: true},
		{name: "within the bound", ls: peers(900 * time.Millisecond), peers: 1, skew: -900 * time.Millisecond},
		{name: "the round trip widens it", ls: peers(1100 * time.Millisecond), rtt: 300 * time.Millisecond, peers: 1, skew: -1100 * time.Millisecond},
		{name: "beyond the round trip", ls: peers(1200 * time.Millisecond), rtt: 300 * time.Millisecond, peers: 1, skew: -1200 * time.Millisecond, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := lease.ComparePeers(tc.ls, self, now, tc.rtt, time.Second)
			if len(pc.Peers) != tc.peers || pc.Skew != tc.skew || pc.Refused != tc.refused || pc.Bound != time.Second {
				t.Errorf("ComparePeers = %d peers, skew %v, refused %v, bound %v; want %d, %v, %v, 1s",
					len(pc.Peers), pc.Skew, pc.Refused, pc.Bound, tc.peers, tc.skew, tc.refused)
			}
		})
	}
}

// TestComparePeersUncertainty: a store that reads its clock coarsely (etcd:
// half a second) widens the bound by that much, and so does a report's
// age at NTP's worst rate error.
func TestComparePeersUncertainty(t *testing.T) {
	now, self := epoch, lease.Lease{WorkerID: 9, Holder: "me"}
	for _, tc := range []struct {
		off, age, ageErr time.Duration
		refused          bool
	}{
		{off: 1400 * time.Millisecond, ageErr: 500 * time.Millisecond},
		{off: 1600 * time.Millisecond, ageErr: 500 * time.Millisecond, refused: true},
		{off: 1004 * time.Millisecond, age: 10 * time.Second}, // 500 ppm of 10 s: 5 ms
		{off: 1006 * time.Millisecond, age: 10 * time.Second, refused: true},
	} {
		pc := lease.ComparePeers([]lease.Lease{peerEntry(1, "p", now, tc.off, tc.age, tc.ageErr)}, self, now, 0, time.Second)
		if pc.Refused != tc.refused {
			t.Errorf("peer %v off, age %v±%v: refused %v (uncertainty %v), want %v", tc.off, tc.age, tc.ageErr, pc.Refused, pc.Uncertainty, tc.refused)
		}
	}
}

// fleet is a memory store on a manual clock with live peers renewing on
// it (started without the check: a peer may be set far off on purpose).
type fleet struct {
	t     *testing.T
	clock *leasetest.Clock
	mem   *lease.Memory
	peers []*lease.Keeper
}

func newFleet(t *testing.T, peers ...time.Duration) *fleet {
	t.Helper()
	f := &fleet{t: t, clock: leasetest.NewClock(epoch)}
	f.mem = lease.NewMemory(f.clock)
	for i, off := range peers {
		k, err := lease.NewKeeper(lease.KeeperConfig{Registry: f.mem, Holder: fmt.Sprintf("peer-%d", i), Range: lease.Range{Min: 0, Max: 7},
			Prefer: []int64{int64(i + 1)}, TTL: ttl, Clock: f.clock.Offset(off), PeerClockMaxSkew: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.TryAcquire(context.Background()); err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
		f.peers = append(f.peers, k)
	}
	return f
}

// advance moves time on by d in steps, the peers renewing as they are due.
func (f *fleet) advance(d time.Duration) {
	for done := time.Duration(0); done < d; {
		step := min(100*time.Millisecond, d-done)
		f.clock.Advance(step)
		done += step
		for _, k := range f.peers {
			k.Tick(context.Background())
		}
	}
}

// newcomer is a Keeper whose clock is off, holder "late", preferring worker 0.
func (f *fleet) newcomer(off time.Duration, mutate func(*lease.KeeperConfig)) (*lease.Keeper, *[]lease.Event) {
	f.t.Helper()
	var events []lease.Event
	cfg := lease.KeeperConfig{Registry: f.mem, Holder: "late", Range: lease.Range{Min: 0, Max: 7}, Prefer: []int64{0}, TTL: ttl,
		Clock: f.clock.Offset(off), OnChange: func(e lease.Event) { events = append(events, e) }}
	if mutate != nil {
		mutate(&cfg)
	}
	k, err := lease.NewKeeper(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return k, &events
}

// entry returns the store's entry for worker id.
func (f *fleet) entry(id int64) lease.Lease {
	f.t.Helper()
	ls, err := f.mem.List(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, l := range ls {
		if l.WorkerID == id {
			return l
		}
	}
	f.t.Fatalf("no entry for worker %d in %+v", id, ls)
	return lease.Lease{}
}

// TestKeeperRefusesLateNode: a node whose clock is 10 s behind its two
// live peers is refused before its generator could issue: the error names
// the peers, their clocks and the skew, the lease it took is released,
// and the Keeper holds nothing (its fence refuses). The peers' reports are
// 2.9 s old (renewals every 3 s): their clocks are carried forward.
func TestKeeperRefusesLateNode(t *testing.T) {
	for _, off := range []time.Duration{-10 * time.Second, 10 * time.Second} {
		t.Run(off.String(), func(t *testing.T) {
			f := newFleet(t, 0, 3*time.Millisecond)
			f.advance(5900 * time.Millisecond)
			k, events := f.newcomer(off, nil)
			_, err := k.TryAcquire(context.Background())
			var pe *lease.PeerClockSkewError
			if !errors.Is(err, lease.ErrPeerClockSkew) || !errors.As(err, &pe) {
				t.Fatalf("TryAcquire = %v, want a *PeerClockSkewError", err)
			}
			c := pe.Check
			if len(c.Peers) != 2 || !c.Refused || c.Skew < off-5*time.Millisecond || c.Skew > off+5*time.Millisecond {
				t.Fatalf("check %+v, want 2 peers and skew %v", c, off)
			}
			for i, p := range c.Peers {
				want := f.clockOf(i)
				if d := p.Clock.Sub(want); d < -time.Millisecond || d > time.Millisecond {
					t.Errorf("peer %d estimated at %v, its clock reads %v", i, p.Clock, want)
				}
			}
			msg := err.Error()
			dir := "10s behind"
			if off > 0 {
				dir = "9.997s ahead of" // of the two middle skews, the one nearer zero
			}
			for _, s := range []string{"lease: peer clock skew", dir + " the median of its 2 live peers", "bound 1s", "worker 1 (peer-0)", "worker 2 (peer-1)", "worker 0 released"} {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not say %q", msg, s)
				}
			}
			if l := f.entry(0); l.Holder != "late" || !l.ExpiredAt(time.Unix(0, wallOf(f.clock))) {
				t.Errorf("worker 0 after the refusal: %+v, want released by late", l)
			}
			if k.State() != lease.StateIdle {
				t.Errorf("state %v, want idle", k.State())
			}
			_, mono := f.clock.Now()
			wantReason(t, k.Check(mono), lease.ReasonNotAcquired)
			if len(*events) != 1 || (*events)[0].PeerCheck == nil || !(*events)[0].PeerCheck.Refused || (*events)[0].State != lease.StateIdle {
				t.Errorf("events %+v, want one refusal", *events)
			}
			// Without the check the same node starts.
			k2, _ := f.newcomer(off, func(c *lease.KeeperConfig) { c.PeerClockMaxSkew = -1 })
			if _, err := k2.TryAcquire(context.Background()); err != nil {
				t.Errorf("without the check: %v", err)
			}
		})
	}
}

// clockOf is peer i's clock now.
func (f *fleet) clockOf(i int) time.Time {
	w, _ := f.peers[i].Clock().Now()
	return time.Unix(0, w)
}

func wallOf(c *leasetest.Clock) int64 { w, _ := c.Now(); return w }

// TestKeeperStartsNearPeers: within the bound the node starts and its
// first event carries the check; with no live peer (the only other lease
// expired) it starts too, the event saying it compared with nobody.
func TestKeeperStartsNearPeers(t *testing.T) {
	f := newFleet(t, 0, 0, time.Hour) // one peer is far off: the median is not
	f.advance(time.Second)
	k, events := f.newcomer(-800*time.Millisecond, nil)
	if _, err := k.TryAcquire(context.Background()); err != nil {
		t.Fatalf("800ms behind, bound 1s: %v", err)
	}
	if len(*events) != 1 || (*events)[0].State != lease.StateHeld || (*events)[0].PeerCheck == nil ||
		len((*events)[0].PeerCheck.Peers) != 3 || (*events)[0].PeerCheck.Skew != -800*time.Millisecond {
		t.Fatalf("events %+v, want held with a check of 3 peers and skew -800ms", *events)
	}
	wide, _ := f.newcomer(-30*time.Second, func(c *lease.KeeperConfig) { c.PeerClockMaxSkew = time.Minute; c.Holder = "wide" })
	if _, err := wide.TryAcquire(context.Background()); err != nil {
		t.Errorf("30s behind, bound 1m: %v", err)
	}

	alone := newFleet(t, 0)
	alone.clock.Advance(2 * ttl) // the peer stops renewing: its lease expires
	k, events = alone.newcomer(-time.Hour, nil)
	if _, err := k.TryAcquire(context.Background()); err != nil {
		t.Fatalf("no live peer: %v", err)
	}
	if len(*events) != 1 || (*events)[0].PeerCheck == nil || len((*events)[0].PeerCheck.Peers) != 0 {
		t.Fatalf("events %+v, want held with a check of no peers", *events)
	}
}

// failingList is a store whose List fails.
type failingList struct{ lease.Registry }

func (failingList) List(context.Context) ([]lease.Lease, error) {
	return nil, fmt.Errorf("%w: list down", lease.ErrUnavailable)
}

// TestKeeperPeerCheckUnreachable: when the leases cannot be listed the
// node does not start unchecked: the lease is released and the error is
// the store's (ErrUnavailable), which Acquire retries.
func TestKeeperPeerCheckUnreachable(t *testing.T) {
	f := newFleet(t, 0)
	k, _ := f.newcomer(0, func(c *lease.KeeperConfig) { c.Registry = failingList{f.mem} })
	if _, err := k.TryAcquire(context.Background()); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire = %v, want ErrUnavailable", err)
	}
	if l := f.entry(0); !l.ExpiredAt(time.Unix(0, wallOf(f.clock))) {
		t.Errorf("worker 0 still held after the failed check: %+v", l)
	}
	if k.State() != lease.StateIdle {
		t.Errorf("state %v, want idle", k.State())
	}
}

// TestPeerClockCheckStopsDuplicates is the case only the peer check
// catches. Node A records its mark in the store only at renewal (as
// Leaf does, or a snowchaos before marks were recorded ahead) and
// crashes half a renewal interval after its last renewal; its worker ID
// goes to a host 10 s behind while two peers keep running. The handoff
// guard waits only for the stored mark, which lags A's last IDs by 1.5 s:
// without the peer check the new holder repeats them. The check refuses
// it before it issues anything.
func TestPeerClockCheckStopsDuplicates(t *testing.T) {
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			f := newFleet(t, 0, 0)
			ka, err := lease.NewKeeper(lease.KeeperConfig{Registry: f.mem, Holder: "node-a", Range: lease.Range{Min: 0, Max: 0}, TTL: ttl,
				Clock: f.clock, DisableMarkWriteThrough: true})
			if err != nil {
				t.Fatal(err)
			}
			la, err := ka.TryAcquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ga := generatorOn(t, ka, la)
			issued := map[generator.ID]bool{}
			for range 4500 { // 4.5 s, a renewal at 3 s
				id, err := ga.Next()
				if err != nil {
					t.Fatalf("A: %v", err)
				}
				issued[id] = true
				f.advance(time.Millisecond)
				ka.Tick(context.Background())
			}
			// A crashes. Once its lease expired (12 s: renewed at 3 s), a
			// host 10 s behind takes worker 0: its clock reads 2.1 s, the
			// stored mark 3.01 s, A's last ID 4.5 s.
			f.advance(ttl - 1400*time.Millisecond)
			bound := time.Duration(0)
			if !check {
				bound = -1
			}
			kb, _ := f.newcomer(-10*time.Second, func(c *lease.KeeperConfig) { c.Range = lease.Range{Min: 0, Max: 0}; c.PeerClockMaxSkew = bound })
			lb, err := kb.TryAcquire(context.Background())
			if check {
				if !errors.Is(err, lease.ErrPeerClockSkew) {
					t.Fatalf("late node with the check: %v, want refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gb := generatorOn(t, kb, lb)
			dups := 0
			for range 20_000 {
				if id, err := gb.Next(); err == nil && issued[id] {
					dups++
				}
				f.advance(time.Millisecond)
				kb.Tick(context.Background())
			}
			if dups < 1200 {
				t.Fatalf("control without the check repeated %d IDs, want about 1490", dups)
			}
			t.Logf("without the peer check the late node repeated %d of A's IDs", dups)
		})
	}
}

// generatorOn is a generator on k's lease, wired as snowchaos serve wires it.
func generatorOn(t *testing.T, k *lease.Keeper, l lease.Lease) *generator.Generator {
	t.Helper()
	g, err := generator.New(generator.Settings{Node: l.WorkerID, Policy: generator.PolicyRefuse, Clock: k.Clock(), Fence: k, Checkpoint: k,
		Reserve: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
