package remote

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

// TestProcessZooKeeperLease: process nodes lease their worker IDs from a
// real ZooKeeper, under the run's own root. A clone (another host, so
// another holder) gets another worker ID; a graceful restart gets the
// node's own worker ID back; after kill -9 its session lives until the
// TTL, so it gets a free one meanwhile; EndRun deletes the run's root.
func TestProcessZooKeeperLease(t *testing.T) {
	zs := zktest.Start(t, zktest.Options{})
	u := zkurl.String([]string{zs.Addr}, "/snowchaos-process-test")
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	if !p.Info().Caps.SupportsLease(u) {
		t.Fatalf("process target does not support %s", u)
	}
	env := target.Env{Run: "zk-lease-test/" + time.Now().String()}
	t.Cleanup(func() { p.EndRun(ctx, env.Run) })
	s := spec("a", 5)
	s.Lease, s.LeaseTTL = u, 3*time.Second
	a, clone := startWithClone(t, p, s, env)

	conn, _, err := zk.Connect([]string{zs.Addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p.runsMu.Lock()
	r := p.runs[env.Run]
	p.runsMu.Unlock()
	_, root, err := zkurl.Parse(runRoot(u, r.tag))
	if err != nil {
		t.Fatal(err)
	}
	marks, _, err := conn.Children(root + "/m")
	if err != nil || len(marks) != 2 {
		t.Fatalf("marks under %s: %v (%v), want a's and the clone's", root, marks, err)
	}
	for _, m := range marks {
		data, _, err := conn.Get(root + "/m/" + m)
		var v struct{ Holder string }
		if err != nil || json.Unmarshal(data, &v) != nil || !(strings.HasPrefix(v.Holder, "a."+r.tag) || strings.HasPrefix(v.Holder, "a-clone."+r.tag)) {
			t.Fatalf("mark %s: %s (%v), want the host name and the run tag", m, data, err)
		}
	}

	checkRestarts(t, a, clone, true)
	closeAndEnd(t, p, env, a, clone)
	if ok, _, err := conn.Exists(root); err != nil || ok {
		t.Fatalf("root %s still there after EndRun (%v)", root, err)
	}
	if _, err := p.Start(ctx, func() target.NodeSpec { b := spec("b", 1); b.Lease = "zk://h/x"; return b }(), env); err == nil || !strings.Contains(err.Error(), `"h"`) {
		t.Fatalf("bad zk URL: %v", err)
	}
	if k := scenario.LeaseKind(u); k != scenario.LeaseZooKeeper {
		t.Fatalf("LeaseKind(%s) = %q", u, k)
	}
}

// zooKeeper starts a server for the scenarios; nil when Java or ZooKeeper
// is missing outside CI (in CI that fails t).
func zooKeeper(t *testing.T) *zktest.Server {
	if _, _, err := zktest.Find(); err != nil {
		if testenv.InCI() {
			t.Fatal(err)
		}
		return nil
	}
	return zktest.Start(t, zktest.Options{})
}

// usesZooKeeper reports whether a node or target of s leases from ZooKeeper.
func usesZooKeeper(s *scenario.Scenario) bool {
	zk := func(v string) bool { return scenario.LeaseKind(v) == scenario.LeaseZooKeeper }
	return slices.ContainsFunc(s.Nodes, func(n scenario.Node) bool { return zk(n.Lease) }) ||
		slices.ContainsFunc(s.Targets, func(t scenario.Target) bool { return zk(t.Lease) })
}

// toServer points s's zk:// leases at the test's own server, keeping their
// roots.
func toServer(s *scenario.Scenario, addr string) {
	move := func(v *string) {
		if scenario.LeaseKind(*v) == scenario.LeaseZooKeeper {
			if _, root, err := zkurl.Parse(*v); err == nil {
				*v = zkurl.String([]string{addr}, root)
			}
		}
	}
	for i := range s.Nodes {
		move(&s.Nodes[i].Lease)
	}
	for i := range s.Targets {
		move(&s.Targets[i].Lease)
	}
}
