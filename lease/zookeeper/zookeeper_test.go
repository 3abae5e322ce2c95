package zookeeper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
	leasezk "github.com/snowchaos/snowchaos/lease/zookeeper"
)

// root returns a fresh root path, one per registry under test.
func root() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "/snowchaos-test/" + hex.EncodeToString(b)
}

// open opens a registry on servers under rt, purged and closed when the
// test ends.
func open(t *testing.T, servers []string, rt string) *leasezk.Registry {
	t.Helper()
	return openVia(t, servers, servers, rt)
}

// openVia is open for a registry whose servers may be cut off at the end
// (a proxy): it is purged through direct.
func openVia(t *testing.T, servers, direct []string, rt string) *leasezk.Registry {
	t.Helper()
	r, err := leasezk.Open(servers, leasezk.Options{Root: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close()
		if err := purge(ctx, direct, rt); err != nil {
			t.Errorf("purge %s: %v", rt, err)
		}
	})
	return r
}

// purge deletes rt through a registry of its own.
func purge(ctx context.Context, servers []string, rt string) error {
	r, err := leasezk.Open(servers, leasezk.Options{Root: rt})
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Purge(ctx)
}

// direct is a plain client of the server, closed when the test ends.
func direct(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 30*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{})
	leasetest.Run(t, leasetest.Harness{
		TTL: time.Second,
		New: func(t *testing.T) leasetest.Backend {
			return leasetest.Backend{Registry: open(t, []string{zs.Addr}, root())}
		},
	})
}

// TestZnodes checks the layout the package documents: an ephemeral w
// znode owned by the lease's session whose czxid is the token, and a
// persistent mark naming holder, token and last_issued_ms, which outlives
// the release.
func TestZnodes(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{})
	rt := root()
	reg := open(t, []string{zs.Addr}, rt)
	c := direct(t, zs.Addr)
	ctx := ctxT(t, 30*time.Second)
	l, err := reg.Acquire(ctx, lease.Request{Holder: "node-a", Range: lease.Range{Min: 42, Max: 42}, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = reg.Renew(ctx, l, 1234); err != nil {
		t.Fatal(err)
	}
	data, st, err := c.Get(rt + "/w/00042")
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner == 0 || st.Czxid != l.Token || string(data) != `{"holder":"node-a","ttl_ms":5000}` {
		t.Errorf("w znode %s owner %#x czxid %d, want ephemeral with czxid = token %d", data, st.EphemeralOwner, st.Czxid, l.Token)
	}
	if want := time.UnixMilli(st.Mtime).Add(5 * time.Second); !l.LeasedUntil.Equal(want) {
		t.Errorf("LeasedUntil %v, want w's mtime plus the TTL %v", l.LeasedUntil, want)
	}
	if err := reg.Release(ctx, l, 1500); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Exists(rt + "/w/00042"); err != nil || ok {
		t.Errorf("w znode after Release: exists %v, %v", ok, err)
	}
	data, st, err = c.Get(rt + "/m/00042")
	want := `{"holder":"node-a","token":` + strconv.FormatInt(l.Token, 10) + `,"last_issued_ms":1500}`
	if err != nil || st.EphemeralOwner != 0 || string(data) != want {
		t.Errorf("mark %s (%v), want persistent %s", data, err, want)
	}
}

// TestRecord: Record raises last_issued_ms (never lowers it) without
// extending the lease, which expires on schedule; it fails with ErrLost
// once the lease is released, expired or forged.
func TestRecord(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{})
	reg := open(t, []string{zs.Addr}, root())
	ctx := ctxT(t, 60*time.Second)
	rg := lease.Range{Min: 0, Max: 0}
	const ttl = 2 * time.Second
	l, err := reg.Acquire(ctx, lease.Request{Holder: "a", Range: rg, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(ctx, l, 500); err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(ctx, l, 400); err != nil {
		t.Fatal(err)
	}
	forged := l
	forged.Token++
	if err := reg.Record(ctx, forged, 9000); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Record of a forged lease: %v, want ErrLost", err)
	}
	ls, err := reg.List(ctx)
	if err != nil || len(ls) != 1 || ls[0].LastIssuedMs != 500 {
		t.Fatalf("List after Record 500, 400: %+v, %v; want last issued 500", ls, err)
	}
	if !ls[0].LeasedUntil.Equal(l.LeasedUntil) {
		t.Errorf("Record moved the expiry: %v -> %v", l.LeasedUntil, ls[0].LeasedUntil)
	}
	// Records keep coming, no renewal: the lease ends after its TTL.
	start := time.Now()
	testenv.WaitFor(t, 10*ttl, func() bool { return errors.Is(reg.Record(ctx, l, 600), lease.ErrLost) }, "the unrenewed lease to end")
	if el := time.Since(start); el > ttl+time.Second {
		t.Errorf("lease ended %v after the last renewal, want about its TTL %v", el, ttl)
	}
	b, err := reg.Acquire(ctx, lease.Request{Holder: "b", Range: rg, TTL: ttl})
	if err != nil {
		t.Fatalf("the worker ID is not free after the lease ended: %v", err)
	}
	if b.LastIssuedMs < 500 {
		t.Errorf("next holder got last issued %d, want the recorded >= 500", b.LastIssuedMs)
	}
	if err := reg.Release(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(ctx, b, 700); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Record after Release: %v, want ErrLost", err)
	}
}

// TestSessionTimeoutBounds: a TTL above the server's maxSessionTimeout is
// refused (a shorter session would end before the holder's fence closes);
// one below minSessionTimeout is rounded up, and the lease says so.
func TestSessionTimeoutBounds(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{TickTime: 500 * time.Millisecond, MinSessionTimeout: 3 * time.Second, MaxSessionTimeout: 5 * time.Second})
	reg := open(t, []string{zs.Addr}, root())
	ctx := ctxT(t, 30*time.Second)
	_, err := reg.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Max: 3}, TTL: 10 * time.Second})
	if !errors.Is(err, lease.ErrInvalidRequest) {
		t.Fatalf("ttl above maxSessionTimeout: %v, want ErrInvalidRequest", err)
	}
	l, err := reg.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Max: 3}, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL != 3*time.Second {
		t.Errorf("ttl 1s below minSessionTimeout 3s: lease TTL %v, want 3s", l.TTL)
	}
	if ls, err := reg.List(ctx); err != nil || len(ls) != 1 || ls[0].TTL != 3*time.Second {
		t.Errorf("List: %+v, %v", ls, err)
	}
}

