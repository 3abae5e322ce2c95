package exec_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// The exec target's verdicts on generators the project did not write: a
// green run must mean the fault reached the process, every incarnation
// served and every line was an ID. The generators in testdata/gens are
// written the way docs/exec-target.md tells a user to, in C, bash,
// Python, Go and Node.js; each broken harness case of the past (a static
// binary, a bash clock libfaketime does not reach, a Go binary behind a
// wrapper, a slow start, garbage and extra lines) must come out unknown
// with the reason, never pass, while the correct twins pass and the
// twins without a regression check fail with duplicates.

// gens returns the absolute path of testdata/gens and builds the C
// generators (dynamic with the check, dynamic without, static without)
// into a temporary directory.
func gens(t *testing.T) (dir, bins string) {
	t.Helper()
	testenv.LookPath(t, "node")
	testenv.LookPath(t, "perl")
	cc := testenv.LookPath(t, "gcc")
	if _, err := faketime.Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	dir, _ = filepath.Abs("testdata/gens")
	bins = t.TempDir()
	for name, flags := range map[string][]string{
		"gen-check":   nil,
		"gen-nocheck": {"-DNOCHECK"},
		"gen-static":  {"-static", "-DNOCHECK"},
	} {
		args := append([]string{"-O2", "-o", filepath.Join(bins, name)}, flags...)
		out, err := osexec.Command(cc, append(args, filepath.Join(dir, "gen.c"))...).CombinedOutput()
		if err != nil {
			if name == "gen-static" && strings.Contains(string(out), "-lc") {
				testenv.Missing(t, "gcc -static: the C library's static archive is missing (apt-get install libc6-dev): %s", out)
			}
			t.Fatalf("gcc %s: %v\n%s", name, err, out)
		}
	}
	out, err := osexec.Command("go", "build", "-o", filepath.Join(bins, "gogen"), "./testdata/gens/gogen").CombinedOutput()
	if err != nil {
		t.Fatalf("go build gogen: %v\n%s", err, out)
	}
	return dir, bins
}

// python returns the Python 3 to run: Debian's, else the one on PATH.
func python(t *testing.T) string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return testenv.LookPath(t, "python3")
}

// why gathers every reason a result gives: its error, its unknown
// reasons, its faults' details and its checks' reasons.
func why(r *harness.Result) string {
	parts := append([]string{r.Error}, r.Unknown...)
	for _, f := range r.Faults {
		parts = append(parts, f.Detail...)
	}
	for _, c := range r.Checks {
		parts = append(parts, c.Reason)
	}
	return strings.Join(parts, " | ")
}

// truthCase is one generator and the verdict it must get.
type truthCase struct {
	target  string // the target's name in the scenario
	verdict harness.Verdict
	has     string // a reason (alternatives split by "|"; for a fail, "dups") the result must show
}

