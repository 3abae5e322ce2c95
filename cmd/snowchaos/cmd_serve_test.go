package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
	"github.com/snowchaos/snowchaos/lease"
	leasepg "github.com/snowchaos/snowchaos/lease/postgres"
	"github.com/snowchaos/snowchaos/server"
)

// startServe runs "serve args..." in process and returns its base URL, a
// stop function returning the exit code, and its stderr.
func startServe(t *testing.T, args ...string) (string, func() int, *testenv.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &testenv.SyncBuffer{}
	code := make(chan int, 1)
	go func() {
		c := dispatch(ctx, append([]string{"serve"}, args...), pw, stderr)
		pw.Close()
		code <- c
	}()
	addr := <-testenv.ListenAddr(pr)
	if addr == "" {
		cancel()
		t.Fatalf("serve did not print its address; exit %d; stderr:\n%s", <-code, stderr)
	}
	stopped := false
	var rc int
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			rc = <-code
		}
		return rc
	}
	t.Cleanup(func() { stop() })
	return "http://" + addr, stop, stderr
}

func TestServeEndToEnd(t *testing.T) {
	t.Setenv("SNOWCHAOS_ADMIN_TOKEN", "tok")
	t.Setenv("SNOWCHAOS_WORKER", "9")
	cp := filepath.Join(t.TempDir(), "mark")
	url, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--policy", "refuse", "--checkpoint", cp)
	c := &server.Client{BaseURL: url, Token: "tok"}
	ctx := context.Background()
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil || info.Node != 9 || info.Policy != "refuse" || !info.Admin {
		t.Fatalf("info %+v, %v", info, err)
	}
	ids, err := c.IDs(ctx, 100)
	if err != nil || len(ids) != 100 {
		t.Fatalf("ids: %d, %v", len(ids), err)
	}
	st, err := c.Inject(ctx, faults.Fault{Kind: faults.KindStep, By: -5 * time.Second})
	if err != nil || st.OffsetNs != int64(-5*time.Second) {
		t.Fatalf("inject: %+v, %v", st, err)
	}
	if _, err := c.ID(ctx); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("ID after a 5s step back under refuse: %v, want 503", err)
	}
	if err := c.Ready(ctx); err == nil {
		t.Fatal("ready after a step back under refuse")
	}
	if _, err := c.Revert(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"snowflake_ids_issued_total 100", `snowflake_http_requests_total{code="503",route="/v1/id"} 1`, "snowflake_refusals_total", "go_goroutines"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if b, err := os.ReadFile(cp); err != nil || len(b) == 0 {
		t.Fatalf("checkpoint not written: %v", err)
	}
	if !strings.Contains(stderr.String(), "shut down") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestServeMemoryLease(t *testing.T) {
	url, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--lease", "memory", "--worker", "12", "--lease-ttl", "3s")
	c := &server.Client{BaseURL: url}
	info, err := c.Info(context.Background())
	if err != nil || info.Node != 12 {
		t.Fatalf("info %+v, %v", info, err)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := c.IDs(context.Background(), 10)
	if err != nil || len(resp) != 10 {
		t.Fatal(err)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "lease acquired") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "no lease acquired") {
		t.Errorf("a held lease is logged with the closed fence's zero reason:\n%s", stderr)
	}
}

func TestServeBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"remote admin":        {args: []string{"--listen", "0.0.0.0:0", "--admin-token", "x"}, want: "non-loopback"},
		"remote admin addr":   {args: []string{"--listen", "127.0.0.1:0", "--admin-addr", ":0", "--admin-token", "x"}, want: "non-loopback"},
		"admin addr, no tok":  {args: []string{"--admin-addr", "127.0.0.1:0"}, want: "admin token"},
		"policy":              {args: []string{"--policy", "sometimes"}, want: "sometimes"},
		"layout":              {args: []string{"--layout", "1/2/3"}, want: "1/2/3"},
		"epoch":               {args: []string{"--epoch", "yesterday"}, want: "yesterday"},
		"future epoch":        {args: []string{"--epoch", "2999-01-01T00:00:00Z"}, want: "Epoch"},
		"worker":              {args: []string{"--worker", "5000"}, want: "5000"},
		"worker with lease":   {args: []string{"--worker", "5000", "--lease", "memory"}, want: "--worker 5000"},
		"negative worker":     {args: []string{"--worker", "-1", "--lease", "memory"}, want: "--worker -1"},
		"clock offset":        {args: []string{"--clock-offset", "2562047h"}, want: "--clock-offset"},
		"max wait":            {args: []string{"--max-wait", "100h"}, want: "--max-wait 100h0m0s out of range"},
		"lease ttl":           {args: []string{"--lease", "memory", "--lease-ttl", "-1s"}, want: "--lease-ttl"},
		"idle timeout":        {args: []string{"--idle-timeout", "2h"}, want: "IdleTimeout"},
		"long holder":         {args: []string{"--lease", "memory", "--holder", strings.Repeat("h", 300)}, want: "lease: invalid config: holder longer than 253 bytes"},
		"lease":               {args: []string{"--lease", "carrier-pigeon"}, want: "carrier-pigeon"},
		"env":                 {env: map[string]string{"SNOWCHAOS_MAX_WAIT": "soon"}, want: "SNOWCHAOS_MAX_WAIT"},
		"extra args":          {args: []string{"now"}, want: "unexpected"},
		"unknown flag":        {args: []string{"--nope"}, want: "nope"},
		"token file":          {args: []string{"--admin-token-file", "/nonexistent/tok"}, want: "admin-token-file"},
		"blank token env":     {env: map[string]string{"SNOWCHAOS_ADMIN_TOKEN": " \n"}, want: "SNOWCHAOS_ADMIN_TOKEN"},
		"blank token flag":    {args: []string{"--admin-token", "\t"}, want: "--admin-token"},
		"max batch":           {args: []string{"--listen", "127.0.0.1:0", "--max-batch", "-1"}, want: "MaxBatch"},
		"skew above max":      {args: []string{"--lease", "memory", "--lease-skew-budget", "2m"}, want: "--lease-skew-budget 2m0s outside [0, 1m0s]"},
		"negative skew":       {args: []string{"--lease", "memory", "--lease-skew-budget", "-1s"}, want: "--lease-skew-budget -1s outside [0, 1m0s]"},
		"skew without lease":  {args: []string{"--lease-skew-budget", "1s"}, want: "--lease-skew-budget needs --lease"},
		"skew env":            {env: map[string]string{"SNOWCHAOS_LEASE_SKEW_BUDGET": "soon"}, want: "SNOWCHAOS_LEASE_SKEW_BUDGET"},
		"peer skew above max": {args: []string{"--lease", "memory", "--peer-clock-max-skew", "2h"}, want: "--peer-clock-max-skew 2h0m0s outside [0, 1h0m0s]"},
		"negative peer skew":  {args: []string{"--lease", "memory", "--peer-clock-max-skew", "-1s"}, want: "--peer-clock-max-skew -1s outside [0, 1h0m0s]"},
		"peer skew, no lease": {args: []string{"--peer-clock-max-skew", "5s"}, want: "--peer-clock-max-skew needs --lease"},
		"peer skew env":       {env: map[string]string{"SNOWCHAOS_PEER_CLOCK_MAX_SKEW": "soon"}, want: "SNOWCHAOS_PEER_CLOCK_MAX_SKEW"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code := dispatch(ctx, append([]string{"serve"}, tc.args...), &out, &errb)
			if code != exitInvalid || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, errb.String(), tc.want)
			}
			if strings.Contains(out.String(), "listening") {
				t.Fatalf("listened despite bad input: %s", out.String())
			}
		})
	}
}

