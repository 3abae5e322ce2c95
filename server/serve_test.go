package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// TestBudgetCtx checks the lazy request context: no timer until asked,
// the deadline and the cause once asked, and an ended context after
// release.
func TestBudgetCtx(t *testing.T) {
	b := newIDBudget(time.Hour, 10*time.Millisecond)
	start := monoNow()
	c := newBudgetCtx(context.Background(), start, b)
	if dl, ok := c.Deadline(); !ok || !dl.Equal(start.time().Add(b.d)) {
		t.Fatalf("deadline %v %v, want %v", dl, ok, start.time().Add(b.d))
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

	if !errors.Is(c.Err(), context.Canceled) && !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("after release: %v, want an ended context", c.Err())
	}

	// A context asked for Done is ended by release and never reused.
	c = newBudgetCtx(context.Background(), monoNow(), newIDBudget(time.Hour, time.Hour))
	done := c.Done()
	c.release()
	select {
	case <-done:
	default:
		t.Fatal("release did not end a context whose Done was asked for")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after release: %v, want Canceled", c.Err())
	}

	// One never asked goes back to the pool, reset: the next request's
	// context carries its own parent, deadline and cause only.
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	c = newBudgetCtx(parent, monoNow(), newIDBudget(time.Hour, time.Hour))
	if c.Value(key{}) != "v" || c.inner != nil {
		t.Fatal("Value does not reach the parent without a timer")
	}
	c.release()
	for range 100 {
		next := newBudgetCtx(context.Background(), start, b)
		if next.Value(key{}) != nil || next.inner != nil || next.released || next.cause != b.cause {
			t.Fatalf("a recycled context kept the last request's state: %+v", next)
		}
		next.release()
	}
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
			resp, body, _ := exchange(t, addr, tc.raw)
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
	id, _ := served.nd.Generator().Next()
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

// TestLazyDeadline checks that a lazy deadline never fires later than
// wanted, and never ends I/O before the wanted deadline when an earlier
// one is still armed.
func TestLazyDeadline(t *testing.T) {
	pipe := func() (*limitedConn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &limitedConn{Conn: a, timeouts: &h1Timeouts{}}, b
	}
	// Tightened: far, then near: the near one fires.
	c, _ := pipe()
	c.SetReadDeadline(time.Now().Add(time.Hour))
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past a tightened deadline: %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the 50 ms deadline fired after %v", took)
	}
	// Moved on: near, then far: the near one, still armed, fires and the
	// read goes on until the peer writes.
	c, peer := pipe()
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	armed := c.rd.armed.time()
	c.SetReadDeadline(time.Now().Add(time.Hour))
	if !c.rd.armed.time().Equal(armed) {
		t.Fatal("a later deadline was armed at once")
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		got <- err
	}()
	// The peer writes once the armed deadline has passed (its own write
	// blocks until the read takes the byte).
	testenv.WaitFor(t, 10*time.Second, func() bool { return time.Now().After(armed.Add(20 * time.Millisecond)) }, "the armed deadline to pass")
	if _, err := peer.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("read with the wanted deadline an hour away: %v", err)
	}
	// Writes: an early armed deadline is moved on too.
	c, peer = pipe()
	c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	armed = c.wd.armed.time()
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	go func() {
		// The peer reads once the armed deadline has passed.
		testenv.Eventually(context.Background(), 10*time.Second, func() bool { return time.Now().After(armed.Add(20 * time.Millisecond)) })
		io.ReadAll(peer)
	}()
	if n, err := c.Write(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("write with the wanted deadline an hour away: %d, %v", n, err)
	}
}