// runTruth runs every target of the scenario text (the gens directory and
// the binaries directory substituted for {gens} and {bins}) and checks
// each case.
func runTruth(t *testing.T, yaml string, cases []truthCase) {
	t.Helper()
	dir, bins := gens(t)
	text := strings.NewReplacer("{gens}", dir, "{bins}", bins, "{python}", python(t)).Replace(yaml)
	s, err := scenario.Parse(filepath.Join(dir, "truth.yaml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Prepare([]*scenario.Scenario{s}, harness.Options{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]truthCase{}
	for _, c := range cases {
		want[c.target] = c
	}
	for _, tg := range s.Targets {
		c, ok := want[tg.Name]
		if !ok {
			t.Fatalf("no expectation for target %s", tg.Name)
		}
		t.Run(tg.Name, func(t *testing.T) {
			res := harness.RunOne(context.Background(), s, tg, harness.Options{})
			f := res.Figures
			reason := why(res)
			t.Logf("%s: %s, %d IDs, %d duplicates, %d protocol violations: %s", tg.Name, res.Verdict, f.IDs, f.Duplicates, f.ProtocolViolations, reason)
			if res.Verdict != c.verdict {
				t.Fatalf("verdict %s, want %s (%s)", res.Verdict, c.verdict, reason)
			}
			switch {
			case c.has == "dups" && f.Duplicates == 0:
				t.Fatalf("failed without a duplicate: %s", reason)
			case c.has != "dups" && c.has != "" && !slices.ContainsFunc(strings.Split(c.has, "|"), func(s string) bool { return strings.Contains(reason, s) }):
				t.Fatalf("the reasons do not say %q: %s", c.has, reason)
			}
		})
	}
}

// TestExecTruthStepBack: a 50 ms step back, under load, against every
// kind of generator.
func TestExecTruthStepBack(t *testing.T) {
	js, _ := filepath.Abs("../../../bench/js")
	if _, err := os.Stat(filepath.Join(js, "node_modules")); err != nil {
		testenv.Missing(t, "bench/js/node_modules missing: run npm ci in bench/js")
	}
	runTruth(t, fmt.Sprintf(`
name: truth-step-back
mode: real
duration: 1200ms
nodes: [{name: a, worker: 1, epoch: 2024-01-01T00:00:00Z}]
load: {per: node, clients: 2, batch: 10, rate: 300/s}
faults:
  - {at: 400ms, kind: step, by: -50ms, nodes: [a]}
invariants:
  - duplicates == 0
  - order_violations == 0
  - restart_violations == 0
targets:
  - {name: c-check, use: exec, exec: {command: ["{bins}/gen-check"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: c-nocheck, use: exec, exec: {command: ["{bins}/gen-nocheck"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: c-static, use: exec, exec: {command: ["{bins}/gen-static"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: bash, use: exec, exec: {command: [bash, "{gens}/gen.sh"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: bash-no-time, use: exec, exec: {command: [bash, "{gens}/gen.sh"], env: {WORKER_ID: "{worker}"}, ready: ready, time: off}}
  - {name: go-behind-sh, use: exec, exec: {command: [sh, -c, "exec {bins}/gogen"], env: {WORKER_ID: "{worker}", NOCHECK: "1"}, ready: ready}}
  - {name: go-overlay, use: exec, exec: {clock: go, dir: "{gens}", go_build: ./gogen, command: ["{bin}"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: go-overlay-nocheck, use: exec, exec: {clock: go, dir: "{gens}", go_build: ./gogen, command: ["{bin}"], env: {WORKER_ID: "{worker}", NOCHECK: "1"}, ready: ready}}
  - {name: python-check, use: exec, exec: {command: ["{python}", "{gens}/gen.py"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: python-nocheck, use: exec, exec: {command: ["{python}", "{gens}/gen.py"], env: {WORKER_ID: "{worker}", NOCHECK: "1"}, ready: ready}}
  - {name: node-mvp, use: exec, exec: {command: [node, %[1]q, mvp], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: node-broken, use: exec, exec: {command: [node, %[1]q, broken], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: node-mvp-no-time, use: exec, exec: {command: [node, %[1]q, mvp], env: {WORKER_ID: "{worker}"}, ready: ready, time: off}}
  - {name: garbage, use: exec, exec: {command: [node, "{gens}/twist.js", garbage], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: extra-line, use: exec, exec: {command: [node, "{gens}/twist.js", extra], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: http-garbage, use: exec, exec: {command: [node, "{gens}/twist.js", http], protocol: http, url: "http://127.0.0.1:{port}/ids?count={n}", format: json-array, time_url: "http://127.0.0.1:{port}/time", env: {WORKER_ID: "{worker}", PORT: "{port}"}}}
`, filepath.Join(js, "stdio.js")), []truthCase{
		{"c-check", harness.Pass, ""},
		{"c-nocheck", harness.Fail, "dups"},
		{"c-static", harness.Unknown, "statically linked"},
		{"bash", harness.Unknown, "the process reads offset"},
		{"bash-no-time", harness.Unknown, "carry the unfaulted time"},
		{"go-behind-sh", harness.Unknown, "a Go binary"},
		{"go-overlay", harness.Pass, ""},
		{"go-overlay-nocheck", harness.Fail, "dups"},
		{"python-check", harness.Pass, ""},
		{"python-nocheck", harness.Fail, "dups"},
		{"node-mvp", harness.Pass, ""},
		{"node-broken", harness.Fail, "dups"},
		// Without its clock reading the MVP refuses through the 50 ms
		// rewind and then issues IDs on the faulted clock: they carry it.
		{"node-mvp-no-time", harness.Pass, "carry the faulted time"},
		{"garbage", harness.Unknown, "protocol violation"},
		{"extra-line", harness.Unknown, "more lines than asked"},
		{"http-garbage", harness.Unknown, "protocol violation"},
	})
}

// TestExecTruthSlowStart: a restart and a clone whose process takes 2 s
// to be ready (a wrapper that sleeps, an interpreter behind a slow shim)
// never serve inside a 1.2 s run: unknown, never a pass.
func TestExecTruthSlowStart(t *testing.T) {
	runTruth(t, `
name: truth-slow-start
mode: real
duration: 1200ms
nodes: [{name: a, worker: 1, epoch: 2024-01-01T00:00:00Z}]
load: {per: node, clients: 2, batch: 10, rate: 300/s}
faults:
  - {at: 400ms, kind: restart, nodes: [a]}
invariants:
  - duplicates == 0
  - order_violations == 0
  - restart_violations == 0
targets:
  - {name: slow-restart, use: exec, exec: {command: [sh, -c, "sleep 2; exec {bins}/gen-check"], env: {WORKER_ID: "{worker}"}, ready: ready}}
  - {name: fast-restart, use: exec, exec: {command: ["{bins}/gen-check"], env: {WORKER_ID: "{worker}"}, ready: ready}}
`, []truthCase{
		{"slow-restart", harness.Unknown, "never served"},
		{"fast-restart", harness.Pass, ""},
	})
	runTruth(t, `
name: truth-slow-clone
mode: real
duration: 1200ms
nodes: [{name: a, worker: 1, epoch: 2024-01-01T00:00:00Z}]
load: {per: node, clients: 2, batch: 10, rate: 300/s}
faults:
  - {at: 400ms, kind: clone, nodes: [a]}
invariants:
  - order_violations == 0
targets:
  - {name: slow-clone, use: exec, exec: {command: [sh, -c, "sleep 2; exec {bins}/gen-check"], env: {WORKER_ID: "{worker}"}, ready: ready}}
`, []truthCase{
		// The clone may answer a few calls once ready, after its
		// source's clients ended with the run: then it never shared a
		// tick with its source.
		{"slow-clone", harness.Unknown, "never served|never issued IDs in the same tick"},
	})
}
