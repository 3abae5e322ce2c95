// Package testenv decides what a test does when a real service it needs
// (Postgres, etcd, Prometheus, chrony, Chromium) is missing: outside CI it
// skips with the reason; with CI=true it fails, so no integration test can
// vanish quietly from a CI run.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the CI environment variable is set to a true value.
func InCI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false", "FALSE", "False":
		return false
	}
	return true
}

// Missing skips t outside CI and fails it in CI, naming what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true and a required service is missing: "+format, args...)
	}
	t.Skipf("skipping (set CI=true to make this a failure): "+format, args...)
}

// LookPath returns the path of the named binary, or calls Missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "binary %q not found in PATH: %v", name, err)
	}
	return p
}
