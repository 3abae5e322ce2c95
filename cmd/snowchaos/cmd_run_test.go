package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/scenarios"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"run"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func writeScenario(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func builtin(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(scenarios.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunMalformed: a malformed scenario exits 2 naming file and line.
func TestRunMalformed(t *testing.T) {
	p := writeScenario(t, "bad.yaml", "name: bad\nduration: 1s\nnodes: [{name: a, wroker: 1}]\nload: {rate: 1/s}\ninvariants: [\"duplicate == 0\"]\n")
	code, _, stderr := runCmd(t, p)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{p + ":3: nodes[0].wroker: unknown key \"wroker\" (did you mean \"worker\"?)", p + ":5: invariants[0]: unknown invariant \"duplicate\""} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestRunDroppedExpectation: the built-in step scenario passes; edited to
// drop its expected failures it exits 1.
func TestRunDroppedExpectation(t *testing.T) {
	src := builtin(t, "step-back-small.yaml")
	ok := writeScenario(t, "ok.yaml", src)
	if code, out, stderr := runCmd(t, "--target", "wait,bad-no-rewind-check", ok); code != 0 {
		t.Fatalf("unedited: exit %d\n%s%s", code, out, stderr)
	}
	i := strings.Index(src, "expect:")
	if i < 0 {
		t.Fatal("no expect block")
	}
	edited := writeScenario(t, "edited.yaml", src[:i])
	code, out, _ := runCmd(t, "--target", "wait,bad-no-rewind-check", edited)
	if code != 1 {
		t.Fatalf("edited: exit %d, want 1\n%s", code, out)
	}
	if !strings.Contains(out, "bad-no-rewind-check: FAIL: duplicates == 0") {
		t.Fatalf("the matrix does not say what failed:\n%s", out)
	}
}

// TestRunOutputs writes every report format.
func TestRunOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested") // made by the run
	p := writeScenario(t, "s.yaml", builtin(t, "restart-same-ms.yaml"))
	junit, html, hist := filepath.Join(dir, "j.xml"), filepath.Join(dir, "r.html"), filepath.Join(dir, "h.ndjson")
	code, out, stderr := runCmd(t, "--report", "json", "--junit", junit, "--html", html, "--history", hist, "--target", "wait,bad-memory-only", "--seed", "5", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var rep struct {
		Verdict   string
		Scenarios []struct {
			Seed int64
			Runs []struct{ Target string }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if rep.Verdict != "pass" || rep.Scenarios[0].Seed != 5 || len(rep.Scenarios[0].Runs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, f := range []string{junit, html, hist} {
		st, err := os.Stat(f)
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(hist)
	if lines := bytes.Count(b, []byte("\n")); lines < 1000 {
		t.Fatalf("history has %d lines", lines)
	}
	if want := "snowchaos run: history: " + hist + ", "; !strings.Contains(stderr, want) || !strings.Contains(stderr, " MB (NDJSON)") {
		t.Fatalf("stderr does not give the history's size:\n%s", stderr)
	}

	// A name ending in .gz writes the same lines gzip-compressed.
	gz := filepath.Join(dir, "h.ndjson.gz")
	code, _, stderr = runCmd(t, "--history", gz, "--target", "wait,bad-memory-only", "--seed", "5", p)
	if code != 0 || !strings.Contains(stderr, "snowchaos run: history: "+gz+", ") || !strings.Contains(stderr, "gzip-compressed NDJSON") {
		t.Fatalf("--history %s: exit %d\n%s", gz, code, stderr)
	}
	f, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", gz, err)
	}
	if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, b) {
		t.Fatalf("%s holds %d bytes (%v), want the %d of the plain history", gz, len(unzipped), err, len(b))
	}
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{{"--mode", "fast"}, {"--report", "xml"}, {"--seed", "x"}, {"--target", "nope"}, {"/does/not/exist.yaml"},
		{"--stall-timeout", "0s"}, {"--stall-timeout", "2h"}, {"--parallel", "-1"}, {"--parallel", "257"}} {
		if code, _, errs := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		} else if f := strings.TrimLeft(args[0], "-"); strings.HasPrefix(args[0], "--") && !strings.Contains(errs, f) {
			t.Errorf("%v: the error does not name %s: %s", args, f, errs)
		}
	}
	code, out, _ := runCmd(t, "--list")
	if code != 0 || !strings.Contains(out, "leap-smear") || !strings.Contains(out, "bad-unbounded-logical") {
		t.Fatalf("--list: %d\n%s", code, out)
	}
}

// TestRunBuiltinSuite runs the embedded suite (the wait target only, to
// keep it quick; the harness tests run every target).
func TestRunBuiltinSuite(t *testing.T) {
	code, out, stderr := runCmd(t, "--target", "wait")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	files, _ := fs.Glob(scenarios.FS, "*.yaml")
	n := len(files)
	if want := fmt.Sprintf("%d scenarios, %d runs: %d passed", n, n, n); n < 14 || !strings.Contains(out, want) {
		t.Fatalf("summary:\n%s", out)
	}
}

// fixedClockTarget runs in-process nodes whose clocks the harness cannot
// step, for the n/a outcome.
type fixedClockTarget struct{ target.InProcess }

func (f *fixedClockTarget) Info() target.Info {
	i := f.InProcess.Info()
	i.Name = "test-cmd-fixed-clock"
	i.Caps.Faults = []faults.Kind{faults.KindRestart}
	return i
}

func init() { target.Register(&fixedClockTarget{}) }

// TestRunAllowNA: a target that cannot take a scenario's fault is invalid
// input (exit 2) unless --allow-na reports it n/a: exit 0, the row and the
// JUnit case say why.
func TestRunAllowNA(t *testing.T) {
	p := writeScenario(t, "na.yaml", `name: na
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 1000/s}
faults: [{at: 200ms, kind: step, by: -5ms}]
invariants: ["duplicates == 0"]
targets: [wait, test-cmd-fixed-clock]
`)
	code, _, stderr := runCmd(t, p)
	if code != 2 || !strings.Contains(stderr, "target test-cmd-fixed-clock cannot take a step fault") {
		t.Fatalf("without --allow-na: exit %d\n%s", code, stderr)
	}
	junit := filepath.Join(t.TempDir(), "j.xml")
	code, out, stderr := runCmd(t, "--allow-na", "--junit", junit, p)
	if code != 0 || !strings.Contains(out, "n/a: target test-cmd-fixed-clock cannot take a step fault") || !strings.Contains(out, "1 n/a; verdict PASS (exit 0)") {
		t.Fatalf("--allow-na: exit %d\n%s%s", code, out, stderr)
	}
	b, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(b), `<skipped message="not applicable: target test-cmd-fixed-clock`) {
		t.Fatalf("junit: %v\n%s", err, b)
	}
}

// TestRunFlagsAfterFiles: flags may follow the scenario files, as in
// `snowchaos run scenarios/leap-second.yaml --html out.html`; "--" ends
// the flags, so a file whose name starts with "-" can still be run.
func TestRunFlagsAfterFiles(t *testing.T) {
	dir := t.TempDir()
	html := filepath.Join(dir, "out.html")
	p := writeScenario(t, "leap-second.yaml", builtin(t, "leap-second.yaml"))
	code, out, stderr := runCmd(t, p, "--html", html, "--target", "wait")
	if code != 0 || !strings.Contains(out, "1 scenarios, 1 runs: 1 passed") {
		t.Fatalf("file then flags: exit %d\n%s%s", code, out, stderr)
	}
	if st, err := os.Stat(html); err != nil || st.Size() == 0 {
		t.Fatalf("--html after the file wrote nothing: %v", err)
	}

	dash := filepath.Join(dir, "-odd.yaml")
	if err := os.WriteFile(dash, []byte(builtin(t, "step-back-small.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, out, stderr = runCmd(t, "--target", "wait", "--", "-odd.yaml")
	if code != 0 || !strings.Contains(out, "1 scenarios, 1 runs: 1 passed") {
		t.Fatalf(`"--" then a file named -odd.yaml: exit %d\n%s%s`, code, out, stderr)
	}
	code, _, stderr = runCmd(t, p, "--no-such-flag")
	if code != 2 || !strings.Contains(stderr, "flag provided but not defined: -no-such-flag") {
		t.Fatalf("an unknown flag after the file: exit %d\n%s", code, stderr)
	}
}

// TestNoPositionalCommands: a command without positional arguments names
// the stray one even when flags follow it.
func TestNoPositionalCommands(t *testing.T) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"leases", "list", "stray", "--json"}, &out, &errb)
	if code != exitInvalid || !strings.Contains(errb.String(), `snowchaos leases list: unexpected arguments ["stray"]`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
