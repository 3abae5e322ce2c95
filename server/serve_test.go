package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// TestBudgetCtx checks the lazy request context: no timer until asked,
// the deadline and the cause once asked, and an ended context after
// release.
func TestBudgetCtx(t *testing.T) {
	b := newIDBudget(time.Hour, 10*time.Millisecond)
	start := time.Now()
	c := newBudgetCtx(context.Background(), start, b)
	if dl, ok := c.Deadline(); !ok || !dl.Equal(start.Add(b.d)) {
		t.Fatalf("deadline %v %v, want %v", dl, ok, start.Add(b.d))
	}
	if c.inner != nil {
		t.Fatal("a timer was created before anything asked for Done")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done 10 s after a 260 ms deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) ||
		!strings.Contains(context.Cause(c).Error(), "wait bound") {
		t.Fatalf("err %v, cause %v; want the budget's cause", c.Err(), context.Cause(c))
	}
	c.release()

	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	c = newBudgetCtx(parent, time.Now(), newIDBudget(time.Hour, time.Hour))
	if c.Value(key{}) != "v" || c.inner != nil {
		t.Fatal("Value does not reach the parent without a timer")
	}
	c.release()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after release: %v, want Canceled", c.Err())
	}
	if c.Value(key{}) != "v" {
		t.Fatal("Value lost after release")
	}
}

// rawRequest sends raw bytes on a new connection and returns the response.
func rawRequest(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestRequestErrorsAreJSON sends requests the HTTP layer refuses before
// any route: each is answered with the node's JSON error.
func TestRequestErrorsAreJSON(t *testing.T) {
	n := newNode(t, nil)
	addr := strings.TrimPrefix(n.url, "http://")
	for _, tc := range []struct {
		name, raw string
		code      int
		short     string
	}{
		{"malformed", "GET /v1/id HTTP/1.1\r\nHost x\r\n\r\n", 400, errBadRequest},
		{"headers too large", "GET /v1/id HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes) + "\r\n\r\n", 431, errBadRequest},
		{"body too large", "POST /admin/v1/faults HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat(" ", 70000), 413, errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawRequest(t, addr, tc.raw)
			wantError(t, resp.StatusCode, resp.Header, body, tc.code, tc.short)
		})
	}
}

// TestPanicIs500 makes a handler panic (a readiness check): the request is
// answered 500 in JSON, counted, and the node goes on serving.
func TestPanicIs500(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) {
		c.ReadyChecks = []ReadyCheck{{Name: "boom", Check: func(context.Context) error { panic("boom") }}}
	})
	code, hdr, body := n.do(t, "GET", "/readyz", nil, "")
	wantError(t, code, hdr, body, 500, errInternal)
	if code, _, body := n.do(t, "GET", "/v1/id", nil, ""); code != 200 {
		t.Fatalf("after a panic: %d %s", code, body)
	}
	if _, _, body := n.do(t, "GET", "/metrics", nil, ""); !strings.Contains(body, `snowflake_http_requests_total{code="500",route="/readyz"} 1`) {
		t.Errorf("the panic is not counted as a 500:\n%s", body)
	}
}

// TestHandlerMatchesServe sends the same requests to a node served by
// Serve and to one embedded with Handler: the statuses, content types
// and error bodies agree.
func TestHandlerMatchesServe(t *testing.T) {
	served, embedded := newNode(t, nil), startNode(t, true, nil)
	id, _ := served.gen.Next()
	auth := map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
	for _, tc := range []struct {
		method, path, body string
		hdr                map[string]string
	}{
		{"GET", "/v1/id", "", nil},
		{"GET", "/v1/id", "", map[string]string{"Accept": "application/json"}},
		{"GET", "/v1/ids?count=5", "", nil},
		{"GET", "/v1/ids?count=0", "", nil},
		{"GET", "/v1/ids?x=1", "", nil},
		{"GET", "/v1/decode/" + id.String(), "", nil},
		{"GET", "/v1/decode/%31", "", nil},
		{"GET", "/v1/info", "", nil},
		{"GET", "/healthz", "", nil},
		{"GET", "/readyz", "", nil},
		{"GET", "/nope", "", nil},
		{"DELETE", "/v1/ids", "", nil},
		{"GET", "/admin/v1/faults", "", nil},
		{"POST", "/admin/v1/faults", `{"kind":"warp"}`, auth},
		{"POST", "/admin/v1/faults", `{"kind":"step","by":"` + strings.Repeat("1", DefaultMaxBodyBytes) + `s"}`, auth},
	} {
		c1, h1, b1 := served.do(t, tc.method, tc.path, tc.hdr, tc.body)
		c2, h2, b2 := embedded.do(t, tc.method, tc.path, tc.hdr, tc.body)
		what := tc.method + " " + tc.path
		if c1 != c2 || h1.Get("Content-Type") != h2.Get("Content-Type") || h1.Get("Allow") != h2.Get("Allow") || h1.Get("Cache-Control") != h2.Get("Cache-Control") {
			t.Errorf("%s: served %d %q, embedded %d %q", what, c1, h1, c2, h2)
		}
		if c1 >= 400 && b1 != b2 {
			var e1, e2 ErrorBody
			json.Unmarshal([]byte(b1), &e1)
			json.Unmarshal([]byte(b2), &e2)
			if e1.Error != e2.Error || e1.Error == "" {
				t.Errorf("%s: served %s, embedded %s", what, b1, b2)
			}
		}
	}
}
