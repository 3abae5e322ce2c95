package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/telemetry"
)

const testToken = "s3cret-token"

// testNode is a server under test with its node and the node's fault
// clock.
type testNode struct {
	nd     *node.Node
	clock  *faults.Clock
	srv    *Server
	url    string
	client *http.Client
}

// buildNode builds a node for a server under test, stopped after the test
// (and so after its server): settings s (a Checkpoint in them is the
// node's), on a fault clock when fault is set.
func buildNode(t testing.TB, s generator.Settings, fault bool) *node.Node {
	t.Helper()
	nc := node.Config{Settings: s, FaultClock: fault}
	nc.Checkpoint, nc.Settings.Checkpoint = s.Checkpoint, nil
	nd, err := node.New(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Stop(context.Background(), true) })
	return nd
}

// serveOn serves srv with Serve on a loopback listener until the end of
// the test (Serve must then return nil) and returns its base URL.
func serveOn(t testing.TB, srv *Server) string {
	t.Helper()
	base, stop := serveStoppable(t, srv)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return base
}

// serveStoppable serves srv with Serve on a loopback listener and returns
// its base URL and stop, which cancels Serve and returns what it returned
// (called again, the same).
func serveStoppable(t testing.TB, srv *Server) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	return "http://" + ln.Addr().String(), stop
}

// newNode serves a fresh node on a fault clock with Serve; mod may adjust
// the generator's settings and the server's config.
func newNode(t testing.TB, mod func(*generator.Settings, *Config)) *testNode {
	return startNode(t, false, mod)
}

// startNode is newNode, served by Handler in an httptest server when
// embedded is set.
func startNode(t testing.TB, embedded bool, mod func(*generator.Settings, *Config)) *testNode {
	t.Helper()
	gs := generator.Settings{Node: 7, MaxWait: 200 * time.Millisecond}
	cfg := Config{AdminToken: testToken, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&gs, &cfg)
	}
	return serveTestNode(t, embedded, buildNode(t, gs, true), cfg)
}