// TestUnreachable: with no server every call fails with ErrUnavailable
// within its deadline.
func TestUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	reg, err := leasezk.Open([]string{addr}, leasezk.Options{Root: root()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for name, f := range map[string]func(ctx context.Context) error{
		"Acquire": func(ctx context.Context) error {
			_, err := reg.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Max: 1}, TTL: time.Second})
			return err
		},
		"List": func(ctx context.Context) error { _, err := reg.List(ctx); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		start := time.Now()
		err := f(ctx)
		cancel()
		if !errors.Is(err, lease.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s took %v past its 500ms deadline", name, el)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := leasezk.Open(nil, leasezk.Options{}); !errors.Is(err, lease.ErrInvalidConfig) {
		t.Errorf("no servers: %v", err)
	}
	for _, rt := range []string{"relative", "/trailing/", "/a//b", "/a/../b", "/zookeeper/x", "/"} {
		if _, err := leasezk.Open([]string{"127.0.0.1:2181"}, leasezk.Options{Root: rt}); !errors.Is(err, lease.ErrInvalidConfig) {
			t.Errorf("root %q: %v, want ErrInvalidConfig", rt, err)
		}
	}
}

// TestOpenURL opens a zk:// URL through lease.Open: the registry keeps
// its znodes under the URL's root; a malformed URL is refused before any
// connection.
func TestOpenURL(t *testing.T) {
	for _, u := range []string{"zk://", "zk://h", "zk://h:0/r", "zk://u@h:1/r", "zk://h:1/zookeeper/x", "zk://h:1/a//b"} {
		if _, err := lease.Open(context.Background(), u, lease.OpenOptions{}); !errors.Is(err, lease.ErrInvalidConfig) {
			t.Errorf("lease.Open(%q) = %v, want ErrInvalidConfig", u, err)
		}
	}
	zs := zktest.Start(t, zktest.Options{})
	rt := root()
	st, err := lease.Open(context.Background(), "ZK://"+zs.Addr+rt, lease.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		if err := purge(context.Background(), []string{zs.Addr}, rt); err != nil {
			t.Errorf("purge %s: %v", rt, err)
		}
	})
	if _, ok := st.Registry.(*leasezk.Registry); !ok {
		t.Fatalf("zk:// opened a %T", st.Registry)
	}
	if _, err := st.Acquire(ctxT(t, 30*time.Second), lease.Request{Holder: "a", Range: lease.Range{Min: 7, Max: 7}, TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := direct(t, zs.Addr).Exists(rt + "/w/00007"); err != nil || !ok {
		t.Fatalf("no lease znode under the URL's root %s: exists %v, %v", rt, ok, err)
	}
}
