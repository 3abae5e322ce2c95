package etcd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv/etcdtest"
	"github.com/snowchaos/snowchaos/lease"
	leaseetcd "github.com/snowchaos/snowchaos/lease/etcd"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

func prefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "/test-" + hex.EncodeToString(b) + "/"
}

func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t, srv.ClientURL.Host)
	leasetest.Run(t, leasetest.Harness{
		TTL: 2 * time.Second, // etcd's minimum TTL with default timing
		New: func(t *testing.T) leasetest.Backend {
			return leasetest.Backend{Registry: leaseetcd.New(cli, leaseetcd.Options{Prefix: prefix()})}
		},
	})
}

func TestOpenAndList(t *testing.T) {
	srv := etcdtest.Start(t)
	reg, err := leaseetcd.Open([]string{srv.ClientURL.String()}, leaseetcd.Options{Prefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := reg.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Max: 1}, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL != 5*time.Second {
		t.Errorf("granted TTL %v, want 5s", l.TTL)
	}
	ls, err := reg.List(ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != "a" || ls[0].TTL != 5*time.Second {
		t.Errorf("List = %+v, %v", ls, err)
	}
	if _, err := leaseetcd.Open(nil, leaseetcd.Options{}); !errors.Is(err, lease.ErrInvalidConfig) {
		t.Errorf("Open without endpoints: %v", err)
	}
}

// proxy forwards TCP to an etcd server and can partition it away: while
// blocked it drops every connection and refuses new ones.
type proxy struct {
	ln     net.Listener
	target string
	mu     struct {
		sync.Mutex
		blocked bool
		conns   map[net.Conn]struct{}
	}
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.mu.conns = map[net.Conn]struct{}{}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.block() })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mu.blocked {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.mu.conns[c], p.mu.conns[d] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(d, c); d.Close(); c.Close() }()
		go func() { io.Copy(c, d); d.Close(); c.Close() }()
	}
}

func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.blocked = true
	for c := range p.mu.conns {
		c.Close()
		delete(p.mu.conns, c)
	}
}

func (p *proxy) unblock() {
	p.mu.Lock()
	p.mu.blocked = false
	p.mu.Unlock()
}

func waitFor(t *testing.T, k *lease.Keeper, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (stats %+v)", d, what, k.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newKeeper(t *testing.T, reg lease.Registry, ttl time.Duration, events chan lease.Event) (*lease.Keeper, lease.Lease) {
	t.Helper()
	return leasetest.StartKeeper(t, lease.KeeperConfig{
		Registry:    reg,
		Holder:      "node-etcd",
		Range:       lease.Range{Min: 0, Max: 3},
		TTL:         ttl,
		CallTimeout: ttl / 6,
		MaxFailures: 1000, // let the validity margin close the fence
		OnChange:    func(e lease.Event) { events <- e },
	})
}

var clock = generator.SystemClock()

func now() (wall, mono int64) { return clock.Now() }

// TestKeeperFencesWhenServerStops closes the embedded server for real: the
// Keeper refuses before the lease's store expiry (as etcd last reported it)
// and recovers the same lease when the server restarts on the same data.
func TestKeeperFencesWhenServerStops(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t, srv.ClientURL.Host)
	reg := leaseetcd.New(cli, leaseetcd.Options{Prefix: prefix()})
	events := make(chan lease.Event, 64)
	k, first := newKeeper(t, reg, 3*time.Second, events)
	if _, m := now(); k.Check(m) != nil {
		t.Fatalf("fence closed after acquiring: %v", k.Check(m))
	}
	srv.Stop()
	lastKnown, _ := k.Lease()
	waitFor(t, k, "the fence to close", 10*time.Second, func() bool { _, m := now(); return k.Check(m) != nil })
	if w, _ := now(); !time.Unix(0, w).Before(lastKnown.LeasedUntil) {
		t.Errorf("fence closed at %v, not before the store's expiry %v", time.Unix(0, w), lastKnown.LeasedUntil)
	}
	srv.Restart()
	waitFor(t, k, "recovery", 30*time.Second, func() bool { _, m := now(); return k.Check(m) == nil })
	if l, _ := k.Lease(); l.Token != first.Token || l.WorkerID != first.WorkerID {
		t.Errorf("recovered with %v, want the same lease %v", l, first)
	}
	if st := k.Stats(); st.RenewFailed == 0 {
		t.Errorf("no failed renewals counted: %+v", st)
	}
}

