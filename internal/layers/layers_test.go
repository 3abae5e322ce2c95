// Package layers holds the test that keeps the tree's two halves apart:
// the product (what a team deploys) never imports the proof (what breaks
// it and judges it), and each external system stays in its own package.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/snowchaos/snowchaos/"

// product are the packages a team deploys: the generator library, the
// fault clock its admin API drives, leases, the node composition, the HTTP
// node, its telemetry and NTP checks.
var product = []string{"generator", "faults", "lease", "node", "server", "telemetry", "ntpcheck"}

// proof are the packages that break the product and judge it.
var proof = []string{"harness", "verify", "mutants"}

// within reports whether pkg (module-relative) is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func inAny(pkg string, dirs []string) bool {
	for _, d := range dirs {
		if within(pkg, d) {
			return true
		}
	}
	return false
}

// imports lists every package of the module with its imports, both
// module-relative where they are the module's.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			m[pkg] = append(m[pkg], strings.TrimPrefix(imp, module))
		}
	}
	return m
}

// TestProductNeverImportsTheProof: no arrow runs from the product up into
// the proof or into the tools around them.
func TestProductNeverImportsTheProof(t *testing.T) {
	above := append(append([]string{}, proof...), "cmd", "dashboards", "deploy", "pgindex", "bench")
	n := 0
	for pkg, imps := range imports(t) {
		if !inAny(pkg, product) {
			continue
		}
		n++
		for _, imp := range imps {
			if inAny(imp, above) {
				t.Errorf("%s (product) imports %s", pkg, imp)
			}
		}
	}
	if n < len(product) {
		t.Fatalf("found %d product packages, want at least %d: the package list changed", n, len(product))
	}
}

// TestLowerLayers: each layer of the product imports only the layers below
// it (generator at the bottom, the HTTP node at the top); test helpers may
// use internal/testenv.
func TestLowerLayers(t *testing.T) {
	allowed := map[string][]string{
		"generator": {},
		"faults":    {"generator"},
		"ntpcheck":  {"generator"},
		"telemetry": {"generator", "telemetry"},
		"lease":     {"generator", "lease", "telemetry"},
		"node":      {"generator", "faults", "lease", "telemetry"},
		"server":    {"generator", "faults", "node", "telemetry"},
	}
	for pkg, imps := range imports(t) {
		for layer, ok := range allowed {
			if !within(pkg, layer) {
				continue
			}
			for _, imp := range imps {
				ours := inAny(imp, product) || inAny(imp, proof) || within(imp, "internal")
				if !ours || imp == "internal/testenv" || inAny(imp, ok) {
					continue // the standard library, a third-party module, test plumbing, or a lower layer
				}
				t.Errorf("%s (layer %s) imports %s, above or beside it (allowed: %v)", pkg, layer, imp, ok)
			}
		}
	}
}

// TestOneModulePerStore: each external system's client is imported only
// by the package made for it.
func TestOneModulePerStore(t *testing.T) {
	owners := map[string][]string{
		"github.com/jackc/pgx":        {"lease/postgres", "verify/pgoracle", "pgindex", "internal/testenv/pgtest"},
		"go.etcd.io/etcd":             {"lease/etcd", "internal/testenv/etcdtest"},
		"github.com/go-zookeeper/zk":  {"lease/zookeeper"},
		"github.com/tsenart/vegeta":   {"harness/loadgen"},
		"github.com/grafana":          {"dashboards"},
		"github.com/compose-spec":     {"deploy"},
		"github.com/valyala/fasthttp": {"server", "harness/loadgen"},
	}
	for pkg, imps := range imports(t) {
		for _, imp := range imps {
			for mod, dirs := range owners {
				if strings.HasPrefix(imp, mod) && !inAny(pkg, dirs) {
					t.Errorf("%s imports %s: only %v may", pkg, imp, dirs)
				}
			}
		}
	}
}