// serveTestNode serves nd with cfg as startNode does.
func serveTestNode(t testing.TB, embedded bool, nd *node.Node, cfg Config) *testNode {
	t.Helper()
	cfg.Node = nd
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{nd: nd, clock: nd.FaultClock(), srv: srv}
	if embedded {
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		n.url, n.client = ts.URL, ts.Client()
		return n
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	n.url, n.client = serveOn(t, srv), &http.Client{Transport: tr}
	return n
}

// do sends a request and returns status, headers and body.
func (n *testNode) do(t *testing.T, method, path string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, n.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// wantError checks a JSON error response.
func wantError(t *testing.T, code int, hdr http.Header, body string, wantCode int, wantShort string, detailHas ...string) {
	t.Helper()
	if code != wantCode {
		t.Fatalf("status %d, want %d; body %s", code, wantCode, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var eb ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if eb.Error != wantShort {
		t.Errorf("error %q, want %q (detail %q)", eb.Error, wantShort, eb.Detail)
	}
	for _, h := range detailHas {
		if !strings.Contains(eb.Detail, h) {
			t.Errorf("detail %q does not contain %q", eb.Detail, h)
		}
	}
}

func TestID(t *testing.T) {
	n := newNode(t, nil)
	code, hdr, body := n.do(t, "GET", "/v1/id", nil, "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /v1/id: %d %q %q", code, hdr.Get("Content-Type"), body)
	}
	id, err := generator.ParseID(strings.TrimSuffix(body, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := n.nd.Settings().Layout.Decode(id); p.Node != 7 {
		t.Errorf("node %d, want 7", p.Node)
	}

	code, hdr, body = n.do(t, "GET", "/v1/id", map[string]string{"Accept": "application/json"}, "")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/id json: %d %q %q", code, hdr.Get("Content-Type"), body)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	s, ok := raw["id"].(string)
	if !ok {
		t.Fatalf("id is %T, want a JSON string: %s", raw["id"], body)
	}
	id2, err := generator.ParseID(s)
	if err != nil || id2 <= id {
		t.Fatalf("second id %q (%v) not above %d", s, err, id)
	}
}

func TestIDs(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) { c.MaxBatch = 500 })
	check := func(ids []generator.ID, want int) {
		t.Helper()
		if len(ids) != want {
			t.Fatalf("%d ids, want %d", len(ids), want)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ids[%d]=%d not above ids[%d]=%d", i, ids[i], i-1, ids[i-1])
			}
		}
	}
	// Default count is the maximum; text format.
	code, hdr, body := n.do(t, "GET", "/v1/ids", nil, "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %q", code, hdr.Get("Content-Type"))
	}
	ids, err := ParseIDs([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	check(ids, 500)
	// JSON: an array of strings.
	code, _, body = n.do(t, "GET", "/v1/ids?count=17", map[string]string{"Accept": "application/json"}, "")
	if code != 200 {
		t.Fatal(code, body)
	}
	var strs []any
	if err := json.Unmarshal([]byte(body), &strs); err != nil {
		t.Fatal(err)
	}
	for _, s := range strs {
		if _, ok := s.(string); !ok {
			t.Fatalf("element %v is %T, want string", s, s)
		}
	}
	ids, err = ParseIDs([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	check(ids, 17)
	code, _, body = n.do(t, "GET", "/v1/ids?count=1", nil, "")
	if code != 200 || strings.Count(body, "\n") != 1 {
		t.Fatalf("count=1: %d %q", code, body)
	}
}

func TestIDsBadCount(t *testing.T) {
	n := newNode(t, nil)
	for _, tc := range []struct{ query, short, has string }{
		{"count=0", errInvalidCount, `"0"`},
		{"count=-1", errInvalidCount, `"-1"`},
		{"count=1e9", errInvalidCount, `"1e9"`},
		{"count=abc", errInvalidCount, `"abc"`},
		{"count=", errInvalidCount, "empty"},
		{"count=4097", errInvalidCount, `"4097"`},
		{"count=1000000000", errInvalidCount, `"1000000000"`},
		{"count=99999999999999999999999", errInvalidCount, `"99999999999999999999999"`},
		{"count=+5", errInvalidCount, `" 5"`},
		{"count=%2B5", errInvalidCount, `"+5"`},
		{"count=%205", errInvalidCount, `" 5"`},
		{"count=1&count=2", errInvalidCount, "2 times"},
		{"cnt=5", errBadRequest, `"cnt"`},
		{"count=%zz", errBadRequest, `"%zz"`},
		{"count=1;x=2", errBadRequest, "semicolon"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, hdr, body := n.do(t, "GET", "/v1/ids?"+tc.query, nil, "")
			wantError(t, code, hdr, body, 400, tc.short, tc.has)
		})
	}
}

func TestDecode(t *testing.T) {
	n := newNode(t, nil)
	id, err := n.nd.Generator().Next()
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := n.do(t, "GET", "/v1/decode/"+id.String(), nil, "")
	if code != 200 {
		t.Fatal(code, body)
	}
	var d DecodeResponse
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	p := n.nd.Settings().Layout.Decode(id)
	if d.ID != id || d.Node != 7 || d.Worker != 7 || d.Tick != p.Tick || d.Seq != p.Seq || !d.Time.Equal(p.Time) || d.Layout != "41/10/12" {
		t.Fatalf("decode %+v, want %+v", d, p)
	}
	if !strings.Contains(body, `"id":"`+id.String()+`"`) {
		t.Errorf("id not a JSON string in %s", body)
	}
	for _, tc := range []struct{ path, has string }{
		{"/v1/decode/", "empty"},
		{"/v1/decode", "empty"},
		{"/v1/decode/x", `"x"`},
		{"/v1/decode/9223372036854775808", `"9223372036854775808"`},
		{"/v1/decode/99999999999999999999999999", `"99999999999999999999999999"`},
		{"/v1/decode/-1", `"-1"`},
		{"/v1/decode/1%2F2", `"1%2F2"`},
		{"/v1/decode/1/2", "slash"},
		{"/v1/decode/%31", `"%31"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, hdr, body := n.do(t, "GET", tc.path, nil, "")
			wantError(t, code, hdr, body, 400, errInvalidID, tc.has)
		})
	}
}

func TestHealthReadyMetricsInfo(t *testing.T) {
	var extra atomic.Pointer[string]
	n := newNode(t, func(_ *generator.Settings, c *Config) {
		c.ReadyChecks = []ReadyCheck{{Name: "ntp", Check: func(context.Context) error {
			if p := extra.Load(); p != nil {
				return errors.New(*p)
			}
			return nil
		}}}
	})
	if code, _, body := n.do(t, "GET", "/healthz", nil, ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatal(code, body)
	}
	if code, _, body := n.do(t, "GET", "/readyz", nil, ""); code != 200 {
		t.Fatal(code, body)
	}
	msg := "offset 300ms beyond budget"
	extra.Store(&msg)
	code, hdr, body := n.do(t, "GET", "/readyz", nil, "")
	wantError(t, code, hdr, body, 503, errNotReady, "ntp: offset 300ms")
	if hdr.Get("Retry-After") == "" {
		t.Error("no Retry-After on 503")
	}
	n.do(t, "GET", "/v1/id", nil, "")
	code, _, body = n.do(t, "GET", "/metrics", nil, "")
	if code != 200 || !strings.Contains(body, `snowflake_http_requests_total{code="200",route="/v1/id"} 1`) {
		t.Fatalf("metrics %d:\n%s", code, body)
	}
	code, _, body = n.do(t, "GET", "/v1/info", nil, "")
	var info Info
	if err := json.Unmarshal([]byte(body), &info); err != nil || code != 200 {
		t.Fatal(code, err, body)
	}
	if info.Node != 7 || info.Policy != "wait" || info.MaxBatch != 4096 || !info.Admin || info.Stats.Issued != 1 {
		t.Fatalf("info %+v", info)
	}
	l, err := info.Layout.Layout()
	if err != nil || l != n.nd.Settings().Layout {
		t.Fatalf("layout %+v (%v), want %+v", l, err, n.nd.Settings().Layout)
	}
}

func TestRefusingIs503AndNotReady(t *testing.T) {
	n := newNode(t, func(s *generator.Settings, _ *Config) { s.Policy = generator.PolicyRefuse })
	if code, _, body := n.do(t, "GET", "/v1/id", nil, ""); code != 200 {
		t.Fatal(code, body)
	}
	n.clock.Step(-3 * time.Second)
	code, hdr, body := n.do(t, "GET", "/v1/id", nil, "")
	wantError(t, code, hdr, body, 503, errUnavailable, "clock moved backwards")
	if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); ra < 1 {
		t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
	}
	code, hdr, body = n.do(t, "GET", "/v1/ids?count=10", nil, "")
	wantError(t, code, hdr, body, 503, errUnavailable)
	code, hdr, body = n.do(t, "GET", "/readyz", nil, "")
	wantError(t, code, hdr, body, 503, errNotReady)
	n.clock.Revert()
	if code, _, body := n.do(t, "GET", "/readyz", nil, ""); code != 200 {
		t.Fatal(code, body)
	}
}

func TestNotFoundAndMethod(t *testing.T) {
	n := newNode(t, nil)
	for _, p := range []string{"/", "/v1", "/v1/id/", "/v2/id", "/admin", "/nope"} {
		code, hdr, body := n.do(t, "GET", p, nil, "")
		wantError(t, code, hdr, body, 404, errNotFound)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/v1/id", "GET, HEAD"},
		{"DELETE", "/v1/ids", "GET, HEAD"},
		{"PUT", "/v1/decode/1", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
		{"PATCH", "/admin/v1/faults", "DELETE, GET, HEAD, POST"},
	} {
		code, hdr, body := n.do(t, tc.method, tc.path, nil, "")
		wantError(t, code, hdr, body, 405, errMethod, tc.method)
		if got := hdr.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	n := newNode(t, nil)
	code, hdr, body := n.do(t, "GET", "/admin/v1/faults", nil, "")
	wantError(t, code, hdr, body, 401, errUnauthorized, "missing")
	if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q", hdr.Get("WWW-Authenticate"))
	}
	code, hdr, body = n.do(t, "GET", "/admin/v1/faults", map[string]string{"Authorization": "Basic abc"}, "")
	wantError(t, code, hdr, body, 401, errUnauthorized, "malformed")
	for _, tok := range []string{"wrong", testToken + "x", testToken[:3], strings.ToUpper(testToken)} {
		code, hdr, body = n.do(t, "POST", "/admin/v1/faults", map[string]string{"Authorization": "Bearer " + tok}, `{"kind":"step","by":"-1s"}`)
		wantError(t, code, hdr, body, 403, errForbidden)
	}
	if off := n.clock.Offset(); off != 0 {
		t.Fatalf("a refused request moved the clock by %v", off)
	}
	// Disabled without a token: the routes do not exist.
	d := newNode(t, func(_ *generator.Settings, c *Config) { c.AdminToken = "" })
	code, hdr, body = d.do(t, "GET", "/admin/v1/faults", map[string]string{"Authorization": "Bearer " + testToken}, "")
	wantError(t, code, hdr, body, 404, errAdminDisabled)
}

func TestAdminFaults(t *testing.T) {
	n := newNode(t, nil)
	auth := map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
	state := func(body string) FaultState {
		t.Helper()
		var st FaultState
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return st
	}
	code, _, body := n.do(t, "POST", "/admin/v1/faults", auth, `{"kind":"step","by":"-2s"}`)
	if code != 200 {
		t.Fatal(code, body)
	}
	st := state(body)
	if st.OffsetNs != int64(-2*time.Second) || len(st.Active) != 1 || st.Active[0].Kind != "step" {
		t.Fatalf("after step: %+v", st)
	}
	code, _, body = n.do(t, "GET", "/admin/v1/faults", auth, "")
	if st := state(body); code != 200 || time.Duration(st.Offset) != -2*time.Second {
		t.Fatalf("GET: %d %s", code, body)
	}
	for _, req := range []string{
		`{"kind":"freeze","for":"1h"}`, `{"kind":"release"}`, `{"kind":"leap","in":"1h"}`,
		`{"kind":"leap","at":"` + time.Now().Add(30*24*time.Hour).UTC().Format(time.RFC3339) + `"}`, `{"kind":"smear","by":"1s","window":"1h"}`,
		`{"kind":"slew","by":"100ms"}`, `{"kind":"slew","by":"100ms","ppm":100}`, `{"kind":"drift","ppm":50}`,
		`{"kind":"pause","for":1000}`, `{"kind":"jitter","max":"1ms","seed":42}`, `{"kind":"jitter","max":"0s"}`,
	} {
		if code, _, body := n.do(t, "POST", "/admin/v1/faults", auth, req); code != 200 {
			t.Fatalf("%s: %d %s", req, code, body)
		}
	}
	code, _, body = n.do(t, "DELETE", "/admin/v1/faults", auth, "")
	if st := state(body); code != 200 || st.OffsetNs != 0 || len(st.Active) != 0 {
		t.Fatalf("DELETE: %d %s", code, body)
	}

	for _, tc := range []struct{ body, has string }{
		{``, "empty"},
		{`{"kind":"warp"}`, `"warp"`},
		{`{"kind":"step"}`, `"by"`},
		{`{"kind":"step","by":"-1x"}`, `"-1x"`},
		{`{"kind":"step","by":"1s","window":"1s"}`, `"window"`},
		{`{"kind":"step","by":"1s","bogus":1}`, `bogus`},
		{`{"kind":"step","by":"1s"} {}`, "trailing"},
		{`{"kind":"leap"}`, "exactly one"},
		{`{"kind":"leap","at":"tomorrow"}`, `"tomorrow"`},
		{`{"kind":"leap","at":"2099-01-01T00:00:00Z","in":"1s"}`, "exactly one"},
		{`{"kind":"pause","for":"-1s"}`, "out of range [1ns,"},
		{`{"kind":"smear","by":"1s","window":"0s"}`, "out of range [1ns,"},
		{`{"kind":"drift","ppm":1e9}`, "out of range"},
		{`[1,2]`, "decoding"},
	} {
		code, hdr, body := n.do(t, "POST", "/admin/v1/faults", auth, tc.body)
		wantError(t, code, hdr, body, 400, errBadFault, tc.has)
	}
	code, hdr, body := n.do(t, "POST", "/admin/v1/faults", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "text/plain"}, `{"kind":"release"}`)
	wantError(t, code, hdr, body, 415, errUnsupportedMed)
	big := `{"kind":"step","by":"` + strings.Repeat("1", DefaultMaxBodyBytes) + `s"}`
	code, hdr, body = n.do(t, "POST", "/admin/v1/faults", auth, big)
	wantError(t, code, hdr, body, 413, errTooLarge)
	if off := n.clock.Offset(); off != 0 {
		t.Fatalf("bad requests moved the clock by %v", off)
	}
}

// fakeListener is a listener that reports a chosen address.
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (f fakeListener) Addr() net.Addr { return f.addr }

func TestAdminRefusesRemoteListener(t *testing.T) {
	n := newNode(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	remote := fakeListener{ln, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}}
	if err := n.srv.Serve(context.Background(), remote, nil); !errors.Is(err, ErrAdminRemote) {
		t.Fatalf("Serve on a remote address: %v, want ErrAdminRemote", err)
	}
	if err := n.srv.Serve(context.Background(), ln, remote); !errors.Is(err, ErrAdminRemote) {
		t.Fatalf("Serve with a remote admin address: %v, want ErrAdminRemote", err)
	}
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true,
		":1": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "example.com:1": false, "nonsense": false} {
		if err := CheckListenAddr(addr); (err == nil) != ok {
			t.Errorf("CheckListenAddr(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
	// Allowed explicitly: Serve starts (and stops with its context).
	srv, err := New(Config{Node: buildNode(t, generator.Settings{}, true), AdminToken: "t", AdminAllowRemote: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := srv.Serve(ctx, fakeListener{ln2, remote.addr}, nil); err != nil {
		t.Fatalf("Serve with AdminAllowRemote: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	nd := buildNode(t, generator.Settings{}, false)
	for name, c := range map[string]Config{
		"no node":          {},
		"token, no clock":  {Node: nd, AdminToken: "x"},
		"batch too big":    {Node: nd, MaxBatch: MaxBatchLimit + 1},
		"negative timeout": {Node: nd, RequestTimeout: -1},
		"nil check":        {Node: nd, ReadyChecks: []ReadyCheck{{Name: "x"}}},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

func TestSeparateAdminListener(t *testing.T) {
	srv, err := New(Config{Node: buildNode(t, generator.Settings{}, true), AdminToken: testToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mainLn, _ := net.Listen("tcp", "127.0.0.1:0")
	adminLn, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, mainLn, adminLn) }()
	get := func(addr net.Addr, path string) int {
		req, _ := http.NewRequest("GET", "http://"+addr.String()+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(mainLn.Addr(), "/admin/v1/faults"); c != 404 {
		t.Errorf("admin on main listener: %d, want 404", c)
	}
	if c := get(adminLn.Addr(), "/admin/v1/faults"); c != 200 {
		t.Errorf("admin on admin listener: %d, want 200", c)
	}
	if c := get(adminLn.Addr(), "/v1/id"); c != 404 {
		t.Errorf("API on admin listener: %d, want 404", c)
	}
	if c := get(mainLn.Addr(), "/v1/id"); c != 200 {
		t.Errorf("API on main listener: %d, want 200", c)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTracingSpanNames(t *testing.T) {
	for _, embedded := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		n := startNode(t, embedded, func(_ *generator.Settings, c *Config) { c.TracerProvider = tp })
		n.do(t, "GET", "/v1/id", nil, "")
		n.do(t, "GET", "/v1/ids?count=3", nil, "")
		n.do(t, "GET", "/v1/decode/12345", nil, "")
		n.do(t, "GET", "/nope", nil, "")
		n.do(t, "POST", "/v1/id", nil, "")
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
			if s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q is %v, want a server span", s.Name(), s.SpanKind())
			}
		}
		want := []string{"GET /v1/id", "GET /v1/ids", "GET /v1/decode/{id}", "GET", "POST /v1/id"}
		if strings.Join(names, "|") != strings.Join(want, "|") {
			t.Fatalf("embedded %v: span names %q, want %q", embedded, names, want)
		}
		if code := attrOf(rec.Ended()[4], "http.response.status_code"); code != "405" {
			t.Errorf("POST /v1/id span's status code %q, want 405", code)
		}
	}
}

// attrOf returns the value of a span's attribute key.
func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestTracingPropagation sends a W3C traceparent: the request's span is
// its child, and the node's observer (its metrics, as serve composes
// them) records a refusal on the request's span (so a rewind lands on the
// request's trace).
func TestTracingPropagation(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traceparent := map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}
	for _, embedded := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		nd, err := node.New(context.Background(), node.Config{
			Settings:   generator.Settings{Node: 7, Policy: generator.PolicyRefuse},
			FaultClock: true,
			Metrics:    telemetry.NewGeneratorCollector(telemetry.Options{TracerProvider: tp}).MustNode(""),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Stop(context.Background(), true) })
		n := serveTestNode(t, embedded, nd, Config{TracerProvider: tp, Logger: slog.New(slog.DiscardHandler)})
		if code, _, body := n.do(t, "GET", "/v1/id", traceparent, ""); code != 200 {
			t.Fatal(code, body)
		}
		n.clock.Step(-time.Second)
		if code, _, body := n.do(t, "GET", "/v1/id", traceparent, ""); code != 503 {
			t.Fatal(code, body)
		}
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("embedded %v: %d spans, want 2", embedded, len(spans))
		}
		for _, s := range spans {
			if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID || !s.Parent().IsRemote() {
				t.Errorf("embedded %v: span %q in trace %s under %s, want trace %s under the remote %s",
					embedded, s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, parentID)
			}
		}
		if st := spans[1].Status(); st.Code != codes.Error {
			t.Errorf("the 503's span status %v, want Error", st)
		}
		recorded := false
		for _, ev := range spans[1].Events() {
			for _, a := range ev.Attributes {
				recorded = recorded || (ev.Name == "exception" && strings.Contains(a.Value.String(), "clock moved backwards"))
			}
		}
		if !recorded || len(spans[0].Events()) != 0 {
			t.Errorf("embedded %v: the refusal is not recorded on the 503's span alone: events %v and %v", embedded, spans[0].Events(), spans[1].Events())
		}
	}
}

// TestGracefulShutdownLosesNoID runs clients against a real listener,
// cancels Serve mid-load, and checks that every ID the generator issued
// reached a client exactly once.
func TestGracefulShutdownLosesNoID(t *testing.T) {
	nd := buildNode(t, generator.Settings{Node: 3}, true)
	srv, err := New(Config{Node: nd, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serveStoppable(t, srv)

	var (
		mu       sync.Mutex
		seen     = map[generator.ID]bool{}
		dups     int
		received atomic.Int64
		wg       sync.WaitGroup
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/v1/id"
			if w%2 == 1 {
				path = "/v1/ids?count=" + strconv.Itoa(50*w)
			}
			for {
				resp, err := client.Get(base + path)
				if err != nil {
					return // the listener is gone
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Errorf("reading a body: %v", err)
					return
				}
				if resp.StatusCode != 200 {
					t.Errorf("status %d: %s", resp.StatusCode, b)
					return
				}
				ids, err := ParseIDs(b)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					if seen[id] {
						dups++
					}
					seen[id] = true
				}
				mu.Unlock()
				received.Add(int64(len(ids)))
			}
		}()
	}
	testenv.Eventually(context.Background(), 10*time.Second, func() bool { return received.Load() >= 20000 })
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	wg.Wait()
	issued := nd.Generator().Stats().Issued
	if dups != 0 {
		t.Fatalf("%d duplicate IDs", dups)
	}
	if got := uint64(received.Load()); got != issued || got == 0 {
		t.Fatalf("clients received %d IDs, generator issued %d", got, issued)
	}
	t.Logf("%d IDs issued and received across shutdown", issued)
}

func TestClientIssueAndErrors(t *testing.T) {
	n := newNode(t, func(s *generator.Settings, _ *Config) { s.Policy = generator.PolicyRefuse })
	c := &Client{BaseURL: n.url, Token: testToken}
	ctx := context.Background()
	dst := make([]generator.ID, 10)
	if got, err := c.Issue(ctx, dst); got != 10 || err != nil {
		t.Fatal(got, err)
	}
	if got, err := c.Issue(ctx, dst[:1]); got != 1 || err != nil || dst[0] <= dst[9] {
		t.Fatal(got, err, dst[0], dst[9])
	}
	if _, err := c.Inject(ctx, faults.Fault{Kind: faults.KindStep, By: -2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Issue(ctx, dst)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 503 || !errors.Is(err, generator.ErrClockBackwards) || se.RetryAfter == "" {
		t.Fatalf("refused Issue: %v", err)
	}
	st, err := c.Faults(ctx)
	if err != nil || st.OffsetNs != int64(-2*time.Second) {
		t.Fatalf("faults: %+v %v", st, err)
	}
	if _, err := (&Client{BaseURL: n.url, Token: "bad"}).Faults(ctx); !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("bad token: %v", err)
	}
	pe := &PartialError{Got: 3, Reason: "generator: wait deadline exceeded by 1s (policy wait)"}
	if !errors.Is(pe, generator.ErrWaitExceeded) {
		t.Fatal("PartialError does not unwrap to ErrWaitExceeded")
	}
}

func TestServeH2C(t *testing.T) {
	srv, err := New(Config{Node: buildNode(t, generator.Settings{Node: 1}, false), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/v1/ids?count=5")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || strings.Count(string(b), "\n") != 5 {
		t.Fatalf("h2c: %s %d %q", resp.Proto, resp.StatusCode, b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
