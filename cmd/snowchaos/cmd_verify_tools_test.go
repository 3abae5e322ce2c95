package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify"
)

// Real load tools drive snowchaos serve and forward every body they
// receive to snowchaos verify; the sink's counts must equal, exactly, those
// of an in-process Verifier fed the same IDs (the tools' tee files), the
// tools' own counts, and the node's issued counter. .ci/run installs the
// tools (npm ci in loadtoolsDir, Debian's wrk).

// loadtoolsDir holds the forwarding scripts and the pinned autocannon.
const loadtoolsDir = "../../verify/sink/testdata/loadtools"

// requireAutocannon returns node's path, or skips (fails in CI) when node
// or the installed autocannon is missing.
func requireAutocannon(t *testing.T) string {
	t.Helper()
	node := testenv.LookPath(t, "node")
	if _, err := os.Stat(filepath.Join(loadtoolsDir, "node_modules", "autocannon", "package.json")); err != nil {
		testenv.Missing(t, "autocannon is not installed: run npm ci in %s (%v)", loadtoolsDir, err)
	}
	return node
}

// acSummary is autocannon-forward.js's closing line.
type acSummary struct {
	Requests, Ok2xx, Non2xx, Errors, Timeouts int
	Streams, Forwarded, Posts, SinkRefused    int
	SinkErrors                                []string
}

// runAutocannon runs autocannon-forward.js against target, forwarding to
// sink, and returns its summary.
func runAutocannon(t *testing.T, node, target, sink, tee, prefix string, connections, amount int) acSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, _ := filepath.Abs(filepath.Join(loadtoolsDir, "autocannon-forward.js"))
	cmd := exec.CommandContext(ctx, node, script, "--target", target+"/v1/id", "--sink", sink, "--tee", tee, "--prefix", prefix,
		"--connections", strconv.Itoa(connections), "--amount", strconv.Itoa(amount))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("autocannon-forward: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var s acSummary
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &s); err != nil {
		t.Fatalf("autocannon-forward summary: %v\n%s", err, stdout.String())
	}
	return s
}

// reference feeds tee files ("stream\tID" lines, or bare ID lines) to an
// in-process Verifier, one call per ID, an issuer per node field, a stream
// per label; it parses with generator.ParseID, not the sink's parser.
func reference(t *testing.T, files ...string) verify.Result {
	t.Helper()
	l := generator.DefaultLayout()
	v := verify.New(verify.Config{})
	issuers := map[int64]verify.IssuerID{}
	streams := map[string]uint64{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			label, text, ok := strings.Cut(sc.Text(), "\t")
			if !ok {
				label, text = "", label
			}
			id, err := generator.ParseID(strings.TrimSpace(text))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			node := l.Decode(id).Node
			is, ok := issuers[node]
			if !ok {
				is = v.Issuer(fmt.Sprint("node-", node), 0, node)
				issuers[node] = is
			}
			var st uint64
			if label != "" {
				if st = streams[label]; st == 0 {
					st = uint64(len(streams) + 1)
					streams[label] = st
				}
			}
			v.Observe(verify.Observation{Issuer: is, Stream: st, IDs: []generator.ID{id}})
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return v.Result()
}

// issued reads snowflake_ids_issued_total from a node's /metrics.
func issued(t *testing.T, base string) uint64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^snowflake_ids_issued_total(?:\{[^}]*\})? (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no snowflake_ids_issued_total in /metrics:\n%s", b)
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return n
}

// stopVerify ends a sink started by startVerify and returns its report.
func stopVerify(t *testing.T, stop func() int, out *testenv.SyncBuffer) (int, verifyReport) {
	t.Helper()
	code := stop()
	return code, parseReport(t, out.String())
}

func TestAutocannonThroughSink(t *testing.T) {
	node := requireAutocannon(t)
	const connections, amount = 8, 10000
	serveURL, _, _ := startServe(t, "--listen", "127.0.0.1:0", "--worker", "5")
	sinkURL, out, stop := startVerify(t, nil, "--listen", "127.0.0.1:0", "--json", "--expect-ids", strconv.Itoa(amount))
	tee := filepath.Join(t.TempDir(), "tee.tsv")

	s := runAutocannon(t, node, serveURL, sinkURL, tee, "c", connections, amount)
	code, rep := stopVerify(t, stop, out)
	ref := reference(t, tee)
	t.Logf("autocannon %+v; sink %+v; reference IDs %d duplicates %d order %d", s, rep, ref.IDs, ref.Duplicates, ref.OrderViolations)

	if s.Ok2xx != amount || s.Non2xx != 0 || s.Errors != 0 || s.Forwarded != amount || s.SinkRefused != 0 {
		t.Fatalf("autocannon: %+v", s)
	}
	if s.Streams != connections || ref.Streams != connections {
		t.Fatalf("streams: forwarder %d, reference %d, want one per connection (%d)", s.Streams, ref.Streams, connections)
	}
	// Exact agreement: the sink, the in-process Verifier, autocannon and the node.
	if rep.IDs != amount || ref.IDs != amount || issued(t, serveURL) != amount {
		t.Fatalf("IDs: sink %d, reference %d, node issued %d, autocannon %d", rep.IDs, ref.IDs, issued(t, serveURL), amount)
	}
	if rep.Duplicates != ref.Duplicates || rep.OrderViolations != ref.OrderViolations || rep.Duplicates != 0 || rep.OrderViolations != 0 {
		t.Fatalf("findings: sink %d dups %d order, reference %d dups %d order", rep.Duplicates, rep.OrderViolations, ref.Duplicates, ref.OrderViolations)
	}
	if code != exitOK || rep.BadLines != 0 || rep.Batches != s.Posts {
		t.Fatalf("exit %d, report %+v, posts %d", code, rep, s.Posts)
	}
}