// TestServeTokenTrimmed checks that a token from the environment with a
// trailing newline (a Kubernetes secret) is the token clients present.
func TestServeTokenTrimmed(t *testing.T) {
	t.Setenv("SNOWCHAOS_ADMIN_TOKEN", "abc123\n")
	url, _, _ := startServe(t, "--listen", "127.0.0.1:0")
	if _, err := (&server.Client{BaseURL: url, Token: "abc123"}).Faults(context.Background()); err != nil {
		t.Fatalf("admin API with the token without its newline: %v", err)
	}
}

// TestServeStoredMark starts serve on checkpoint files holding marks far
// ahead: beyond the layout's lifetime it refuses to start, naming the file
// and the value; an hour ahead it starts, says at start how long the mark
// holds the node and why, and is not ready.
func TestServeStoredMark(t *testing.T) {
	dir := t.TempDir()
	far := filepath.Join(dir, "far")
	if err := os.WriteFile(far, []byte("4102444800000\n"), 0o600); err != nil { // 2100-01-01
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := dispatch(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--checkpoint", far}, &out, &errb)
	for _, want := range []string{far, "4102444800000", "2100-01-01T00:00:00Z", "lifetime"} {
		if code != exitInvalid || !strings.Contains(errb.String(), want) {
			t.Errorf("mark in 2100: exit %d, stderr %q; want 2 naming %q", code, errb.String(), want)
		}
	}
	ahead := filepath.Join(dir, "ahead")
	if err := os.WriteFile(ahead, []byte(fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _, stderr := startServe(t, "--listen", "127.0.0.1:0", "--checkpoint", ahead)
	for _, want := range []string{"level=WARN", "stored mark holds the node", "source=\"the checkpoint file " + ahead, "why="} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("start log lacks %q:\n%s", want, stderr)
		}
	}
	// The hold is measured when the mark is loaded, moments after it was
	// written an hour ahead (rounded to the millisecond).
	hold := time.Duration(-1)
	if m := regexp.MustCompile(`stored mark holds the node.* for=(\S+) `).FindStringSubmatch(stderr.String()); m != nil {
		hold, _ = time.ParseDuration(m[1])
	}
	if hold <= 59*time.Minute || hold > time.Hour {
		t.Errorf("start log does not say the mark holds the node for (just under) an hour (read %v):\n%s", hold, stderr)
	}
	if err := (&server.Client{BaseURL: url}).Ready(context.Background()); err == nil {
		t.Error("ready while the stored mark is an hour ahead")
	}
}

// TestServeFreshStartLogsNoMark: a first start with a 5 s reservation
// writes it before it serves and logs no stored mark (it loaded none),
// and the node is ready.
func TestServeFreshStartLogsNoMark(t *testing.T) {
	cp := filepath.Join(t.TempDir(), "mark")
	url, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--checkpoint", cp, "--reserve", "5s")
	if err := (&server.Client{BaseURL: url}).Ready(context.Background()); err != nil {
		t.Errorf("not ready after a fresh start: %v", err)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if strings.Contains(stderr.String(), "stored mark") {
		t.Errorf("a fresh start logged a stored mark:\n%s", stderr)
	}
}

// TestServeSkewBudget: --lease-skew-budget, or SNOWCHAOS_LEASE_SKEW_BUDGET
// when the flag is not given, reaches the lease keeper.
func TestServeSkewBudget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{args: []string{"--lease-skew-budget", "250ms"}, want: 250 * time.Millisecond},
		{env: "300ms", want: 300 * time.Millisecond},
		{args: []string{"--lease-skew-budget", "1m"}, env: "300ms", want: time.Minute},
		{want: 0},
	} {
		t.Setenv("SNOWCHAOS_LEASE_SKEW_BUDGET", tc.env)
		var f serveFlags
		fs := newServeFlagSet(&f)
		if err := fs.Parse(append([]string{"--listen", "127.0.0.1:0", "--lease", "memory", "--lease-ttl", "3s"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fs, os.Getenv); err != nil {
			t.Fatal(err)
		}
		var logs testenv.SyncBuffer
		svc, err := buildService(context.Background(), &f, &logs)
		if err != nil {
			t.Fatalf("%v (env %q): %v", tc.args, tc.env, err)
		}
		got := svc.Node().Keeper().Config().SkewBudget
		svc.Close()
		if got != tc.want {
			t.Errorf("%v (env %q): keeper skew budget %v, want %v", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestServeEnvNames(t *testing.T) {
	if got := envName("admin-allow-remote"); got != "SNOWCHAOS_ADMIN_ALLOW_REMOTE" {
		t.Fatal(got)
	}
}

func TestServePostgresLease(t *testing.T) {
	conn, dsn := pgtest.Connect(t)
	schema := fmt.Sprintf("serve_lease_%d", time.Now().UnixNano())
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	args := []string{"--listen", "127.0.0.1:0", "--lease", dsn, "--lease-schema", schema, "--worker", "3", "--lease-ttl", "3s", "--holder", "node-x"}
	serveTwoHolders(t, args)
	var held int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".worker_leases WHERE leased_until > now()").Scan(&held); err != nil || held != 0 {
		t.Fatalf("leases still held after shutdown: %d (%v)", held, err)
	}
}

// serveTwoHolders starts serve with args, which ask for worker 3 and end
// with "--holder", "node-x", checks that it got 3 and issues, then starts a
// second node with another identity ("node-y") preferring the same worker
// ID, which must be granted another one (the lease prevents the clone),
// and stops both cleanly.
func serveTwoHolders(t *testing.T, args []string) {
	t.Helper()
	url, stop, stderr := startServe(t, args...)
	c := &server.Client{BaseURL: url}
	info, err := c.Info(context.Background())
	if err != nil || info.Node != 3 {
		t.Fatalf("info %+v %v", info, err)
	}
	if _, err := c.IDs(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	url2, stop2, stderr2 := startServe(t, append(args[:len(args)-1:len(args)-1], "node-y")...)
	info2, err := (&server.Client{BaseURL: url2}).Info(context.Background())
	if err != nil || info2.Node == 3 {
		t.Fatalf("second holder got worker %d (%v), want another than 3", info2.Node, err)
	}
	if code := stop2(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr2)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// TestServePeerClockCheck: with a live peer in the Postgres lease store
// reporting the real time, a serve whose clock is 10 s behind exits 2
// naming the peer and the skew, its lease released; with
// --peer-clock-max-skew 0 (or SNOWCHAOS_PEER_CLOCK_MAX_SKEW=20s) it starts.
func TestServePeerClockCheck(t *testing.T) {
	conn, dsn := pgtest.Connect(t)
	schema := fmt.Sprintf("serve_peer_%d", time.Now().UnixNano())
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := leasepg.Open(ctx, dsn, leasepg.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Acquire(ctx, lease.Request{Holder: "peer", Range: lease.Range{Min: 1, Max: 1}, TTL: time.Minute, ClockMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--lease", dsn, "--lease-schema", schema, "--worker", "3", "--holder", "late", "--clock-offset", "-10s"}
	var out, errb bytes.Buffer
	if code := dispatch(ctx, append([]string{"serve"}, args...), &out, &errb); code != exitInvalid {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errb.String())
	}
	for _, want := range []string{"acquiring a worker lease from", "lease: peer clock skew", "behind the median of its 1 live peers", "worker 1 (peer)", "worker 3 released"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(out.String(), "listening") {
		t.Fatalf("listened despite the refusal: %s", out.String())
	}
	var held int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".worker_leases WHERE holder = 'late' AND leased_until > now()").Scan(&held); err != nil || held != 0 {
		t.Fatalf("the refused node still holds %d leases (%v)", held, err)
	}
	_, stop, stderr := startServe(t, append(args, "--peer-clock-max-skew", "0")...)
	if code := stop(); code != exitOK {
		t.Fatalf("with the check off: exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "peer clock check off") {
		t.Errorf("no warning that the check is off:\n%s", stderr)
	}
	t.Setenv("SNOWCHAOS_PEER_CLOCK_MAX_SKEW", "20s")
	_, stop, stderr = startServe(t, args...)
	if code := stop(); code != exitOK {
		t.Fatalf("with a 20s bound: exit %d:\n%s", code, stderr)
	}
}
