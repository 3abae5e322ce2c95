package exec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/harness/target/exec"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// spec returns a node spec running x.
func spec(x *scenario.Exec) target.NodeSpec {
	return target.NodeSpec{Name: "a", Host: "a", Worker: 1, Layout: generator.DefaultLayout(), Exec: x}
}

// block returns an exec block with the parser's defaults.
func block(cmd ...string) *scenario.Exec {
	return &scenario.Exec{Command: cmd, Dir: ".", Protocol: scenario.ProtocolStdio, Request: "{n}", Format: scenario.FormatLines,
		ID: scenario.IDDecimal, Clock: scenario.ClockFaketime, Timeout: 2 * time.Second, StartTimeout: 5 * time.Second, MaxBatch: 100}
}

// TestGoBinaryRefused: a Go binary on the libfaketime route is refused
// with the reason, before anything runs.
func TestGoBinaryRefused(t *testing.T) {
	self, err := os.Executable() // this test binary is a Go binary
	if err != nil {
		t.Fatal(err)
	}
	_, err = exec.Registered().Start(context.Background(), spec(block(self)), target.Env{})
	if !errors.Is(err, exec.ErrGoBinary) || !strings.Contains(err.Error(), "vDSO") || !strings.Contains(err.Error(), "go_build") {
		t.Fatalf("Start(Go binary) = %v, want ErrGoBinary naming the vDSO and go_build", err)
	}
}

// TestWideIDRefused: UUIDs wait for the wide-ID verifier.
func TestWideIDRefused(t *testing.T) {
	x := block("true")
	x.ID = scenario.IDUUID
	if _, err := exec.Registered().Start(context.Background(), spec(x), target.Env{}); !errors.Is(err, exec.ErrWideID) {
		t.Fatalf("Start(uuid) = %v, want ErrWideID", err)
	}
}

// TestStdioHungAndRefused: a process answering a refusal line, and one
// that never answers (bounded by the timeout, then killed), with a shell
// script as the generator (clock: none).
func TestStdioHungAndRefused(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "gen.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho ready\nread n\necho 42\necho 'refused: clock moved backwards'\nread n\nsleep 60\n"), 0o755)
	x := block(script)
	x.Clock, x.Ready, x.Timeout = scenario.ClockNone, "ready", 300*time.Millisecond
	n, err := exec.Registered().Start(context.Background(), spec(x), target.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dst := make([]generator.ID, 3)
	k, err := n.Issue(context.Background(), dst)
	if k != 1 || dst[0] != 42 || err == nil || !strings.Contains(err.Error(), "refused: clock moved backwards") {
		t.Fatalf("Issue = %d %v, %v; want 1 ID (42) and the refusal", k, dst[:k], err)
	}
	start := time.Now()
	if _, err := n.Issue(context.Background(), dst); !errors.Is(err, exec.ErrHung) {
		t.Fatalf("Issue on a hung process = %v, want ErrHung", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a hung request took %v, bound 300ms (+ the kill)", d)
	}
}

// TestNodeUnderFaults: a Node.js generator under libfaketime refuses
// after a clock step back (MVP), and the clock probe confirms the step.
func TestNodeUnderFaults(t *testing.T) {
	testenv.LookPath(t, "node")
	testenv.LookPath(t, "perl")
	js, _ := filepath.Abs("../../../bench/js")
	if _, err := os.Stat(filepath.Join(js, "node_modules")); err != nil {
		testenv.Missing(t, "bench/js/node_modules missing: run npm ci in bench/js")
	}
	x := block("node", "stdio.js", "mvp")
	x.Dir, x.Ready, x.Env = js, "ready", []scenario.EnvVar{{Name: "WORKER_ID", Value: "{worker}"}}
	n, err := exec.Registered().Start(context.Background(), spec(x), target.Env{})
	if err != nil {
		if strings.Contains(err.Error(), "libfaketime") {
			testenv.Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	dst := make([]generator.ID, 10)
	if _, err := n.Issue(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindStep, By: -time.Second}); err != nil {
		t.Fatal(err)
	}
	off, err := n.Clock().Offset(ctx)
	if err != nil || off > -990*time.Millisecond || off < -1010*time.Millisecond {
		t.Fatalf("offset after a -1s step: %v, %v", off, err)
	}
	if _, err := n.Issue(ctx, dst); err == nil || !strings.Contains(err.Error(), "clock moved backwards") {
		t.Fatalf("MVP after a 1s step back: %v, want its refusal", err)
	}
	if err := n.Clock().Apply(ctx, faults.Fault{Kind: faults.KindPause, For: time.Second}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("pause: %v, want ErrUnsupported", err)
	}
}

// TestParseResponse: the three HTTP formats, numbers kept digit for digit.
func TestParseResponse(t *testing.T) {
	for _, c := range []struct {
		format, field, body string
		want                []string
	}{
		{scenario.FormatLines, "", "1\n2\n\n3\n", []string{"1", "2", "3"}},
		{scenario.FormatJSONArray, "", `["1", 9007199254740993]`, []string{"1", "9007199254740993"}},
		{scenario.FormatJSONField, "id", `{"id": "7"}`, []string{"7"}},
		{scenario.FormatJSONField, "ids", `{"ids": [8, "9"]}`, []string{"8", "9"}},
	} {
		got, err := exec.ParseResponse(c.format, c.field, []byte(c.body))
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s %q: %v %v, want %v", c.format, c.body, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"x": 1}`, `[true]`, `nope`} {
		if _, err := exec.ParseResponse(scenario.FormatJSONField, "id", []byte(bad)); err == nil {
			t.Errorf("json-field %q: no error", bad)
		}
	}
	if _, err := exec.ParseID(scenario.IDDecimal, "-1"); err == nil {
		t.Error(`ParseID("-1"): no error`)
	}
}

// FuzzParseResponse: no answer makes the parsers panic, and every ID they
// accept is a canonical decimal.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{"1\n2\n", `["1",2]`, `{"id":"3"}`, `{"id":[4]}`, "", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, format := range []string{scenario.FormatLines, scenario.FormatJSONArray, scenario.FormatJSONField} {
			ids, err := exec.ParseResponse(format, "id", []byte(body))
			if err != nil {
				continue
			}
			for _, s := range ids {
				if id, err := exec.ParseID(scenario.IDDecimal, s); err == nil && id.String() != s {
					t.Fatalf("ParseID(%q) = %s", s, id)
				}
			}
		}
	})
}
