package etcd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	leaseetcd "github.com/snowchaos/snowchaos/lease/etcd"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// server is an etcd embedded in the test process on loopback ports, with
// its data in a temporary directory; it can be stopped and started again
// on the same ports and data.
type server struct {
	t                  *testing.T
	dir                string
	clientURL, peerURL url.URL
	e                  *embed.Etcd
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(t *testing.T) *server {
	s := &server{
		t:         t,
		dir:       t.TempDir(),
		clientURL: url.URL{Scheme: "http", Host: freePort(t)},
		peerURL:   url.URL{Scheme: "http", Host: freePort(t)},
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "lease-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "fatal" // closing the server on purpose logs errors
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("start embedded etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		s.t.Fatalf("embedded etcd not ready after 30s")
	}
	s.e = e
}

func (s *server) stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

func (s *server) client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func prefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "/test-" + hex.EncodeToString(b) + "/"
}

func TestConformance(t *testing.T) {
	srv := startServer(t)
	cli := srv.client(t, srv.clientURL.Host)
	leasetest.Run(t, leasetest.Harness{
		TTL: 2 * time.Second, // etcd's minimum TTL with default timing
		New: func(t *testing.T) leasetest.Backend {
			return leasetest.Backend{Registry: leaseetcd.New(cli, leaseetcd.Options{Prefix: prefix()})}
		},
	})
}

func TestOpenAndList(t *testing.T) {
	srv := startServer(t)
	reg, err := leaseetcd.Open([]string{srv.clientURL.String()}, leaseetcd.Options{Prefix: prefix()})
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
	srv := startServer(t)
	cli := srv.client(t, srv.clientURL.Host)
	reg := leaseetcd.New(cli, leaseetcd.Options{Prefix: prefix()})
	events := make(chan lease.Event, 64)
	k, first := newKeeper(t, reg, 3*time.Second, events)
	if _, m := now(); k.Check(m) != nil {
		t.Fatalf("fence closed after acquiring: %v", k.Check(m))
	}
	srv.stop()
	lastKnown, _ := k.Lease()
	waitFor(t, k, "the fence to close", 10*time.Second, func() bool { _, m := now(); return k.Check(m) != nil })
	if w, _ := now(); !time.Unix(0, w).Before(lastKnown.LeasedUntil) {
		t.Errorf("fence closed at %v, not before the store's expiry %v", time.Unix(0, w), lastKnown.LeasedUntil)
	}
	srv.start()
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
	srv := startServer(t)
	direct := srv.client(t, srv.clientURL.Host)
	px := newProxy(t, srv.clientURL.Host)
	cli := srv.client(t, px.ln.Addr().String())
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

// TestCrashHandoff is issue 12 item 1 on etcd: a holder crashes without
// releasing, and a holder whose clock is 12 s behind takes the worker ID
// once etcd expired the lease. The mark it reads was recorded before any
// ID passed it, so it repeats nothing; the negative control (the mark
// written only at renewal) repeats IDs.
func TestCrashHandoff(t *testing.T) {
	srv := startServer(t)
	cli := srv.client(t, srv.clientURL.Host)
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
