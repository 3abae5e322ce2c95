package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// docWrappers returns the wrapper examples of docs/check.md: the fenced
// blocks whose info string names a file ("js wrapper.js"), by file name.
func docWrappers(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/check.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```[a-z]+ ([A-Za-z]+\\.[a-z]+)\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// withoutCheck removes the line marked "regression check".
func withoutCheck(t *testing.T, src string) string {
	t.Helper()
	var out []string
	dropped := 0
	for _, l := range strings.Split(src, "\n") {
		if strings.Contains(l, "regression check") {
			dropped++
			continue
		}
		out = append(out, l)
	}
	if dropped != 1 {
		t.Fatalf("want one line marked regression check in the example, found %d", dropped)
	}
	return strings.Join(out, "\n")
}

// checkResult is snowchaos check --json's output.
type checkResult struct {
	Rows []struct {
		Fault, Result, Verdict, Reason string
		Broken                         []string
	}
	Verdict string
	Exit    int
}

// runCheckJSON runs snowchaos check --json with args.
func runCheckJSON(t *testing.T, args ...string) checkResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runCheck(context.Background(), append([]string{"--json"}, args...), &stdout, &stderr)
	var res checkResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("check %q: exit %d, %v; stderr:\n%s", args, code, err, stderr.String())
	}
	if res.Exit != code {
		t.Fatalf("check %q: exit %d, JSON says %d", args, code, res.Exit)
	}
	t.Logf("check %q: %s\n%s", args, res.Verdict, stderr.String())
	for _, r := range res.Rows {
		t.Logf("  %-22s %s %s", r.Fault, r.Result, r.Reason)
	}
	return res
}

// TestCheckDocWrappers: the wrappers docs/check.md shows, in Node.js,
// Python and Java, run under snowchaos check with no flag but the command:
// no row is unknown, every clock fault is survived (paid in refusals), and
// only the faults a generator without persistence or lease cannot survive
// (a restart after a rewind, a duplicate worker) repeat IDs; the same
// wrappers without their regression check line are caught under the
// clock steps.
func TestCheckDocWrappers(t *testing.T) {
	if _, err := faketime.Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	wrappers := docWrappers(t)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		py = testenv.LookPath(t, "python3")
	}
	for _, c := range []struct {
		file string
		tool string
		cmd  func(dir string) []string
	}{
		{"wrapper.js", "node", func(dir string) []string { return []string{"node", filepath.Join(dir, "wrapper.js")} }},
		{"wrapper.py", py, func(dir string) []string { return []string{py, filepath.Join(dir, "wrapper.py")} }},
		{"Gen.java", "javac", func(dir string) []string { return []string{"java", "-cp", dir, "Gen"} }},
	} {
		t.Run(c.file, func(t *testing.T) {
			testenv.LookPath(t, c.tool)
			src, ok := wrappers[c.file]
			if !ok {
				t.Fatalf("docs/check.md has no %s example", c.file)
			}
			good, bad := t.TempDir(), t.TempDir()
			for dir, text := range map[string]string{good: src, bad: withoutCheck(t, src)} {
				if err := os.WriteFile(filepath.Join(dir, c.file), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				if c.tool == "javac" {
					if out, err := exec.Command("javac", "-d", dir, filepath.Join(dir, c.file)).CombinedOutput(); err != nil {
						t.Fatalf("javac: %v\n%s", err, out)
					}
				}
			}
			res := runCheckJSON(t, append([]string{"--"}, c.cmd(good)...)...)
			for _, r := range res.Rows {
				switch {
				case r.Verdict == "unknown":
					t.Errorf("%s: unknown: %s", r.Fault, r.Reason)
				case r.Fault == "restart-after-rewind" || r.Fault == "duplicate-worker":
					if !strings.Contains(r.Result, "dup") {
						t.Errorf("%s: %s: a generator without persistence or lease repeats IDs here", r.Fault, r.Result)
					}
				case strings.Contains(r.Result, "dup") || strings.Contains(r.Result, "order"):
					t.Errorf("%s: %s: the wrapper with its regression check broke", r.Fault, r.Result)
				}
			}
			if res.Exit != 1 || len(res.Rows) != 9 {
				t.Errorf("exit %d over %d rows, want 1 (the restart after a rewind and the duplicate worker) over 9", res.Exit, len(res.Rows))
			}
			res = runCheckJSON(t, append([]string{"--only", "step-back-small,step-back-5ms,step-back-large", "--"}, c.cmd(bad)...)...)
			if res.Exit != 1 {
				t.Errorf("without its regression check: exit %d, want 1", res.Exit)
			}
			for _, r := range res.Rows {
				if r.Verdict == "unknown" || len(r.Broken) == 0 {
					t.Errorf("without its regression check, %s: %s %s: not caught", r.Fault, r.Result, r.Reason)
				}
			}
		})
	}
}
