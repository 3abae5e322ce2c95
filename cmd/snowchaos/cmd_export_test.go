package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExportWithoutKubeBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(envKubeBin, "")
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"export", "chaos-mesh", "step-back-small"}, &out, &errb)
	if code != exitInvalid || !strings.Contains(errb.String(), "snowchaos-kube is not on PATH") || !strings.Contains(errb.String(), "make kube-build") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	t.Setenv(envKubeBin, filepath.Join(t.TempDir(), "missing"))
	errb.Reset()
	if code := dispatch(context.Background(), []string{"export", "chaos-mesh", "x"}, &out, &errb); code != exitInvalid || !strings.Contains(errb.String(), envKubeBin) {
		t.Fatalf("missing $%s: exit %d, stderr:\n%s", envKubeBin, code, errb.String())
	}
}

func TestExportUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"export", "argo"}, &out, &errb); code != exitInvalid || !strings.Contains(errb.String(), `unknown engine "argo"`) {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	if code := dispatch(context.Background(), []string{"export", "-h"}, &out, &errb); code != exitOK {
		t.Fatalf("-h: exit %d", code)
	}
}

// TestExportRunsKubeBinary runs a stand-in for snowchaos-kube that prints
// its arguments and exits 1: export passes the arguments and the exit code
// through. (deploy/kube's own tests run the real pair end to end.)
func TestExportRunsKubeBinary(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	bin := filepath.Join(t.TempDir(), "snowchaos-kube")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"args: $*\"\necho oops >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envKubeBin, "")
	t.Setenv("PATH", filepath.Dir(bin))
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"export", "chaos-mesh", "--strict", "storm"}, &out, &errb)
	if code != 1 || out.String() != "args: export chaos-mesh --strict storm\n" || errb.String() != "oops\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
