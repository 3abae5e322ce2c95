package remote

import (
	"context"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
)

// startWithClone starts node a from s (which prefers worker 5 and names a
// lease store) and its clone "a-clone" (another host, so another holder)
// on p, checks that a got 5 and the clone another worker ID, and that the
// clone issues. Both are closed at the end of the test (before cleanups
// registered earlier, such as EndRun).
func startWithClone(t *testing.T, p *Process, s target.NodeSpec, env target.Env) (a, clone target.Node) {
	t.Helper()
	ctx := context.Background()
	a, err := p.Start(ctx, s, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if w := a.Worker(); w != 5 {
		t.Fatalf("a: worker %d, want its preferred 5", w)
	}
	cs := s
	cs.Name, cs.Host = "a-clone", "a-clone"
	if clone, err = p.Start(ctx, cs, env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clone.Close() })
	if w := clone.Worker(); w == 5 || w < 0 {
		t.Fatalf("clone: worker %d, want another than a's 5", w)
	}
	dst := make([]generator.ID, 20)
	if n, err := clone.Issue(ctx, dst); n != len(dst) || err != nil {
		t.Fatalf("clone issue: %d %v", n, err)
	}
	if got := generator.DefaultLayout().Decode(dst[0]).Node; got != clone.Worker() {
		t.Fatalf("clone issued on node %d, reports worker %d", got, clone.Worker())
	}
	return a, clone
}

// checkRestarts restarts a (from startWithClone) twice. A graceful
// restart releases the lease: the node comes back with the same holder and
// takes its own worker ID 5 again. After a crash (kill -9) its old lease is
// still live until its TTL: the store gives it a free worker ID meanwhile,
// never the clone's (nor 5 when oldHeld says the killed lease surely still
// holds it).
func checkRestarts(t *testing.T, a, clone target.Node, oldHeld bool) {
	t.Helper()
	ctx := context.Background()
	if err := a.Stop(ctx, target.StopOptions{Graceful: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if w := a.Worker(); w != 5 {
		t.Fatalf("a after a graceful restart: worker %d, want its own 5 back", w)
	}
	if err := a.Stop(ctx, target.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if w := a.Worker(); w < 0 || w == clone.Worker() || (oldHeld && w == 5) {
		t.Fatalf("a after a crash restart: worker %d (its killed lease holds 5 until its TTL; the clone has %d)", w, clone.Worker())
	}
}

// closeAndEnd closes clone and a, then ends the run, failing t on any
// error.
func closeAndEnd(t *testing.T, p *Process, env target.Env, a, clone target.Node) {
	t.Helper()
	for _, n := range []target.Node{clone, a} {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EndRun(context.Background(), env.Run); err != nil {
		t.Fatal(err)
	}
}
