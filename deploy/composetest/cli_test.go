package composetest

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
	"github.com/snowchaos/snowchaos/server"
)

// serveEnvNames returns the environment variables `snowchaos serve`
// reads: SNOWCHAOS_ plus each flag name in upper case.
func serveEnvNames(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	flags := regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1)
	if len(flags) == 0 {
		t.Fatalf("snowchaos serve -h lists no flags:\n%s", out)
	}
	names := map[string]bool{}
	for _, f := range flags {
		names["SNOWCHAOS_"+strings.ToUpper(strings.ReplaceAll(f[1], "-", "_"))] = true
	}
	return names
}

// TestNodeEnvironmentIsServes: every SNOWCHAOS_* variable the compose
// file gives a node is one `snowchaos serve` reads (it ignores unknown
// ones, so a misspelt variable would silently do nothing).
func TestNodeEnvironmentIsServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, _ := buildBinaries(t)
	known := serveEnvNames(t, bin)
	p := mustLoad(t, allProfiles)
	for _, name := range []string{"node1", "node2", "node3"} {
		s, _ := p.GetService(name)
		for k := range s.Environment {
			if strings.HasPrefix(k, "SNOWCHAOS_") && !known[k] {
				t.Errorf("%s: %s is not a `snowchaos serve` setting (known: %v)", name, k, sortedKeys(known))
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestNodeRunsWithComposeEnvironment starts the image's binary as node1
// of the stack would run (its compose environment, with only the
// addresses a container network provides replaced by local ones: the
// listen address, an in-memory lease store, a temporary checkpoint, an
// in-process NTP server, no trace export), then runs the image's health
// check against it and injects a fault through the admin API with the
// stack's token, as the chaos service does.
func TestNodeRunsWithComposeEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, probe := buildBinaries(t)
	p := mustLoad(t, allProfiles)
	s, _ := p.GetService("node1")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	overrides := map[string]string{
		"SNOWCHAOS_LISTEN":     "127.0.0.1:0",
		"SNOWCHAOS_LEASE":      "memory",
		"SNOWCHAOS_CHECKPOINT": filepath.Join(t.TempDir(), "mark"),
		"SNOWCHAOS_NTP_SERVER": chronytest.StartFake(t, chronytest.Fake{Offset: 2 * time.Millisecond}),
	}
	for k, v := range s.Environment {
		if strings.HasPrefix(k, "OTEL_EXPORTER_") || v == nil {
			continue // no collector here
		}
		if o, ok := overrides[k]; ok {
			env = append(env, k+"="+o)
			continue
		}
		env = append(env, k+"="+*v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(bin, s.Command...)
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout = pw // stderr goes to node.Log
	node, err := testenv.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-node.Exited(); pw.Close() }()
	t.Cleanup(func() { node.Stop(os.Interrupt, 30*time.Second) })
	var addr string
	select {
	case addr = <-testenv.ListenAddr(pr):
	case <-ctx.Done():
	}
	if addr == "" {
		t.Fatalf("snowchaos serve with node1's compose environment did not start listening (exited: %v):\n%s", cmd.ProcessState, node.Log())
	}
	base := "http://" + addr

	// The image's health check, as compose runs it (with the port moved).
	hc := slices.Clone([]string(s.HealthCheck.Test[1:]))
	hc[0] = probe
	hc[1] = strings.Replace(hc[1], "127.0.0.1:8080", addr, 1)
	var hcOut []byte
	var hcErr error
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	if err := testenv.Poll(hctx, 100*time.Millisecond, node.Exited(), func() bool {
		hcOut, hcErr = exec.Command(hc[0], hc[1:]...).CombinedOutput()
		return hcErr == nil
	}); err != nil {
		t.Fatalf("health check %q: %v (%v)\n%s\nnode log:\n%s", hc, hcErr, err, hcOut, node.Log())
	}

	// IDs, and a fault through the admin API with the stack's token.
	c := &server.Client{BaseURL: base, Token: *s.Environment["SNOWCHAOS_ADMIN_TOKEN"]}
	if _, err := c.IDs(ctx, 10); err != nil {
		t.Fatalf("IDs: %v\n%s", err, node.Log())
	}
	st, err := c.Inject(ctx, faults.Fault{Kind: faults.KindStep, By: -5 * time.Millisecond})
	if err != nil {
		t.Fatalf("admin API with the compose token: %v\n%s", err, node.Log())
	}
	if len(st.Active) == 0 {
		t.Errorf("fault not active: %+v", st)
	}
	if _, err := (&server.Client{BaseURL: base, Token: "wrong"}).Inject(ctx, faults.Fault{Kind: faults.KindRelease}); err == nil {
		t.Error("the admin API accepted a wrong token")
	}
	if _, err := c.IDs(ctx, 10); err != nil {
		t.Fatalf("IDs after the fault: %v", err)
	}
}

// TestChaosScenarios: each scenario the chaos service can run parses, runs
// in real mode against the stack's three nodes, and is accepted by
// `snowchaos run --list` (targets, faults and invariants the binary
// knows). The default SCENARIO exists.
func TestChaosScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "deploy/compose/scenarios/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in deploy/compose/scenarios: %v", err)
	}
	p := mustLoad(t, allProfiles)
	chaos, _ := p.GetService("chaos")
	var def string
	for _, a := range chaos.Command {
		if strings.HasPrefix(a, "/scenarios/") {
			def = strings.TrimPrefix(a, "/scenarios/")
		}
	}
	found := false
	for _, f := range files {
		if filepath.Base(f) == def {
			found = true
		}
		s, err := scenario.ParseFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if s.Mode != scenario.ModeReal {
			t.Errorf("%s: mode %q, want real (the stack runs on the wall clock)", f, s.Mode)
		}
		var nodes []string
		for _, n := range s.Nodes {
			nodes = append(nodes, n.Name)
		}
		if !slices.Equal(nodes, []string{"node1", "node2", "node3"}) {
			t.Errorf("%s: nodes %v, want the stack's node1, node2, node3", f, nodes)
		}
	}
	if !found {
		t.Errorf("the chaos service's default scenario %s is not in deploy/compose/scenarios", def)
	}
	if testing.Short() {
		return
	}
	bin, _ := buildBinaries(t)
	for _, f := range files {
		abs := mustAbs(t, f)
		cmd := exec.Command(bin, "run", "--mode", "real", "--list", abs)
		cmd.Env = append(os.Environ(), "SNOWCHAOS_ADMIN_TOKEN="+testToken, "SNOWCHAOS_HTTP_NODES="+env(chaos, "SNOWCHAOS_HTTP_NODES"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte(`unknown target "http"`)) || bytes.Contains(out, []byte(`"http"`)) && bytes.Contains(out, []byte("unknown")) {
				testenv.Missing(t, "the harness's http target is not registered in snowchaos, so the chaos service cannot run %s:\n%s", filepath.Base(f), out)
			}
			t.Errorf("snowchaos run --mode real --list %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}