// TestAutocannonCatchesClones is the negative control: two nodes started
// with the same worker ID (a cloned VM) issue the same IDs; the sink must
// find them, exactly as many as the in-process Verifier, and exit 1.
func TestAutocannonCatchesClones(t *testing.T) {
	node := requireAutocannon(t)
	const connections, amount = 4, 5000
	a, _, _ := startServe(t, "--listen", "127.0.0.1:0", "--worker", "7")
	b, _, _ := startServe(t, "--listen", "127.0.0.1:0", "--worker", "7")
	sinkURL, out, stop := startVerify(t, nil, "--listen", "127.0.0.1:0", "--json", "--max-details", "5")
	dir := t.TempDir()
	teeA, teeB := filepath.Join(dir, "a.tsv"), filepath.Join(dir, "b.tsv")
	done := make(chan acSummary, 1)
	go func() { done <- runAutocannon(t, node, b, sinkURL, teeB, "b", connections, amount) }()
	sa := runAutocannon(t, node, a, sinkURL, teeA, "a", connections, amount)
	sb := <-done
	code, rep := stopVerify(t, stop, out)
	ref := reference(t, teeA, teeB)
	t.Logf("sink %+v; reference IDs %d duplicates %d", rep, ref.IDs, ref.Duplicates)

	if sa.Forwarded+sb.Forwarded != 2*amount || rep.IDs != 2*amount || ref.IDs != 2*amount {
		t.Fatalf("IDs: forwarded %d+%d, sink %d, reference %d", sa.Forwarded, sb.Forwarded, rep.IDs, ref.IDs)
	}
	if rep.Duplicates == 0 {
		t.Fatal("two nodes with one worker ID and no duplicate found: the control did not run as intended")
	}
	if rep.Duplicates != ref.Duplicates || rep.Unique != ref.Unique {
		t.Fatalf("duplicates: sink %d (unique %d), reference %d (unique %d)", rep.Duplicates, rep.Unique, ref.Duplicates, ref.Unique)
	}
	if code != exitFailure || rep.Verdict != "FAIL" || len(rep.DuplicateIDs) != 5 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}

// TestWrkThroughSink: wrk's Lua script writes every body to a FIFO that
// snowchaos verify reads as its standard input, live, and to tee files.
func TestWrkThroughSink(t *testing.T) {
	wrk := testenv.LookPath(t, "wrk")
	serveURL, _, _ := startServe(t, "--listen", "127.0.0.1:0", "--worker", "6")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ids.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The sink opens the FIFO for reading (which waits for a writer) and
	// reads it to the end, when every wrk thread has exited.
	type result struct {
		code     int
		out, err string
	}
	res := make(chan result, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			res <- result{code: -1, err: err.Error()}
			return
		}
		defer f.Close()
		var o, e strings.Builder
		c := runVerifyIn(context.Background(), []string{"--json", "--expect-ids", "1000"}, f, &o, &e)
		res <- result{c, o.String(), e.String()}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, _ := filepath.Abs(filepath.Join(loadtoolsDir, "wrk-forward.lua"))
	cmd := exec.CommandContext(ctx, wrk, "-t2", "-c8", "-d3s", "-s", script, serveURL+"/v1/id")
	cmd.Env = append(os.Environ(), "SINK_PATH="+fifo, "TEE_PREFIX="+filepath.Join(dir, "tee-"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// Unblock the sink if wrk never opened the FIFO.
		if w, oerr := os.OpenFile(fifo, os.O_WRONLY, 0); oerr == nil {
			w.Close()
		}
		t.Fatalf("wrk: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var r result
	select {
	case r = <-res:
	case <-time.After(time.Minute):
		t.Fatal("the sink did not finish after wrk exited")
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var w struct{ Requests, Non2xx, Written, Timeouts int }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &w); err != nil {
		t.Fatalf("wrk summary: %v\n%s", err, stdout.String())
	}
	rep := parseReport(t, r.out)
	tees, _ := filepath.Glob(filepath.Join(dir, "tee-*"))
	ref := reference(t, tees...)
	t.Logf("wrk %+v; sink %+v; reference IDs %d duplicates %d", w, rep, ref.IDs, ref.Duplicates)

	if w.Written == 0 || w.Written != w.Requests-w.Non2xx {
		t.Fatalf("wrk wrote %d bodies for %d requests (%d not 2xx)", w.Written, w.Requests, w.Non2xx)
	}
	if rep.IDs != uint64(w.Written) || ref.IDs != rep.IDs || rep.Duplicates != ref.Duplicates || rep.Duplicates != 0 {
		t.Fatalf("sink %d IDs %d dups; reference %d IDs %d dups; wrk wrote %d", rep.IDs, rep.Duplicates, ref.IDs, ref.Duplicates, w.Written)
	}
	// wrk abandons the requests in flight when its time is up: the node
	// may have issued a few more IDs than wrk received.
	if n := issued(t, serveURL); n < rep.IDs || n > rep.IDs+8 {
		t.Fatalf("node issued %d IDs, sink received %d (8 connections in flight at most)", n, rep.IDs)
	}
	if r.code != exitOK || rep.BadLines != 0 {
		t.Fatalf("exit %d: %+v\n%s", r.code, rep, r.err)
	}
}
