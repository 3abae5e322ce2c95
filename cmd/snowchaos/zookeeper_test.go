package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/lease"
	leasezk "github.com/snowchaos/snowchaos/lease/zookeeper"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

// zkURL starts a ZooKeeper server and returns a zk:// URL with a root of
// the test's own, deleted when the test ends.
func zkURL(t *testing.T) string {
	t.Helper()
	zs := zktest.Start(t, zktest.Options{})
	u := zkurl.String([]string{zs.Addr}, "/snowchaos-cli/"+strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(func() {
		r, err := leasezk.OpenURL(u, leasezk.Options{})
		if err != nil {
			t.Error(err)
			return
		}
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Purge(ctx); err != nil {
			t.Errorf("purge: %v", err)
		}
	})
	return u
}

// TestServeZooKeeperLease: serve leases its worker ID from ZooKeeper; a
// second node with another identity preferring the same worker ID gets
// another one; both release their w znodes on shutdown.
func TestServeZooKeeperLease(t *testing.T) {
	u := zkURL(t)
	args := []string{"--listen", "127.0.0.1:0", "--lease", u, "--worker", "3", "--lease-ttl", "3s", "--holder", "node-x"}
	serveTwoHolders(t, args)
	servers, root, err := zkurl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if live, _, err := conn.Children(root + "/w"); err != nil || len(live) != 0 {
		t.Fatalf("w znodes after shutdown: %v (%v), want none", live, err)
	}
}

// TestLeasesListZooKeeper lists a held and a released worker ID.
func TestLeasesListZooKeeper(t *testing.T) {
	u := zkURL(t)
	reg, err := leasezk.OpenURL(u, leasezk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := reg.Acquire(ctx, lease.Request{Holder: "node-cli", Range: lease.Range{Min: 5, Max: 9}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Renew(ctx, l, 1748736000000); err != nil {
		t.Fatal(err)
	}
	l2, err := reg.Acquire(ctx, lease.Request{Holder: "node-gone", Range: lease.Range{Min: 5, Max: 9}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Release(ctx, l2, 42); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runLeases(ctx, []string{"list", "--dsn", u, "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []leaseRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	if len(rows) != 2 || rows[0].WorkerID != 5 || rows[0].Holder != "node-cli" || rows[0].State != "held" || rows[0].Token != l.Token ||
		rows[0].LastIssued != "2025-06-01T00:00:00.000Z" || rows[1].Holder != "node-gone" || rows[1].State != "free" || rows[1].LastIssuedMs != 42 {
		t.Errorf("rows %+v", rows)
	}
	out.Reset()
	if code := runLeases(ctx, []string{"list", "--dsn", u}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "node-cli") {
		t.Errorf("table exit %d:\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := runLeases(ctx, []string{"list", "--dsn", "zk://h:1/a//b"}, &out, &errb); code != exitInvalid || !strings.Contains(errb.String(), "segment") {
		t.Errorf("bad root: exit %d, stderr %q", code, errb.String())
	}
}

func TestServeBadZooKeeperLease(t *testing.T) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if code := dispatch(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--lease", "zk://h/x"}, &out, &errb); code != exitInvalid || !strings.Contains(errb.String(), `"h"`) {
		t.Fatalf("exit %d, stderr %q; want 2 naming the server", code, errb.String())
	}
}
