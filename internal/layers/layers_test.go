// Package layers holds the test that keeps the tree's two halves apart:
// the product (what a team deploys) never imports the proof (what breaks
// it and judges it), not even in its tests; each layer of the product
// imports only the layers below it; and each external system stays in its
// own package.
package layers

import (
	"os/exec"
	"slices"
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

// above are the proof and the tools around the product: no product package
// or product test imports them.
var above = append(append([]string{}, proof...), "cmd", "dashboards", "deploy", "pgindex", "bench")

// layers maps each layer of the product to the layers it may import (a
// package belongs to the most specific layer it lies in): generator at
// the bottom, the served node's composition at the top.
var layers = map[string][]string{
	"generator":      {},
	"faults":         {"generator"},
	"ntpcheck":       {"generator", "ntpcheck"},
	"telemetry":      {"generator", "telemetry"},
	"lease":          {"generator", "lease", "telemetry"},
	"node":           {"generator", "faults", "lease", "node", "telemetry"},
	"server":         {"generator", "faults", "node", "telemetry"},
	"server/service": {"generator", "faults", "lease", "node", "ntpcheck", "server", "telemetry"},
}

// within reports whether pkg (module-relative) is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func inAny(pkg string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(pkg, d) })
}

// pkg is one package's imports, module-relative where they are the
// module's: those of its code, and those of its tests (in-package and
// external).
type pkg struct {
	imports, tests []string
}

// graph lists every package of the module with its imports.
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string]pkg{}
	rel := func(s string) []string {
		var r []string
		for _, imp := range strings.Fields(s) {
			r = append(r, strings.TrimPrefix(imp, module))
		}
		return r
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		g[strings.TrimPrefix(f[0], module)] = pkg{imports: rel(f[1]), tests: rel(f[2])}
	}
	return g
}

// proofImports lists every import by which a product package or its tests
// reach the proof or a tool above the product, and counts the product
// packages it saw.
func proofImports(g map[string]pkg) (bad []string, seen int) {
	for name, p := range g {
		if !inAny(name, product) {
			continue
		}
		seen++
		for _, imp := range p.imports {
			if inAny(imp, above) {
				bad = append(bad, name+" (product) imports "+imp)
			}
		}
		for _, imp := range p.tests {
			if inAny(imp, above) {
				bad = append(bad, name+" (product) tests import "+imp)
			}
		}
	}
	slices.Sort(bad)
	return bad, seen
}

// layerOf returns the most specific layer pkg lies in, "" for none.
func layerOf(pkg string) string {
	best := ""
	for l := range layers {
		if within(pkg, l) && len(l) > len(best) {
			best = l
		}
	}
	return best
}

// layerImports lists every import by which a product package's code
// reaches a layer above or beside its own. Test helpers (chronytest,
// promtest) may use internal/testenv; tests may use any product package.
func layerImports(g map[string]pkg) []string {
	var bad []string
	for name, p := range g {
		layer := layerOf(name)
		if layer == "" {
			continue
		}
		for _, imp := range p.imports {
			ours := inAny(imp, product) || inAny(imp, above) || within(imp, "internal")
			if !ours || inAny(imp, layers[layer]) || within(imp, "internal/testenv") {
				continue // the standard library, a third-party module, a lower layer or test plumbing (chronytest, promtest)
			}
			bad = append(bad, name+" (layer "+layer+") imports "+imp+", above or beside it (allowed: "+strings.Join(layers[layer], ", ")+")")
		}
	}
	slices.Sort(bad)
	return bad
}

// TestProductNeverImportsTheProof: no arrow runs from the product, its
// tests included, up into the proof or into the tools around them.
func TestProductNeverImportsTheProof(t *testing.T) {
	bad, seen := proofImports(graph(t))
	for _, b := range bad {
		t.Error(b)
	}
	if seen < len(product) {
		t.Fatalf("found %d product packages, want at least %d: the package list changed", seen, len(product))
	}
}

// TestLowerLayers: each layer of the product imports only the layers below
// it.
func TestLowerLayers(t *testing.T) {
	for _, b := range layerImports(graph(t)) {
		t.Error(b)
	}
}

// TestChecksCatchViolations feeds the checks a graph with the arrows they
// exist to forbid: each is reported, and the allowed ones are not.
func TestChecksCatchViolations(t *testing.T) {
	g := map[string]pkg{
		"generator":       {},
		"faults":          {imports: []string{"generator"}},
		"lease":           {imports: []string{"generator", "fmt"}, tests: []string{"lease/leasetest", "internal/testenv/pgtest"}},
		"lease/leasetest": {imports: []string{"lease", "internal/testenv"}},
		"node":            {imports: []string{"lease", "faults"}, tests: []string{"node/nodetest", "telemetry"}},
		"server":          {imports: []string{"node", "github.com/valyala/fasthttp"}, tests: []string{"harness/scenario"}},
		"server/service":  {imports: []string{"server", "lease", "ntpcheck"}},
		"telemetry":       {imports: []string{"generator"}},
		"ntpcheck":        {imports: []string{"generator", "lease"}, tests: []string{"harness", "faults"}},
		"generator/sub":   {imports: []string{"cmd/snowchaos"}},
		"harness":         {imports: []string{"server", "node"}},
	}
	bad, seen := proofImports(g)
	want := []string{
		"generator/sub (product) imports cmd/snowchaos",
		"ntpcheck (product) tests import harness",
		"server (product) tests import harness/scenario",
	}
	if !slices.Equal(bad, want) || seen != 10 {
		t.Errorf("proof imports found:\n%s\n(%d product packages); want:\n%s", strings.Join(bad, "\n"), seen, strings.Join(want, "\n"))
	}
	bad = layerImports(g)
	want = []string{
		"generator/sub (layer generator) imports cmd/snowchaos, above or beside it (allowed: )",
		"ntpcheck (layer ntpcheck) imports lease, above or beside it (allowed: generator, ntpcheck)",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("layer violations found:\n%s\nwant:\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
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
	for name, p := range graph(t) {
		for _, imp := range p.imports {
			for mod, dirs := range owners {
				if strings.HasPrefix(imp, mod) && !inAny(name, dirs) {
					t.Errorf("%s imports %s: only %v may", name, imp, dirs)
				}
			}
		}
	}
}
