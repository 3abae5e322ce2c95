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
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/harness/target/exec"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify"
)

// spec returns a node spec running x.
func spec(x *scenario.Exec) target.NodeSpec {
	return target.NodeSpec{Name: "a", Host: "a", Worker: 1, Layout: generator.DefaultLayout(), Exec: x}
}

// block returns an exec block with the parser's defaults.
func block(cmd ...string) *scenario.Exec {
	return &scenario.Exec{Command: cmd, Dir: ".", Protocol: scenario.ProtocolStdio, Request: "{n}", Format: scenario.FormatLines,
		ID: scenario.IDDecimal, Clock: scenario.ClockFaketime, Time: scenario.TimeAuto, TimeRequest: "time", Timeout: 2 * time.Second, StartTimeout: 5 * time.Second, MaxBatch: 100}
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

// TestWideIDs: a node whose exec block says id: uuidv7 answers 128-bit
// IDs through IssueWide, parsed in one step; a call for another kind fails
// with ErrUnsupported, and an answer of the wrong version is a protocol
// violation naming the value, after which the process no longer serves.
func TestWideIDs(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "gen.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho ready\nread n\necho 01890a5d-ac96-774b-bcce-b302099a8057\necho 01890A5DAC96774BBCCEB302099A8058\nread n\necho 01890a5d-ac96-474b-bcce-b302099a8059\nread n\n"), 0o755)
	x := block(script)
	x.Clock, x.Ready, x.ID = scenario.ClockNone, "ready", "uuidv7"
	sp := spec(x)
	if k := exec.Registered().IDKind(sp); k != verify.KindUUIDv7 {
		t.Fatalf("IDKind = %s, want uuidv7", k)
	}
	nd, err := exec.Registered().Start(context.Background(), sp, target.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	n := nd.(target.WideNode)
	ctx := context.Background()
	if _, err := n.Issue(ctx, make([]generator.ID, 1)); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("Issue on a uuidv7 node = %v, want ErrUnsupported", err)
	}
	if _, err := n.IssueStrings(ctx, make([]string, 1)); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("IssueStrings on a uuidv7 node = %v, want ErrUnsupported", err)
	}
	dst := make([]verify.ID128, 2)
	k, err := n.IssueWide(ctx, dst)
	if err != nil || k != 2 {
		t.Fatalf("IssueWide = %d, %v", k, err)
	}
	if got := (verify.Value{Kind: verify.KindUUIDv7, Bits: dst[1]}).String(); got != "01890a5d-ac96-774b-bcce-b302099a8058" {
		t.Fatalf("second UUID %s, want the canonical form of 01890A5DAC96774BBCCEB302099A8058", got)
	}
	if dst[0].UnixMilli() != 0x01890a5dac96 {
		t.Fatalf("embedded ms %#x, want 0x01890a5dac96", dst[0].UnixMilli())
	}
	k, err = n.IssueWide(ctx, dst[:1])
	if k != 0 || !errors.Is(err, target.ErrProtocol) || !strings.Contains(err.Error(), "version 4, want 7") || !strings.Contains(err.Error(), "01890a5d-ac96-474b") {
		t.Fatalf("IssueWide of a UUIDv4 on a uuidv7 node = %d, %v; want a protocol violation naming the value and the version", k, err)
	}
	if vs := nd.(target.Witness).Violations(0); len(vs) != 1 || !strings.Contains(vs[0].Detail, "line 1 of the answer") {
		t.Fatalf("Violations = %+v, want the one violation", vs)
	}
	if _, err := n.IssueWide(ctx, dst[:1]); !errors.Is(err, target.ErrStopped) || !strings.Contains(err.Error(), "protocol violation") {
		t.Fatalf("IssueWide after a violation = %v, want ErrStopped naming the violation", err)
	}
}

