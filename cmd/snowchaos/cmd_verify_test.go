package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// parseReport reads the JSON report that ends verify's output.
func parseReport(t *testing.T, out string) verifyReport {
	t.Helper()
	i := strings.Index(out, "{")
	var r verifyReport
	if i < 0 || json.Unmarshal([]byte(out[i:]), &r) != nil {
		t.Fatalf("no JSON report in:\n%s", out)
	}
	return r
}

func runVerifyStdin(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := runVerifyIn(context.Background(), args, strings.NewReader(input), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVerifyStdinExitCodes(t *testing.T) {
	l := generator.DefaultLayout()
	id := func(tick, node, seq int64) string { v, _ := l.Compose(tick, node, seq); return v.String() }
	clean := id(10, 1, 0) + "\n" + `["` + id(10, 1, 1) + `","` + id(11, 1, 0) + `"]` + "\n"
	for _, c := range []struct {
		name, input string
		args        []string
		code        int
		want        []string
	}{
		{"clean", clean, nil, exitOK, []string{"3 IDs (3 unique)", "verdict: ok (exit 0)"}},
		{"duplicate", clean + id(10, 1, 1) + "\n", nil, exitFailure, []string{"1 duplicates", "duplicate " + id(10, 1, 1) + ": first from node-1#0, again from node-1#0", "verdict: FAIL"}},
		{"order", clean + id(10, 1, 5) + "\n", []string{"--stream", "tool"}, exitFailure, []string{"1 order violations in 1 streams", "order violation in stream 1: " + id(10, 1, 5) + " after " + id(11, 1, 0)}},
		{"bad line", clean + "12x\n", nil, exitInvalid, []string{"1 bad lines", `bad input: sink: line 3: verify: invalid ID`, `"12x"`, "verdict: INVALID"}},
		{"nothing", "", nil, exitInvalid, []string{"expected at least 1 IDs, received 0", "verdict: INVALID"}},
		{"nothing expected", "", []string{"--expect-ids", "0"}, exitOK, []string{"0 IDs"}},
		{"too few", clean, []string{"--expect-ids", "4"}, exitInvalid, []string{"expected at least 4 IDs, received 3"}},
		{"finding beats bad input", "1\n1\nx\n", nil, exitFailure, []string{"verdict: FAIL"}},
		{"ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAV\n01arz3ndektsv4rrffq69g5fav\n", []string{"--kind", "ulid"}, exitFailure, []string{"kind ulid", "duplicate 01ARZ3NDEKTSV4RRFFQ69G5FAV: first from sink#0"}},
		{"discord", "175928847299117063\n", []string{"--layout", "41/5+5/12", "--epoch", "2015-01-01T00:00:00Z"}, exitOK, []string{"1 IDs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runVerifyStdin(t, c.input, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestVerifyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "uuid7"}, `unknown ID kind "uuid7"`},
		{[]string{"--max-line", "10"}, "--max-line 10"},
		{[]string{"--max-body", "1"}, "--max-body 1"},
		{[]string{"--max-requests", "0"}, "--max-requests 0: want 1..4096"},
		{[]string{"--max-conns", "-1"}, "--max-conns -1"},
		{[]string{"--read-header-timeout", "0s"}, "--read-header-timeout 0s"},
		{[]string{"--request-timeout", "11m"}, "--request-timeout 11m0s: want above 0, at most 10m0s"},
		{[]string{"--idle-timeout", "2h"}, "--idle-timeout 2h0m0s"},
		{[]string{"--max-details", "-1"}, "--max-details"},
		{[]string{"--duration", "1s"}, "--duration needs --listen"},
		{[]string{"--listen", "127.0.0.1:0", "--stream", "x"}, "label requests"},
		{[]string{"--layout", "40/10/10"}, "--layout"},
		{[]string{"--epoch", "yesterday"}, "--epoch"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--listen", "256.0.0.1:0"}, "--listen"},
	} {
		code, _, errs := runVerifyStdin(t, "", c.args...)
		if code != exitInvalid || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, _ := runVerifyStdin(t, "", "-h"); code != exitOK {
		t.Errorf("-h: exit %d", code)
	}
}

// startVerify runs "verify args..." in process; it returns the sink's base
// URL, its stdout (the report arrives there at the end) and a stop
// function returning the exit code. The address is read from stdout, or
// from stderr with --json.
func startVerify(t *testing.T, stdin io.Reader, args ...string) (string, *testenv.SyncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &testenv.SyncBuffer{}, &testenv.SyncBuffer{}
	code := make(chan int, 1)
	go func() { code <- runVerifyIn(ctx, args, stdin, out, errb) }()
	var addr string
	notes := out
	if slices.Contains(args, "--json") {
		notes = errb
	}
	testenv.WaitFor(t, 30*time.Second, func() bool {
		for _, l := range strings.Split(notes.String(), "\n") {
			if a, ok := strings.CutPrefix(l, "listening on "); ok {
				addr = a
				return true
			}
		}
		return false
	}, "verify did not print its address; stderr:\n%s", errb)
	rc, stopped := 0, false
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case rc = <-code:
			case <-time.After(time.Minute):
				t.Fatal("verify did not stop within a minute")
			}
		}
		return rc
	}
	t.Cleanup(func() { stop() })
	return "http://" + addr, out, stop
}

func TestVerifyHTTP(t *testing.T) {
	base, out, _ := startVerify(t, nil, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--expect-ids", "2")
	post := func(q, body string) int {
		resp, err := http.Post(base+"/v1/ids"+q, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("?stream=a", "5\n6\n"); c != 200 {
		t.Fatalf("post: %d", c)
	}
	if c := post("?stream=a", "4\n"); c != 200 { // an order violation is data, not a bad request
		t.Fatalf("post: %d", c)
	}
	// /metrics on the main listener and on --metrics-listen.
	var metricsURL string
	for _, l := range strings.Split(out.String(), "\n") {
		if a, ok := strings.CutPrefix(l, "metrics listening on "); ok {
			metricsURL = "http://" + a + "/metrics"
		}
	}
	for _, u := range []string{base + "/metrics", metricsURL} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `snowchaos_verify_ids_total{kind="snowflake"} 3`) ||
			!strings.Contains(string(b), `snowchaos_verify_order_violations_total{kind="snowflake"} 1`) {
			t.Fatalf("%s:\n%s", u, b)
		}
	}
	// A load tool's script ends the run with POST /v1/stop.
	resp, err := http.Post(base+"/v1/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testenv.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "verdict: FAIL (exit 1)") }, "no report after /v1/stop:\n%s", out)
	if !strings.Contains(out.String(), "kind snowflake: 3 IDs (3 unique) in 2 batches: 0 duplicates, 1 order violations in 1 streams") {
		t.Fatalf("report:\n%s", out)
	}
}

func TestVerifyStdinInterrupted(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testenv.SyncBuffer
	code := make(chan int, 1)
	go func() { code <- runVerifyIn(ctx, nil, pr, &out, &errb) }()
	if _, err := pw.Write([]byte("1\n2\n")); err != nil {
		t.Fatal(err)
	}
	cancel() // standard input stays open: the signal must still end the run
	select {
	case c := <-code:
		if c != exitInvalid || !strings.Contains(errb.String(), "stopped before standard input ended") {
			t.Fatalf("exit %d\n%s\n%s", c, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("verify did not stop on its context while standard input was open")
	}
}

func TestVerifyDuration(t *testing.T) {
	start := time.Now()
	code, out, errs := runVerifyStdin(t, "", "--listen", "127.0.0.1:0", "--duration", "200ms", "--expect-ids", "0")
	if code != exitOK || !strings.Contains(out, "verdict: ok") || time.Since(start) > 30*time.Second {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}

// jsonOnly decodes out as exactly one JSON report and nothing else.
func jsonOnly(out string) (verifyReport, error) {
	var r verifyReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, err
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || dec.More() {
		return r, fmt.Errorf("text after the JSON report: %q", rest)
	}
	return r, nil
}

// TestVerifyJSONStdoutIsJSONOnly: with --json, standard output holds the
// JSON report and nothing else (the addresses, progress and warnings go
// to standard error), over HTTP and on standard input alike.
func TestVerifyJSONStdoutIsJSONOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &testenv.SyncBuffer{}, &testenv.SyncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- runVerifyIn(ctx, []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--json", "--progress", "5ms"}, nil, out, errb)
	}()
	var base string
	testenv.WaitFor(t, 30*time.Second, func() bool {
		for _, l := range strings.Split(out.String()+"\n"+errb.String(), "\n") {
			if a, ok := strings.CutPrefix(l, "listening on "); ok {
				base = "http://" + a
				return true
			}
		}
		return false
	}, "verify printed no address; stdout:\n%s\nstderr:\n%s", out, errb)
	resp, err := http.Post(base+"/v1/ids", "text/plain", strings.NewReader("5\nx\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testenv.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(errb.String(), "snowchaos verify: 1 IDs") }, "no progress on stderr:\n%s", errb)
	if resp, err = http.Post(base+"/v1/stop", "", nil); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case c := <-code:
		if c != exitInvalid {
			t.Fatalf("exit %d", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("verify did not stop")
	}
	r, err := jsonOnly(out.String())
	if err != nil || r.IDs != 1 || r.BadLines != 1 || len(r.Errors) != 1 {
		t.Fatalf("stdout is not the JSON report alone (%v):\n%s", err, out)
	}
	for _, w := range []string{"metrics listening on 127.0.0.1:", "listening on 127.0.0.1:"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, errb)
		}
	}

	// Standard input, with a finding and a bad line.
	c, stdout, stderr := runVerifyStdin(t, "7\n7\n\xbe\n", "--json", "--progress", "1ms")
	if r, err := jsonOnly(stdout); c != exitFailure || err != nil || r.Duplicates != 1 || r.BadLines != 1 {
		t.Fatalf("exit %d, %v:\nstdout:\n%s\nstderr:\n%s", c, err, stdout, stderr)
	}
}

// TestVerifyBodyCutReportsWhatWasVerified: a body that stops part way
// (chunked past --max-body; cut off by its client) is verified up to the
// line where it stopped, answered with those counts and that line and
// byte, and makes the run exit 2.
func TestVerifyBodyCutReportsWhatWasVerified(t *testing.T) {
	base, out, stop := startVerify(t, nil, "--listen", "127.0.0.1:0", "--max-body", "1024", "--expect-ids", "0")
	var body strings.Builder
	for i := range 600 {
		fmt.Fprintf(&body, "%d\n", 1000+i) // 5 bytes a line: 1,024 bytes are 204 lines and 4 bytes
	}
	req, _ := http.NewRequest("POST", base+"/v1/ids", strings.NewReader(body.String()))
	req.ContentLength = -1 // chunked: the size shows only while reading
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != 413 || m["ids"] != 204.0 || m["line"] != 205.0 || m["byte"] != 1024.0 {
		t.Fatalf("%d %v, want 413 with 204 IDs verified and line 205, byte 1024 named", resp.StatusCode, m)
	}

	// A client that announces 100 bytes, sends 3 lines and a half, and
	// goes away.
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n5000\n5001\n5002\n50")
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c) // the answer, once the sink has read what came
	c.Close()

	if code := stop(); code != exitInvalid {
		t.Fatalf("exit %d, want 2 (bodies not wholly verified)\n%s", code, out)
	}
	for _, w := range []string{"kind snowflake: 207 IDs (207 unique) in 2 batches", "2 batches stopped part way",
		"incomplete: sink: batch 1: stopped at line 205, byte 1024: http: request body too large; lines 1 to 204 were verified, line 205 and after were not",
		"incomplete: sink: batch 2: stopped at line 4, byte 17: unexpected EOF; lines 1 to 3 were verified, line 4 and after were not"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}
