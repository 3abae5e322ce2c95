package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/server"
)

// runMainEnv makes the test binary run main instead of the tests: the
// servers' child process, and the pinned run, are this binary.
const runMainEnv = "LOADBENCH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	selfCommand = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1")
		return cmd, nil
	}
	os.Exit(m.Run())
}

func TestLoadbench(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--duration", "200ms", "--no-pg", "--workers", "4", "--batch", "256", "--rounds", "2"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errb)
	}
	for _, want := range []string{"node GET /v1/id (4 conns)", "reference: bare net/http, constant ID", "reference: bare fasthttp, constant ID",
		"node GET /v1/ids?count=256, text", "node GET /v1/ids?count=256, JSON", "constant 256 IDs, JSON", "in-process",
		"reference: node waiting in a yield loop, JSON", "the yield-loop node's",
		"single-ID node / fasthttp:", "single-ID node / net/http:", "batch text:", "batch JSON:", "load average", "µs of server CPU per request"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"--duration", "0s"}, &out, &errb); code != exitInvalid {
		t.Fatalf("bad duration: exit %d", code)
	}
	if code := run(context.Background(), []string{"--rounds", "51"}, &out, &errb); code != exitInvalid {
		t.Fatalf("--rounds 51: exit %d", code)
	}
}

// firstAllowedCPU returns the first CPU this process may run on (from
// /proc/self/status), skipping the test where that is unknown.
func firstAllowedCPU(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("CPU affinity unknown here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if list, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			first, _, _ := strings.Cut(strings.TrimSpace(list), ",")
			first, _, _ = strings.Cut(first, "-")
			return first
		}
	}
	t.Skip("no Cpus_allowed_list in /proc/self/status")
	return ""
}

// TestLoadbenchJSONAndPinning runs one round pinned (servers and client
// on the first CPU this process may use) and checks the JSON: every row
// measured, the servers' CPU per request known, nothing failed.
func TestLoadbenchJSONAndPinning(t *testing.T) {
	cpu := firstAllowedCPU(t)
	// In a child process: pinning binds every thread of the process.
	cmd, err := selfCommand("--duration", "200ms", "--no-pg", "--workers", "2", "--batch", "64",
		"--pin-server", cpu, "--pin-client", cpu, "--json", "--phases", "single,batch")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errb)
	}
	var res struct {
		Setup string
		Rows  []benchRow
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Setup, "servers in one process, GOMAXPROCS 1, pinned to CPU "+cpu) || !strings.Contains(res.Setup, "client GOMAXPROCS 1, pinned to CPU "+cpu) {
		t.Errorf("setup %q", res.Setup)
	}
	if len(res.Rows) != 9 {
		t.Fatalf("%d rows, want 9: %s", len(res.Rows), &out)
	}
	for _, r := range res.Rows {
		s := r.Samples[0]
		if s.Requests == 0 || s.Failures != 0 || s.CPUPerReq <= 0 || s.CPUPerReq > time.Second {
			t.Errorf("%s: %+v", r.Name, s)
		}
	}
}

// TestLoadbenchCatchesDuplicates points loadbench at a "node" that
// answers the same ID every time: the run fails, counting duplicates.
func TestLoadbenchCatchesDuplicates(t *testing.T) {
	g, err := generator.New(generator.Settings{Node: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	id, _ := g.Next()
	info := server.Info{Node: 1, Layout: server.NewLayoutInfo(g.Settings().Layout), Policy: "wait", MaxWait: "1s", MaxLead: "1s", MaxBatch: 4096}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/info" {
			json.NewEncoder(w).Encode(info)
			return
		}
		w.Write([]byte(id.String() + "\n"))
	}))
	defer ts.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--duration", "200ms", "--no-pg", "--workers", "2", "--phases", "single", "--json", "--target", ts.URL}, &out, &errb)
	var res struct{ Rows []benchRow }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s %s", err, &out, &errb)
	}
	if code != exitFailure || len(res.Rows) == 0 || res.Rows[0].Samples[0].Duplicates == 0 {
		t.Fatalf("exit %d, want %d with duplicates; stdout:\n%s\nstderr:\n%s", code, exitFailure, &out, &errb)
	}
}

// TestMedianInterval checks the median's interval against the sign test's
// known ranks: the whole range at 93.75% for 5 values, ranks 4 and 12 at
// 96.5% for 15, none for one value.
func TestMedianInterval(t *testing.T) {
	seq := func(n int) []float64 {
		vs := make([]float64, n)
		for i := range vs {
			vs[i] = float64(n - i) // reversed: the function sorts
		}
		return vs
	}
	for _, c := range []struct {
		n              int
		med, lo, hi    float64
		confLo, confHi float64
	}{
		{1, 1, 1, 1, 0, 0},
		{5, 3, 1, 5, 0.937, 0.938},
		{6, 3.5, 1, 6, 0.968, 0.969},
		{15, 8, 4, 12, 0.964, 0.965},
		{50, 25.5, 18, 33, 0.967, 0.968},
	} {
		med, lo, hi, conf := medianInterval(seq(c.n))
		if med != c.med || lo != c.lo || hi != c.hi || conf < c.confLo || conf > c.confHi {
			t.Errorf("%d values: median %v in %v-%v at %.4f; want %v in %v-%v at %v-%v", c.n, med, lo, hi, conf, c.med, c.lo, c.hi, c.confLo, c.confHi)
		}
	}
	if v := levelVerdict(0.97, 1.04, "worse"); v != "level" {
		t.Errorf("0.97-1.04: %s, want level", v)
	}
	if v := levelVerdict(1.01, 1.04, "worse"); v != "worse" {
		t.Errorf("1.01-1.04: %s, want worse", v)
	}
	if v := levelVerdict(0.9, 0.99, "worse"); v != "better" {
		t.Errorf("0.90-0.99: %s, want better", v)
	}
}