// TestParseID: each kind's answer parsed strictly, to the Value whose text
// is canonical; what is not an ID of the kind is an error naming it.
func TestParseID(t *testing.T) {
	for _, c := range []struct {
		kind   verify.Kind
		in     string
		want   string // canonical text; "" for an error
		errHas string
	}{
		{verify.KindSnowflake, "1234", "1234", ""},
		{verify.KindSnowflake, "-1", "", `"-1"`},
		{verify.KindSnowflake, "01", "", `"01"`},
		{verify.KindUUIDv7, "01890A5D-AC96-774B-BCCE-B302099A8057", "01890a5d-ac96-774b-bcce-b302099a8057", ""},
		{verify.KindUUIDv7, "{01890a5d-ac96-774b-bcce-b302099a8057}", "", "38 bytes"},
		{verify.KindUUIDv4, "9b2c6a4e-7d0f-4c55-9f1e-0d6e3b1c2a47", "9b2c6a4e-7d0f-4c55-9f1e-0d6e3b1c2a47", ""},
		{verify.KindUUIDv4, "01890a5d-ac96-774b-bcce-b302099a8057", "", "version 7, want 4"},
		{verify.KindUUID, "01890a5d-ac96-174b-bcce-b302099a8057", "01890a5d-ac96-174b-bcce-b302099a8057", ""},
		{verify.KindULID, "01arz3ndektsv4rrffq69g5fav", "01ARZ3NDEKTSV4RRFFQ69G5FAV", ""},
		{verify.KindULID, "81ARZ3NDEKTSV4RRFFQ69G5FAV", "", "exceeds '7'"},
		{verify.KindString, "order-42", "order-42", ""},
		{verify.KindString, "", "", "empty"},
		{verify.KindString, "a\tb", "", "control character"},
	} {
		v, err := exec.ParseID(c.kind, c.in)
		switch {
		case c.want == "" && (err == nil || !errors.Is(err, verify.ErrInvalidID) || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("ParseID(%s, %q) = %v, %v; want an ErrInvalidID containing %q", c.kind, c.in, v, err, c.errHas)
		case c.want != "" && (err != nil || v.Kind != c.kind || v.String() != c.want):
			t.Errorf("ParseID(%s, %q) = %v (%s), %v; want %s", c.kind, c.in, v, v.Kind, err, c.want)
		}
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

// TestNodeUUIDUnderStep: real Node.js UUIDv7 libraries through the whole
// harness (a real-mode run) under a 1 s clock step back: uuid's v7()
// keeps the monotonic order it promises within a process, and its IDs'
// embedded time lags reference time by the step (the step reached the
// process: the UUIDs' decoded time shows it, as the probe does); the same
// library handed the time (its monotonic state bypassed) is caught out of
// order. No duplicate either way: UUIDv7s carry 62 random bits.
func TestNodeUUIDUnderStep(t *testing.T) {
	testenv.LookPath(t, "node")
	testenv.LookPath(t, "perl")
	js, _ := filepath.Abs("../../../bench/js")
	if _, err := os.Stat(filepath.Join(js, "node_modules", "uuid")); err != nil {
		testenv.Missing(t, "bench/js/node_modules missing: run npm ci in bench/js")
	}
	if _, err := faketime.Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	s, err := scenario.Parse(filepath.Join(js, "uuid-step.yaml"), []byte(`
name: uuid-step
mode: real
duration: 1500ms
nodes: [{name: a, worker: 1}]
load: {per: node, clients: 2, batch: 10, rate: 200/s}
faults:
  - {at: 400ms, kind: step, by: -1s, nodes: [a]}
invariants:
  - duplicates == 0
  - order_violations == 0
targets:
  - name: uuid-v7
    use: exec
    exec: {command: [node, stdio.js, uuid-v7], env: {WORKER_ID: "{worker}"}, ready: ready, id: uuidv7}
  - name: uuid-v7-stateless
    use: exec
    exec: {command: [node, stdio.js, uuid-v7-stateless], env: {WORKER_ID: "{worker}"}, ready: ready, id: uuidv7}
expect:
  uuid-v7-stateless: {order_violations: "> 0"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Prepare([]*scenario.Scenario{s}, harness.Options{}); err != nil {
		t.Fatal(err)
	}
	for i, tg := range s.Targets {
		res := harness.RunOne(context.Background(), s, tg, harness.Options{})
		f := res.Figures
		t.Logf("%s: %s: %d IDs, %d duplicates, %d order violations, max lag %s, faults %+v", tg.Name, res.Verdict, f.IDs, f.Duplicates, f.OrderViolations, f.MaxLag, res.Faults)
		if res.Error != "" || res.IDKind != "uuidv7" || f.IDs == 0 || len(res.Faults) != 1 || !res.Faults[0].Confirmed {
			t.Fatalf("%s: error %q, kind %q, %d IDs, faults %+v: want a uuidv7 run with IDs and the step confirmed", tg.Name, res.Error, res.IDKind, f.IDs, res.Faults)
		}
		if f.Duplicates != 0 {
			t.Errorf("%s: %d duplicates among random UUIDv7s", tg.Name, f.Duplicates)
		}
		if i == 0 {
			if res.Verdict != harness.Pass || f.OrderViolations != 0 {
				t.Errorf("uuid-v7: verdict %s, %d order violations: its promised monotonic order broke", res.Verdict, f.OrderViolations)
			}
			if f.MaxLag < harness.Duration(700*time.Millisecond) {
				t.Errorf("uuid-v7: max lag %s after a 1 s step back: the step did not show in the UUIDs' time", f.MaxLag)
			}
		} else if res.Verdict != harness.Pass || res.ControlVerdict() != harness.Caught || f.OrderViolations == 0 {
			t.Errorf("uuid-v7-stateless: %s (%s), %d order violations: the harness did not catch it", res.Verdict, res.ControlVerdict(), f.OrderViolations)
		}
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
}

// FuzzParseResponse: no answer makes the parsers panic, and every ID
// ParseID accepts, of any kind, parses again from its canonical text to
// the same Value.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{"1\n2\n", `["1",2]`, `{"id":"3"}`, `{"id":[4]}`, "", "\xff",
		"01890a5d-ac96-774b-bcce-b302099a8057\n", `["01ARZ3NDEKTSV4RRFFQ69G5FAV"]`, `{"id":"order-42"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, format := range []string{scenario.FormatLines, scenario.FormatJSONArray, scenario.FormatJSONField} {
			ids, err := exec.ParseResponse(format, "id", []byte(body))
			if err != nil {
				continue
			}
			for _, s := range ids {
				for _, k := range verify.Kinds() {
					v, err := exec.ParseID(k, s)
					if err != nil {
						continue
					}
					if again, err := exec.ParseID(k, v.String()); err != nil || again != v {
						t.Fatalf("ParseID(%s, %q) = %v; its text %q parses to %v, %v", k, s, v, v.String(), again, err)
					}
				}
			}
		}
	})
}