// TestTimeouts checks the serving timeouts: an idle keep-alive
// connection stays open until IdleTimeout (although the read deadline of
// its last request fired long before) and is closed after it; a request
// whose headers do not arrive within ReadHeaderTimeout is cut off.
func TestTimeouts(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) {
		c.ReadHeaderTimeout = 100 * time.Millisecond
		c.ReadTimeout = 100 * time.Millisecond
		c.IdleTimeout = 2 * time.Second
	})
	addr := strings.TrimPrefix(n.url, "http://")
	c, br := dial(t, addr)
	if code, body := rawGet(t, c, br, "/v1/id"); code != 200 {
		t.Fatal(code, body)
	}
	// Still open 600 ms later: the client's read times out, not EOF.
	c.SetReadDeadline(time.Now().Add(600 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle connection 600 ms after its request (idle timeout 2s): %v, want it open", err)
	}
	if code, body := rawGet(t, c, br, "/v1/id"); code != 200 {
		t.Fatal(code, body)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle connection past its idle timeout: %v, want EOF (closed)", err)
	}
	// Headers that never end: the node answers 408 or closes, within
	// seconds.
	c, _ = dial(t, addr)
	io.WriteString(c, "GET /v1/id HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || (len(b) > 0 && !strings.Contains(string(b), " 408 ")) {
		t.Fatalf("unfinished headers: %q, %v; want a 408 or a close", b, err)
	}
}

// TestTimeoutsLaterRequest checks the timeouts a keep-alive connection
// keeps after its first request: a later request's headers are due within
// ReadHeaderTimeout of its first byte (not the idle timeout, a minute),
// and a response the client does not read is given up WriteTimeout after
// its request began: the connection is closed.
func TestTimeoutsLaterRequest(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) {
		c.ReadHeaderTimeout = 200 * time.Millisecond
		c.ReadTimeout = 200 * time.Millisecond
		c.IdleTimeout = time.Minute
	})
	addr := strings.TrimPrefix(n.url, "http://")
	c, br := dial(t, addr)
	for range 3 {
		if code, body := rawGet(t, c, br, "/v1/id"); code != 200 {
			t.Fatal(code, body)
		}
	}
	io.WriteString(c, "GET /v1/id HTTP/1.1\r\nHost: x\r\n")
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(br)
	if err != nil || (len(b) > 0 && !strings.Contains(string(b), " 408 ")) {
		t.Fatalf("unfinished headers on a keep-alive connection: %q, %v; want a 408 or a close", b, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("unfinished headers cut off after %v: the read header timeout is 200 ms (idle: a minute)", took)
	}

	n = newNode(t, func(_ *generator.Settings, c *Config) {
		c.ReadHeaderTimeout = 10 * time.Second
		c.IdleTimeout = time.Minute
		c.WriteTimeout = 300 * time.Millisecond
	})
	addr = strings.TrimPrefix(n.url, "http://")
	c, _ = dial(t, addr)
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	const requests = 400 // about 30 MB of answers, beyond the socket buffers
	if _, err := io.WriteString(c, strings.Repeat("GET /v1/ids?count=4096 HTTP/1.1\r\nHost: x\r\n\r\n", requests)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the node's writes block, then time out
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection still open 20 s after its writes blocked (%d bytes read): the write timeout is 300 ms", got)
	}
	if got >= requests*4096*20 {
		t.Fatalf("read %d bytes, every answer: the node's writes never blocked; the test needs more requests", got)
	}
	// The node serves on.
	c, br = dial(t, addr)
	if code, body := rawGet(t, c, br, "/v1/id"); code != 200 {
		t.Fatal(code, body)
	}
}

// TestServeCancelledAtOnce serves with a context that ends at once, with
// and without an admin listener: the shutdown must not race the start of
// the serving goroutines (it did under -race: the WaitGroup's Add in the
// serving goroutine against the Wait in shutdown).
func TestServeCancelledAtOnce(t *testing.T) {
	nd := buildNode(t, generator.Settings{Node: 1}, true)
	for i := range 20 {
		cfg := Config{Node: nd, Logger: slog.New(slog.DiscardHandler)}
		if i%2 == 1 {
			cfg.AdminToken = testToken
		}
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var admin net.Listener
		if cfg.AdminToken != "" {
			if admin, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := srv.Serve(ctx, ln, admin); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}
