package server

import (
	"bufio"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// serveLimited serves a node with MaxConns max on a loopback listener and
// returns the server and its address.
func serveLimited(t *testing.T, max int) (*Server, string) {
	t.Helper()
	srv, err := New(Config{Node: buildNode(t, generator.Settings{Node: 2}, false), MaxConns: max, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base := serveOn(t, srv)
	testenv.WaitFor(t, 10*time.Second, func() bool { return srv.lim.Load() != nil }, "Serve did not start")
	return srv, strings.TrimPrefix(base, "http://")
}

// rawGet sends GET path on c and reads the response.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) (int, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// dial opens a connection to addr, closed at the end of the test.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestConnLimitEvictsIdle fills the limit with idle keep-alive connections:
// a new one still gets its answer, and the longest-idle one is closed.
func TestConnLimitEvictsIdle(t *testing.T) {
	srv, addr := serveLimited(t, 3)
	lim := srv.lim.Load()
	var conns []net.Conn
	for i := range 3 {
		c, br := dial(t, addr)
		if code, body := rawGet(t, c, br, "/healthz"); code != 200 {
			t.Fatal(code, body)
		}
		conns = append(conns, c)
		// The server marks a connection idle after its answer is sent:
		// wait for it, so the connections go idle in order.
		testenv.WaitFor(t, 10*time.Second, func() bool { open, idle := lim.stats(); return open == i+1 && idle == i+1 }, "an idle connection")
	}
	c, br := dial(t, addr)
	if code, body := rawGet(t, c, br, "/healthz"); code != 200 {
		t.Fatalf("/healthz at the limit with idle connections: %d %s", code, body)
	}
	conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conns[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the longest-idle connection: read %d, %v; want EOF (closed)", n, err)
	}
	if open, _ := lim.stats(); open != 3 {
		t.Fatalf("%d connections open, want 3", open)
	}
}

// TestConnLimitRefusesWhenBusy fills the limit with connections that are
// not idle: a new one is answered 503 at once, naming the limit, and is
// served again once a slot frees.
func TestConnLimitRefusesWhenBusy(t *testing.T) {
	srv, addr := serveLimited(t, 2)
	lim := srv.lim.Load()
	busy, _ := dial(t, addr)
	dial(t, addr)
	testenv.WaitFor(t, 10*time.Second, func() bool { open, _ := lim.stats(); return open == 2 }, "2 open connections")
	c, br := dial(t, addr)
	code, body := rawGet(t, c, br, "/healthz")
	if code != 503 || !strings.Contains(body, "connection limit 2 reached") {
		t.Fatalf("at the limit, all busy: %d %s; want 503 naming the limit", code, body)
	}
	busy.Close()
	testenv.WaitFor(t, 10*time.Second, func() bool { open, _ := lim.stats(); return open == 1 }, "a freed slot")
	c, br = dial(t, addr)
	if code, body := rawGet(t, c, br, "/healthz"); code != 200 {
		t.Fatalf("after a slot freed: %d %s", code, body)
	}
}

// TestConnLimitShedding fills the limit with a busy connection, then
// keeps MaxShedding refusals in flight (clients that read their 503 and
// hold the connection open while the node drains it): a connection
// arriving then is closed without a response; once a refusal ends, a new
// one is answered 503 again.
func TestConnLimitShedding(t *testing.T) {
	srv, addr := serveLimited(t, 1)
	lim := srv.lim.Load()
	lim.shedFor.Store(int64(time.Minute)) // the refusals stay in flight until their clients close
	dial(t, addr)
	testenv.WaitFor(t, 10*time.Second, func() bool { open, _ := lim.stats(); return open == 1 }, "the busy connection")
	var shed []net.Conn
	for range MaxShedding {
		c, br := dial(t, addr)
		if code, body := rawGet(t, c, br, "/healthz"); code != 503 || !strings.Contains(body, "connection limit 1 reached") {
			t.Fatalf("refusal %d: %d %s; want 503 naming the limit", len(shed)+1, code, body)
		}
		shed = append(shed, c)
	}
	testenv.WaitFor(t, 10*time.Second, func() bool { return lim.shedding.Load() == MaxShedding }, "MaxShedding refusals in flight")
	c, br := dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("with %d refusals in flight a new connection was answered %d, want closed without a response", MaxShedding, resp.StatusCode)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("with %d refusals in flight a new connection was left open (%v), want closed", MaxShedding, err)
	}
	shed[0].Close()
	testenv.WaitFor(t, 10*time.Second, func() bool { return lim.shedding.Load() < MaxShedding }, "a refusal to end")
	c, br = dial(t, addr)
	if code, body := rawGet(t, c, br, "/healthz"); code != 503 {
		t.Fatalf("after a refusal ended: %d %s, want 503", code, body)
	}
}

func TestDefaultMaxConns(t *testing.T) {
	for nofile, want := range map[uint64]int{0: 1, 64: 1, 65: 1, 128: 64, 1024: 960, 1 << 40: MaxConnsLimit} {
		if got := DefaultMaxConns(nofile); got != want {
			t.Errorf("DefaultMaxConns(%d) = %d, want %d", nofile, got, want)
		}
	}
}

// TestIdleListMatchesModel drives the limiter's idle list with random
// state changes and checks it against a plain slice, oldest first.
func TestIdleListMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := newConnLimiter(nil, 100)
	conns := make([]*limitedConn, 8)
	for i := range conns {
		conns[i] = &limitedConn{l: l}
	}
	var model []*limitedConn
	for step := range 10000 {
		c := conns[rng.IntN(len(conns))]
		idle := rng.IntN(2) == 0
		c.setIdle(idle)
		i := slices.Index(model, c)
		switch {
		case idle && i < 0:
			model = append(model, c)
		case !idle && i >= 0:
			model = slices.Delete(model, i, i+1)
		}
		var got []*limitedConn
		for x := l.mu.idle.head; x != nil; x = x.next {
			got = append(got, x)
		}
		if !slices.Equal(got, model) || l.mu.nIdle != len(model) {
			t.Fatalf("step %d: idle list %p (%d), want %p", step, got, l.mu.nIdle, model)
		}
	}
}
