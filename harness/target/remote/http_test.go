package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/server"
)

// bin is the snowchaos binary built once for the package's tests.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "httptarget-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "snowchaos")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/snowchaos/snowchaos/cmd/snowchaos").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building snowchaos: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// spec is a node spec for tests.
func spec(name string, worker int64) target.NodeSpec {
	return target.NodeSpec{Name: name, Host: name, Worker: worker, Layout: generator.DefaultLayout(), Policy: generator.PolicyWait,
		MaxWait: time.Second, Checkpoint: true, Reserve: 100 * time.Millisecond}
}

func TestProcessNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	s := spec("a", 7)
	s.ClockOffset = -3 * time.Second
	n, err := p.Start(ctx, s, target.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if w := n.Worker(); w != 7 {
		t.Fatalf("worker %d", w)
	}
	off, err := n.Clock().Offset(ctx)
	if err != nil || off != -3*time.Second {
		t.Fatalf("start offset %v, %v", off, err)
	}
	dst := make([]generator.ID, 50)
	if got, err := n.Issue(ctx, dst); got != 50 || err != nil {
		t.Fatalf("issue: %d %v", got, err)
	}
	if p := generator.DefaultLayout().Decode(dst[0]); p.Node != 7 {
		t.Fatalf("node %d", p.Node)
	}
	last := dst[49]
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindStep, By: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if off, _ := n.Clock().Offset(ctx); off != 2*time.Second {
		t.Fatalf("after step: %v", off)
	}
	pn := n.(*procNode)
	pid := pn.cmd.Process.Pid
	if err := n.Stop(ctx, target.StopOptions{}); err != nil { // kill -9
		t.Fatal(err)
	}
	if _, err := n.Issue(ctx, dst); !errors.Is(err, target.ErrStopped) {
		t.Fatalf("issue while down: %v", err)
	}
	if w := n.Worker(); w != -1 {
		t.Fatalf("worker while down %d", w)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindStep, By: -time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindSmear, By: time.Second, Window: time.Second}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("smear while down: %v", err)
	}
	if off, _ := n.Clock().Offset(ctx); off != time.Second {
		t.Fatalf("offset while down %v, want 1s", off)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if pn.cmd.Process.Pid == pid {
		t.Fatal("restart reused the process")
	}
	if off, _ := n.Clock().Offset(ctx); off != time.Second {
		t.Fatalf("offset after restart %v, want 1s", off)
	}
	// The checkpoint survived the kill: the new process issues above the old IDs.
	if got, err := n.Issue(ctx, dst[:1]); got != 1 || err != nil || dst[0] <= last {
		t.Fatalf("after restart: %d %v, id %d not above %d", got, err, dst[0], last)
	}
	if err := n.Stop(ctx, target.StopOptions{Graceful: true, Wipe: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pn.dir, "mark")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wiped checkpoint still there: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pn.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("host dir left: %v", err)
	}
}

func TestProcessStartFailure(t *testing.T) {
	p := &Process{Binary: bin, Dir: t.TempDir(), Args: []string{"--bogus-flag"}}
	_, err := p.Start(context.Background(), spec("a", 1), target.Env{})
	if err == nil || !strings.Contains(err.Error(), "bogus-flag") {
		t.Fatalf("start with a bad flag: %v", err)
	}
	s := spec("a", 1)
	s.Lease = scenario.LeaseMemory
	if _, err := (&Process{Binary: bin}).Start(context.Background(), s, target.Env{}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("memory lease: %v", err)
	}
	t.Setenv(EnvBinary, "")
	if _, err := (&Process{}).binary(); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("no binary from a test executable: %v", err)
	}
}

