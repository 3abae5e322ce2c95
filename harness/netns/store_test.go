//go:build linux

package netns

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// TestPostgresInNamespace: a cluster of its own answers on the store
// host's address from another host, not at all through a partition, and
// leaves no directory behind.
func TestPostgresInNamespace(t *testing.T) {
	n := newNet(t)
	if _, err := PostgresBinDir(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	psql := testenv.LookPath(t, "psql")
	ctx := context.Background()
	store, _ := n.AddHost(ctx, "store")
	a, err := n.AddHost(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	s, err := StartPostgres(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	query := func(timeout string) (string, error) {
		cmd := a.Command(psql, "-X", "-At", "-c", "select 40+2", s.URL+"&connect_timeout="+timeout)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := query("5"); err != nil || out != "42" {
		t.Fatalf("query from a: %q %v", out, err)
	}
	if n.Caps.NFT {
		if _, err := a.Block(ctx, []Block{{Peer: store.Addr}}); err != nil {
			t.Fatal(err)
		}
		if out, err := query("1"); err == nil {
			t.Fatalf("query through a partition answered %q", out)
		}
		a.Block(ctx, nil)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("data directory left: %v", err)
	}
	if err := syscallAlive(s.cmd.Process.Pid); err == nil {
		t.Fatal("the postmaster still runs")
	}
}

// TestEtcdInNamespace: an etcd member (the etcdserver helper, built here)
// answers /health from another host.
func TestEtcdInNamespace(t *testing.T) {
	n := newNet(t)
	bin := os.Getenv(EnvEtcd)
	if bin == "" {
		bin = t.TempDir() + "/netns-etcd"
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/snowchaos/snowchaos/internal/testenv/etcdtest/etcdserver").CombinedOutput(); err != nil {
			t.Fatalf("building etcdserver: %v: %s", err, out)
		}
	}
	ctx := context.Background()
	store, _ := n.AddHost(ctx, "store")
	a, err := n.AddHost(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	s, err := StartEtcd(ctx, store, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: a.DialContext}}
	resp, err := c.Get("http://" + s.Addr.String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(s.URL, "etcd://"+store.Addr.String()) {
		t.Fatalf("health %d, URL %s", resp.StatusCode, s.URL)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("data directory left: %v", err)
	}
}
