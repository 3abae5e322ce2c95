//go:build linux

package remote

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/netns"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
)

// netnsPrereqs skips (outside CI) or fails (CI=true) unless this machine
// can run the netns targets: root with ip netns, nftables, the Postgres
// server binaries and the oracle's Postgres. It returns a snowchaos built
// with -tags negativecontrols (for fence: off) and the etcd helper.
func netnsPrereqs(t *testing.T) (snowchaos, etcd string) {
	t.Helper()
	if err := netns.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	testenv.LookPath(t, "nft")
	if _, err := netns.PostgresBinDir(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	pgtest.Connect(t) // the oracle's
	dir := t.TempDir()
	snowchaos, etcd = filepath.Join(dir, "snowchaos"), filepath.Join(dir, "netns-etcd")
	for _, b := range [][]string{
		{"build", "-tags", "negativecontrols", "-o", snowchaos, "github.com/snowchaos/snowchaos/cmd/snowchaos"},
		{"build", "-o", etcd, "github.com/snowchaos/snowchaos/internal/testenv/etcdtest/etcdserver"},
	} {
		if out, err := exec.Command("go", b...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	return snowchaos, etcd
}

// runNamespaces lists the namespaces of the netns targets' runs on the
// machine now: those of runs that have a control, client or node-host
// namespace (the netns package's own tests, which may run at the same
// time, make none of these).
func runNamespaces() []string {
	var all []string
	ours := map[string]bool{} // run IDs
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), netns.Prefix)
		if !ok || len(name) < 8 {
			continue
		}
		all = append(all, e.Name())
		if host := name[7:]; host == "ctl" || strings.HasPrefix(host, "client") || strings.HasPrefix(host, "n-") {
			ours[name[:6]] = true
		}
	}
	var out []string
	for _, n := range all {
		if ours[n[len(netns.Prefix):len(netns.Prefix)+6]] {
			out = append(out, n)
		}
	}
	return out
}

// newNamespaces returns the namespaces in after that are not in before.
func newNamespaces(before, after []string) []string {
	var out []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}

// TestNetnsScenarios runs scenarios/multihost: the lease scenarios (store
// outage, partitions both ways and one way, a pause past the TTL, a
// handoff) with Postgres and with etcd as the store, each node, the store
// and each load client in a namespace of its own and the kernel cutting
// the store off; fence: off alone repeats nothing (as in simulation: the
// mark written through holds the copy back); the negative controls (fence
// and mark write-through off, a handoff without a lease, a duplicate
// planted across two clients) are caught; the Postgres
// oracle agrees with the verifier on every run; and every namespace the
// runs created is gone at the end.
func TestNetnsScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("the multihost scenarios take about two minutes")
	}
	snowchaos, etcd := netnsPrereqs(t)
	t.Setenv(EnvBinary, snowchaos)
	t.Setenv(netns.EnvEtcd, etcd)
	before := runNamespaces()
	files, err := filepath.Glob("../../../scenarios/multihost/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("scenario files: %v %v", files, err)
	}
	var suite []*scenario.Scenario
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			t.Fatal(err)
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
	// Real-time runs on a shared two-core machine: a scenario with a run
	// that did not pass is run once more, all its targets, and that
	// second report stands (the first is logged, never hidden), as
	// .ci/run retries the exec table once.
	var again []*scenario.Scenario
	for i, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			if r.Verdict != harness.Pass {
				t.Logf("first try: %s / %s: %s, error %q, checks %+v", sr.Name, r.Target, r.Verdict, r.Error, r.Checks)
				again = append(again, suite[i])
				break
			}
		}
	}
	if len(again) > 0 {
		rep2, err := harness.Run(context.Background(), again, harness.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range rep2.Scenarios {
			for i := range rep.Scenarios {
				if rep.Scenarios[i].Name == sr.Name {
					rep.Scenarios[i] = sr
				}
			}
		}
	}
	stores := map[string]bool{}
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			t.Logf("%s / %s: %s (%d IDs, %d duplicates)", sr.Name, r.Target, r.Verdict, r.Figures.IDs, r.Figures.Duplicates)
			if r.Verdict != harness.Pass {
				t.Errorf("%s / %s: verdict %s, error %q, checks %+v, faults %+v", sr.Name, r.Target, r.Verdict, r.Error, r.Checks, r.Faults)
			}
			if r.Target == "inprocess" {
				continue
			}
			stores[r.Target] = true
			i := slices.IndexFunc(r.Checks, func(c harness.Check) bool { return strings.HasPrefix(c.Expr, "postgres oracle") })
			if i < 0 || r.Checks[i].Verdict != harness.Pass || r.Checks[i].Info {
				t.Errorf("%s / %s: no passing oracle check in %+v", sr.Name, r.Target, r.Checks)
			} else if sr.Name == "multihost-two-clients-duplicate" && !strings.Contains(r.Checks[i].Observed, "to clients [0 1]") {
				t.Errorf("%s: the oracle does not name both clients: %s", sr.Name, r.Checks[i].Observed)
			}
			for _, f := range r.Faults {
				if f.Kind != string(faults.KindStoreOutage) {
					continue
				}
				if !slices.ContainsFunc(f.Detail, func(d string) bool { return strings.Contains(d, "via nftables") }) ||
					!slices.ContainsFunc(f.Detail, func(d string) bool { return strings.Contains(d, "delay via") }) {
					t.Errorf("%s / %s: fault %s does not say which path it took: %q", sr.Name, r.Target, f.Name, f.Detail)
				}
			}
		}
	}
	for _, want := range []string{"postgres", "etcd", "postgres-unfenced", "postgres-unfenced-mark-at-renewal", "postgres-no-lease"} {
		if !stores[want] {
			t.Errorf("no run of target %s", want)
		}
	}
	if left := newNamespaces(before, runNamespaces()); len(left) > 0 {
		t.Errorf("namespaces left after the runs: %v", left)
	}
}

// TestNetnsInterrupted: a run interrupted by SIGINT (snowchaos run, the
// way a user stops it) still removes every namespace and its record.
func TestNetnsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a multihost run")
	}
	snowchaos, _ := netnsPrereqs(t)
	before := runNamespaces()
	cmd := exec.Command(snowchaos, "run", "../../../scenarios/multihost/two-clients.yaml")
	cmd.Env = append(os.Environ(), EnvBinary+"="+snowchaos)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	// Interrupt once the run's nodes serve (a node host's namespace exists).
	started := testenv.Eventually(context.Background(), 60*time.Second, func() bool {
		return slices.ContainsFunc(newNamespaces(before, runNamespaces()), func(n string) bool { return strings.HasSuffix(n, "-n-b") })
	})
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("snowchaos run did not end within 60s of SIGINT:\n%s", out.String())
	}
	if !started {
		t.Fatalf("the run never started its nodes:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("exit code %d after SIGINT, want 2 (interrupted):\n%s", code, out.String())
	}
	if left := newNamespaces(before, runNamespaces()); len(left) > 0 {
		t.Errorf("namespaces left after SIGINT: %v", left)
	}
}
