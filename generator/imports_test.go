package generator

import (
	"go/build"
	"os/exec"
	"strings"
	"testing"
)

// TestStdlibOnly enforces the dependency rule: generator imports nothing
// outside the standard library, directly or indirectly. It asks `go list`
// for every dependency (tests excluded) and, where the go command is not
// available, falls back to checking the direct imports.
func TestStdlibOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err == nil {
		for _, p := range strings.Fields(string(out)) {
			if p != "github.com/snowchaos/snowchaos/generator" {
				t.Errorf("generator depends on non-standard package %s", p)
			}
		}
		return
	}
	t.Logf("go list unavailable (%v); checking direct imports", err)
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkg.Imports {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			t.Errorf("generator imports non-standard package %s", p)
		}
	}
}