func TestHTTPTarget(t *testing.T) {
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	pn, err := p.Start(ctx, spec("a", 4), target.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	url, token := pn.(*procNode).URL(), pn.(*procNode).token

	if _, err := (&HTTP{Nodes: map[string]string{"a": url}, Token: token}).Start(ctx, spec("a", 5), target.Env{}); err == nil || !strings.Contains(err.Error(), "worker 4") {
		t.Fatalf("wrong worker: %v", err)
	}
	ws := spec("a", 4)
	ws.Policy = generator.PolicyRefuse
	if _, err := (&HTTP{Nodes: map[string]string{"a": url}, Token: token}).Start(ctx, ws, target.Env{}); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("wrong policy: %v", err)
	}
	if _, err := (&HTTP{Nodes: map[string]string{}}).Start(ctx, spec("a", 4), target.Env{}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("no URL: %v", err)
	}
	if _, err := (&HTTP{Nodes: map[string]string{"a": "http://10.1.1.1:80"}}).Start(ctx, spec("a", 4), target.Env{}); err == nil {
		t.Fatal("remote URL accepted")
	}

	t.Setenv(EnvNodes, "a="+url)
	t.Setenv(EnvToken, token)
	s := spec("a", 4)
	s.ClockOffset = 250 * time.Millisecond
	n, err := (&HTTP{}).Start(ctx, s, target.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if off, err := n.Clock().Offset(ctx); err != nil || off != 250*time.Millisecond {
		t.Fatalf("offset %v %v", off, err)
	}
	for _, f := range []faults.Fault{
		{Kind: faults.KindSmear, By: time.Second, Window: time.Hour},
		{Kind: faults.KindSlew, By: time.Second},
		{Kind: faults.KindDrift, PPM: 10},
		{Kind: faults.KindFreeze, For: time.Hour},
		{Kind: faults.KindLeap, At: time.Now().Add(time.Hour)},
		{Kind: faults.KindPause, For: time.Millisecond},
		{Kind: faults.KindRevert},
	} {
		if err := n.Clock().Apply(ctx, f); err != nil {
			t.Fatalf("%s: %v", f.Kind, err)
		}
	}
	if off, _ := n.Clock().Offset(ctx); off != 0 {
		t.Fatalf("offset after revert %v", off)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindRestart}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("restart as a clock fault: %v", err)
	}
	if err := n.Stop(ctx, target.StopOptions{}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("stop: %v", err)
	}
	dst := make([]generator.ID, 3)
	if got, err := n.Issue(ctx, dst); got != 3 || err != nil {
		t.Fatal(got, err)
	}
	// A refusal over HTTP unwraps to the generator's sentinel.
	n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindStep, By: -10 * time.Second})
	ctxShort, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := n.Issue(ctxShort, dst); !errors.Is(err, generator.ErrWaitExceeded) {
		t.Fatalf("issue 10s behind under wait(1s): %v, want ErrWaitExceeded", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := (&server.Client{BaseURL: url, Token: token}).Faults(ctx)
	if err != nil || st.OffsetNs != 0 {
		t.Fatalf("Close did not revert: %+v %v", st, err)
	}
	if _, err := ParseNodes("a=http://x,b"); err == nil {
		t.Fatal("bad node list accepted")
	}
}

// TestHTTPScenarios runs the built-in real-mode HTTP scenarios against
// snowchaos serve child processes: every positive target passes and every
// negative control (no checkpoint across a restart, a clone without a
// lease) is caught.
func TestHTTPScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("real-mode scenarios take about half a minute")
	}
	t.Setenv(EnvBinary, bin)
	files, err := filepath.Glob("../../../scenarios/http/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("scenario files: %v %v", files, err)
	}
	var suite []*scenario.Scenario
	pg := -1 // unknown until a scenario leases from Postgres
	var zs *zktest.Server
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(s.Nodes, func(n scenario.Node) bool { return scenario.LeaseKind(n.Lease) == scenario.LeasePostgres }) {
			if pg < 0 {
				pg = 0
				if postgresReachable(t) {
					pg = 1
				}
			}
			if pg == 0 {
				t.Logf("%s: skipped, no Postgres (CI unset)", f)
				continue
			}
		}
		if usesZooKeeper(s) {
			if zs == nil {
				if zs = zooKeeper(t); zs == nil {
					t.Logf("%s: skipped, no ZooKeeper (CI unset)", f)
					continue
				}
			}
			toServer(s, zs.Addr)
		}
		suite = append(suite, s)
	}
	if err := harness.Prepare(suite, harness.Options{}); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(context.Background(), suite, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			t.Logf("%s / %s: %s (%d IDs, %d duplicates)", sr.Name, r.Target, r.Verdict, r.Figures.IDs, r.Figures.Duplicates)
			if r.Verdict != harness.Pass {
				t.Errorf("%s / %s: verdict %s, error %q, checks %+v, faults %+v", sr.Name, r.Target, r.Verdict, r.Error, r.Checks, r.Faults)
			}
		}
	}
}

// TestHTTPRemoteOptIn: a node on a non-loopback address (this machine's
// own, so nothing leaves it) is refused, naming the variable that allows
// it, until SNOWCHAOS_HTTP_ALLOW_REMOTE is set; then the target reaches it.
func TestHTTPRemoteOptIn(t *testing.T) {
	ip := localNonLoopback(t)
	cmd := exec.Command(bin, "serve", "--listen", ip+":0", "--worker", "9")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("serve printed no address")
	}
	url := "http://" + addr
	s := spec("a", 9)
	s.Checkpoint = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = (&HTTP{Nodes: map[string]string{"a": url}}).Start(ctx, s, target.Env{})
	if err == nil || !strings.Contains(err.Error(), EnvAllowRemote) {
		t.Fatalf("non-loopback node without the opt-in: err = %v, want one naming %s", err, EnvAllowRemote)
	}
	t.Setenv(EnvAllowRemote, "1")
	n, err := (&HTTP{Nodes: map[string]string{"a": url}}).Start(ctx, s, target.Env{})
	if err != nil {
		t.Fatalf("with %s=1: %v", EnvAllowRemote, err)
	}
	defer n.Close()
	ids := make([]generator.ID, 3)
	if k, err := n.Issue(ctx, ids); err != nil || k != 3 {
		t.Fatalf("Issue over the network: %d IDs, %v", k, err)
	}
}

// localNonLoopback returns one of this machine's own non-loopback IPv4
// addresses, skipping the test when it has none.
func localNonLoopback(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to listen on")
	return ""
}