// TestKeeperPartitionLongerThanTTL partitions the Keeper's client from
// etcd (a TCP proxy drops every connection) until etcd expires the lease:
// the fence is closed by then, and when the partition heals the Keeper
// re-acquires its own worker ID under a new token and asks for a rebuild.
func TestKeeperPartitionLongerThanTTL(t *testing.T) {
	srv := etcdtest.Start(t)
	direct := srv.Client(t, srv.ClientURL.Host)
	px := newProxy(t, srv.ClientURL.Host)
	cli := srv.Client(t, px.ln.Addr().String())
	pfx := prefix()
	reg := leaseetcd.New(cli, leaseetcd.Options{Prefix: pfx})
	events := make(chan lease.Event, 64)
	k, first := newKeeper(t, reg, 3*time.Second, events)

	px.block()
	key := fmt.Sprintf("%sw/%05d", pfx, first.WorkerID)
	waitFor(t, k, "etcd to expire the lease", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := direct.Get(ctx, key)
		return err == nil && len(resp.Kvs) == 0
	})
	if _, m := now(); k.Check(m) == nil {
		t.Fatalf("fence open after etcd expired the lease")
	}
	// Another node takes a worker ID meanwhile; ours stays free for us.
	other := leaseetcd.New(direct, leaseetcd.Options{Prefix: pfx})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ol, err := other.Acquire(ctx, lease.Request{Holder: "other", Range: lease.Range{Min: 0, Max: 3}, TTL: time.Minute})
	if err != nil || ol.WorkerID == first.WorkerID {
		t.Fatalf("other node got %v, %v; want another worker than %d", ol, err, first.WorkerID)
	}
	px.unblock()
	waitFor(t, k, "re-acquisition", 30*time.Second, func() bool {
		l, ok := k.Lease()
		return ok && l.Token > first.Token
	})
	var fe *lease.FenceError
	if _, m := now(); !errors.As(k.Check(m), &fe) || fe.Reason != lease.ReasonChanged {
		t.Errorf("before Rebind: %v, want ReasonChanged", k.Check(m))
	}
	l, err := k.Rebind()
	if err != nil || l.WorkerID != first.WorkerID {
		t.Fatalf("Rebind = %v, %v; want own worker %d back", l, err, first.WorkerID)
	}
	if _, m := now(); k.Check(m) != nil {
		t.Errorf("after Rebind: %v", k.Check(m))
	}
	if err := k.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestCrashHandoff is the crash handoff on etcd: a holder crashes without
// releasing, and a holder whose clock is 12 s behind takes the worker ID
// once etcd expired the lease. The mark it reads was recorded before any
// ID passed it, so it repeats nothing; the negative control (the mark
// written only at renewal) repeats IDs.
func TestCrashHandoff(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t, srv.ClientURL.Host)
	for _, tc := range []struct {
		name          string
		markAtRenewal bool
	}{{"recorded-ahead", false}, {"mark-at-renewal", true}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := leaseetcd.New(cli, leaseetcd.Options{Prefix: prefix()})
			clock := leasetest.NewClock(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
			rep := leasetest.CrashHandoff(t, leasetest.Backend{Registry: reg}, clock, 3*time.Second, tc.markAtRenewal)
			t.Logf("%+v", rep)
			if rep.Safe() == tc.markAtRenewal || (tc.markAtRenewal && rep.Duplicates == 0) {
				t.Fatalf("markAtRenewal %v: safe %v, %d duplicates", tc.markAtRenewal, rep.Safe(), rep.Duplicates)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url       string
		endpoints []string
		prefix    string
	}{
		{"etcd://127.0.0.1:2379", []string{"http://127.0.0.1:2379"}, ""},
		{"etcd://127.0.0.1:2379/", []string{"http://127.0.0.1:2379"}, ""},
		{"ETCD://a:1,b:2/custom/", []string{"http://a:1", "http://b:2"}, "/custom/"},
		{"etcd://[::1]:2379/ids/leases", []string{"http://[::1]:2379"}, "/ids/leases"},
	} {
		eps, prefix, err := leaseetcd.ParseURL(tc.url)
		if err != nil || !slices.Equal(eps, tc.endpoints) || prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %v %q %v; want %v %q", tc.url, eps, prefix, err, tc.endpoints, tc.prefix)
		}
	}
	for _, u := range []string{"etcd://", "etcd:///p", "etcd://h", "etcd://h:0", "etcd://h:99999", "etcd://a:1,,b:2", "etcd://u:p@h:1",
		"etcd://h:1/p?x=1", "etcd://h:1#f", "http://h:1", "etcd://:1"} {
		if _, _, err := leaseetcd.ParseURL(u); !errors.Is(err, lease.ErrInvalidConfig) || !strings.Contains(err.Error(), u) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidConfig naming it", u, err)
		}
	}
}

// TestOpenURL opens an etcd:// URL with a prefix through lease.Open: the
// registry keeps its keys under that prefix.
func TestOpenURL(t *testing.T) {
	srv := etcdtest.Start(t)
	p := prefix()
	st, err := lease.Open(context.Background(), "etcd://"+srv.ClientURL.Host+p, lease.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := st.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Min: 5, Max: 5}, TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client(t, srv.ClientURL.String()).Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) == 0 || !strings.HasPrefix(string(resp.Kvs[0].Key), p) {
		t.Fatalf("keys under %s: %v (%v), want the lease's", p, resp, err)
	}
	if ls, err := st.List(ctx); err != nil || len(ls) != 1 || ls[0].WorkerID != 5 {
		t.Fatalf("List = %+v, %v", ls, err)
	}
}

// FuzzParseURL: ParseURL either fails with ErrInvalidConfig or returns at
// least one http:// endpoint with a host and a port, and a prefix that is
// empty or starts with /.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://127.0.0.1:2379", "etcd://a:1,b:2/p/", "etcd://", "etcd://,", "etcd://[::1]:2379/x", "etcd://h:1/a?b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		eps, prefix, err := leaseetcd.ParseURL(s)
		if err != nil {
			if !errors.Is(err, lease.ErrInvalidConfig) {
				t.Fatalf("ParseURL(%q): %v, not ErrInvalidConfig", s, err)
			}
			return
		}
		if len(eps) == 0 || (prefix != "" && !strings.HasPrefix(prefix, "/")) {
			t.Fatalf("ParseURL(%q) = %q %q", s, eps, prefix)
		}
		for _, e := range eps {
			if h, p, err := net.SplitHostPort(strings.TrimPrefix(e, "http://")); err != nil || h == "" || p == "" || !strings.HasPrefix(e, "http://") {
				t.Fatalf("ParseURL(%q) gave the endpoint %q", s, e)
			}
		}
	})
}
