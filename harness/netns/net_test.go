//go:build linux

package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// newNet creates a network for the test in a state directory of its own,
// or skips (outside CI) when namespaces are unavailable. Cleanup closes it
// and asserts that nothing of it is left.
func newNet(t *testing.T) *Net {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Create(ctx, Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left := n.Leftovers(); len(left) > 0 {
			t.Errorf("left after close: %v", left)
		}
		if _, err := os.Stat(recordPath(n.dir, n.ID)); !os.IsNotExist(err) {
			t.Errorf("record left after close: %v", err)
		}
	})
	return n
}

// echo serves one line back from inside h, on its address.
func echo(t *testing.T, h *Host) string {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(h.Addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return testenv.ServeEcho(t, ln)
}

// reach reports whether from can open a connection to addr and get an
// echo within d.
func reach(from *Host, addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	return err
}

func TestNetHostsAndPartitions(t *testing.T) {
	n := newNet(t)
	t.Logf("run %s on %s: %s", n.ID, n.Subnet, n.Caps)
	ctx := context.Background()
	a, err := n.AddHost(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	store, err := n.AddHost(ctx, "store")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := n.AddHost(ctx, "a"); again != a {
		t.Fatal("adding a host twice made a second one")
	}
	if _, err := n.AddHost(ctx, "Bad Name"); err == nil {
		t.Fatal("accepted a bad host name")
	}
	srv := echo(t, store)
	if err := reach(a, srv, 2*time.Second); err != nil {
		t.Fatalf("a cannot reach the store: %v", err)
	}
	// The harness's own stack cannot reach the run's addresses (the
	// guard route): nothing leaks to the machine's network.
	if c, err := net.DialTimeout("tcp", srv, time.Second); err == nil {
		c.Close()
		t.Fatal("the host's namespace reached a run address")
	} else if !strings.Contains(err.Error(), "no route to host") {
		t.Fatalf("dial from the host's namespace: %v, want no route to host", err)
	}
	// No default route in a host: an outside address is unreachable.
	if err := reach(a, "192.0.2.1:80", time.Second); err == nil || !strings.Contains(err.Error(), "network is unreachable") {
		t.Fatalf("a reached outside its subnet, or failed otherwise: %v", err)
	}
	if !n.Caps.NFT {
		testenv.Missing(t, "nftables: %s", n.Caps.NFTWhy)
	}
	how, err := a.Block(ctx, []Block{{Peer: store.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("partition ", how)
	if err := reach(a, srv, 300*time.Millisecond); err == nil {
		t.Fatal("a reaches the store through a partition")
	}
	// Outbound only from the store's side: the store's answers are lost,
	// a's packets arrive.
	if _, err := a.Block(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, srv, 2*time.Second); err != nil {
		t.Fatalf("a cannot reach the store after the heal: %v", err)
	}
	srvA := echo(t, a)
	if _, err := store.Block(ctx, []Block{{Peer: a.Addr, Dir: Outbound}}); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, srv, 300*time.Millisecond); err == nil {
		t.Fatal("a gets answers from a store that drops its packets to a")
	}
	if err := reach(store, srvA, 300*time.Millisecond); err == nil {
		t.Fatal("the store connects to a while it drops its packets to a")
	}
	if _, err := store.Block(ctx, []Block{{Peer: a.Addr, Dir: Inbound}}); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, srv, 300*time.Millisecond); err == nil {
		t.Fatal("a reaches a store that drops a's packets")
	}
	// The whole link: the store is cut off from everyone.
	if _, err := store.Block(ctx, []Block{{}}); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, srv, 300*time.Millisecond); err == nil {
		t.Fatal("a reaches an isolated store")
	}
	if _, err := store.Block(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, srv, 2*time.Second); err != nil {
		t.Fatalf("a cannot reach the store after the heal: %v", err)
	}
}

// TestNetLinkDownFallback: without nftables a block takes the link down,
// and a one-way block is refused.
func TestNetLinkDownFallback(t *testing.T) {
	n := newNet(t)
	n.Caps.NFT, n.Caps.NFTWhy = false, "disabled by the test"
	ctx := context.Background()
	a, _ := n.AddHost(ctx, "a")
	b, err := n.AddHost(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	srv := echo(t, b)
	if _, err := a.Block(ctx, []Block{{Peer: b.Addr, Dir: Inbound}}); !errors.Is(err, ErrAsymmetric) {
		t.Fatalf("one-way block without nft: %v", err)
	}
	how, err := a.Block(ctx, []Block{{Peer: b.Addr}})
	if err != nil || !strings.Contains(how, "link down") {
		t.Fatalf("%q %v", how, err)
	}
	if err := reach(a, srv, 300*time.Millisecond); err == nil {
		t.Fatal("a reaches b with its link down")
	}
	if _, err := a.Block(ctx, nil); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, func() bool { return reach(a, srv, 300*time.Millisecond) == nil }, "a reaches b after its link came up")
}

// TestNetSweepsCrashedRun: a run whose owner died (its record names a
// PID that no longer runs) is removed by the next Create, and only what
// its record names.
func TestNetSweepsCrashedRun(t *testing.T) {
	if err := Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	crashed, err := Create(ctx, Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crashed.AddHost(ctx, "a"); err != nil {
		crashed.Close()
		t.Fatal(err)
	}
	// Make it a dead owner's: rewrite the record with a start time no
	// process has.
	crashed.mu.Lock()
	rec := crashed.mu.rec
	crashed.mu.Unlock()
	rec.PIDStart++
	if err := rec.write(dir); err != nil {
		t.Fatal(err)
	}
	if len(crashed.Leftovers()) != 3 {
		t.Fatalf("before the sweep: %v", crashed.Leftovers())
	}
	next := newNetIn(t, dir)
	if left := crashed.Leftovers(); len(left) > 0 {
		t.Fatalf("the next run left the crashed run's %v", left)
	}
	if next.Subnet == crashed.Subnet && len(next.Leftovers()) == 0 {
		t.Fatal("the new run has nothing")
	}
}

func newNetIn(t *testing.T, dir string) *Net {
	t.Helper()
	n, err := Create(context.Background(), Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return n
}
