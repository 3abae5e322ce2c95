package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExportCLI(t *testing.T) {
	code, out, errb := runCLI("export", "chaos-mesh", "step-back-small")
	if code != exitOK || !strings.Contains(out, "kind: Workflow") || !strings.Contains(out, "timeOffset: -5ms") || errb != "" {
		t.Fatalf("built-in step-back-small: exit %d, stderr %q", code, errb)
	}
	// storm has faults Chaos Mesh cannot inject: named on stderr, exit 1
	// only with --strict.
	code, _, errb = runCLI("export", "chaos-mesh", "storm")
	if code != exitOK || !strings.Contains(errb, "freeze fault freeze (line 20) unmapped") {
		t.Fatalf("storm: exit %d, stderr %q", code, errb)
	}
	if code, _, _ = runCLI("export", "chaos-mesh", "--strict", "storm"); code != exitIncomplete {
		t.Fatalf("--strict storm: exit %d, want %d", code, exitIncomplete)
	}
	file := filepath.Join("..", "..", "..", "..", "scenarios", "http", "restart-kill9.yaml")
	if code, out, _ = runCLI("export", "chaos-mesh", "--namespace", "ids", "--workflow", "kill9", file); code != exitOK ||
		!strings.Contains(out, "name: kill9\n  namespace: ids") || !strings.Contains(out, "action: pod-kill") {
		t.Fatalf("file with flags: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\nduration: 1s\nnodes: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"export", "chaos-mesh", bad},
		{"export", "chaos-mesh", "no-such-scenario"},
		{"export", "chaos-mesh"},
		{"export", "chaos-mesh", "--store", "zookeeper", "storm"},
		{"export", "chaos-mesh", "--bogus", "storm"},
		{"export", "argo", "storm"},
		{"fleet", "--replicas", "0"},
		{"fleet", "--policy", "hope"},
		{"fleet", "extra"},
	} {
		if code, _, errb := runCLI(args...); code != exitInvalid || errb == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, errb, exitInvalid)
		}
	}
	if _, _, errb := runCLI("export", "chaos-mesh", "no-such-scenario"); !strings.Contains(errb, "built-in: burst,") {
		t.Errorf("unknown built-in does not list the built-in ones: %s", errb)
	}
}

// TestExportStrictPartition: --strict exits 0 only when every fault is
// mapped as the scenario means it: a one-way partition whose calls hang
// keeps its direction (NetworkChaos "to" for outbound) and passes; the
// same partition whose calls fail at once, which NetworkChaos cannot do,
// fails, named on stderr.
func TestExportStrictPartition(t *testing.T) {
	scen := func(extra string) string {
		f := filepath.Join(t.TempDir(), "p.yaml")
		src := "name: p\nduration: 5s\nnodes:\n  - {name: a, worker: 1, lease: memory}\nload: {rate: 100/s}\nfaults:\n" +
			"  - {name: cut, at: 1s, kind: store_outage, for: 2s, nodes: [a], direction: outbound" + extra + "}\ninvariants: [duplicates == 0]\n"
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	code, out, errb := runCLI("export", "chaos-mesh", "--strict", scen(", hang: on"))
	if code != exitOK || !strings.Contains(out, "direction: to") || strings.Contains(out, "direction: both") || errb != "" {
		t.Fatalf("--strict, one-way partition that hangs: exit %d, stderr %q\n%s", code, errb, out)
	}
	code, out, errb = runCLI("export", "chaos-mesh", "--strict", scen(""))
	if code != exitIncomplete || !strings.Contains(out, "direction: to") || !strings.Contains(errb, "store_outage fault cut (line 7) partial: the scenario's calls fail at once") {
		t.Fatalf("--strict, one-way partition failing at once: exit %d, stderr %q", code, errb)
	}
}

// TestFleetCLIDefaults checks that the CLI's defaults are the committed
// manifests' configuration.
func TestFleetCLIDefaults(t *testing.T) {
	for args, file := range map[string]string{"": "fleet-postgres.yaml", "--store etcd": "fleet-etcd.yaml"} {
		code, out, errb := runCLI(append([]string{"fleet"}, strings.Fields(args)...)...)
		if code != exitOK {
			t.Fatalf("fleet %s: exit %d: %s", args, code, errb)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "manifests", file))
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("fleet %s differs from manifests/%s", args, file)
		}
	}
}

// TestSnowchaosExportEndToEnd builds the snowchaos binary and this one and
// runs `snowchaos export chaos-mesh` through SNOWCHAOS_KUBE_BIN.
func TestSnowchaosExportEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// Each binary is built in its own module.
	for pkg, mod := range map[string]string{"./cmd/snowchaos": root, "./cmd/snowchaos-kube": filepath.Join(root, "deploy", "kube")} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "snowchaos"), "export", "chaos-mesh", "lease-store-outage")
	cmd.Env = append(os.Environ(), "SNOWCHAOS_KUBE_BIN="+filepath.Join(dir, "snowchaos-kube"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("snowchaos export chaos-mesh: %v\n%s", err, errb.String())
	}
	_, want, _ := runCLI("export", "chaos-mesh", "lease-store-outage")
	if out.String() != want {
		t.Errorf("snowchaos export chaos-mesh and snowchaos-kube export chaos-mesh differ")
	}
}
