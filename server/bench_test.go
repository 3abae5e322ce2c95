package server

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
)

// The benchmarks here run their reference in the same run and report
// x-<reference>: the subject's cost over the reference's (1.00: level).

// pair runs the reference and the subject b.N times each, alternating in
// chunks of chunk runs (so both meet the same load on a shared machine),
// and reports both per op and their ratio as x-name. ns/op is the two
// together.
func pair(b *testing.B, name string, chunk int, ref, subject func(n int)) {
	b.ReportAllocs()
	var r, s time.Duration
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		t0 := time.Now()
		ref(n)
		t1 := time.Now()
		subject(n)
		s += time.Since(t1)
		r += t1.Sub(t0)
	}
	b.ReportMetric(float64(s)/float64(b.N), "subject-ns/op")
	b.ReportMetric(float64(r)/float64(b.N), name+"-ns/op")
	b.ReportMetric(float64(s)/float64(r), "x-"+name)
}

// handlerLoop returns a loop running h n times on a reused request.
func handlerLoop(b *testing.B, h fasthttp.RequestHandler, path string) func(n int) {
	var c fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI(path)
	c.Init(&req, nil, nil)
	return func(n int) {
		for range n {
			c.Response.Reset()
			h(&c)
			if c.Response.StatusCode() != 200 {
				b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
			}
		}
	}
}

// benchServer returns a Server with the default config over a fresh
// generator for node 1, closed at the end of the benchmark.
func benchServer(b *testing.B) *Server {
	b.Helper()
	srv, err := New(Config{Node: buildNode(b, generator.Settings{Node: 1}, false), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkRouteID runs the node's whole request path for GET /v1/id
// (routing, metrics, the generator, the body) without a network, against
// a handler answering a constant with the same headers: the difference is
// what the node adds to a bare fasthttp server per request.
func BenchmarkRouteID(b *testing.B) {
	srv := benchServer(b)
	body := []byte("7230000000000000001\n")
	constant := func(c *fasthttp.RequestCtx) { setBody(c, ctText, body) }
	pair(b, "constant", 256, handlerLoop(b, constant, "/v1/id"), handlerLoop(b, srv.main, "/v1/id"))
}

// memConn is a connection in memory for the HTTP/1.1 server: each Read
// returns one whole request until n have been read, then io.EOF; writes
// are counted and dropped; deadlines are accepted and ignored.
type memConn struct {
	req     []byte
	n       int
	written int
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.n == 0 {
		return 0, io.EOF
	}
	c.n--
	return copy(p, c.req), nil
}
func (c *memConn) Write(p []byte) (int, error)      { c.written += len(p); return len(p), nil }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// connLoop returns a loop serving n GET /v1/id requests on one in-memory
// keep-alive connection (wrapped by wrap) with serve.
func connLoop(b *testing.B, serve func(net.Conn) error, wrap func(net.Conn) net.Conn) func(n int) {
	req := []byte("GET /v1/id HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: bench\r\n\r\n")
	return func(n int) {
		mc := &memConn{req: req, n: n}
		if err := serve(wrap(mc)); err != nil {
			b.Fatal(err)
		}
		if min := n * len("HTTP/1.1 200 OK\r\n\r\n7230000000000000001\n"); mc.written < min {
			b.Fatalf("%d bytes written for %d requests", mc.written, n)
		}
	}
}

// BenchmarkServeConnID runs the node's whole HTTP/1.1 path for GET /v1/id
// (fasthttp's connection loop with the node's settings, the connection
// wrapper keeping the limiter's books and the timeouts, routing, metrics,
// the generator, the body) on an in-memory connection, against a bare
// fasthttp server with default settings answering a constant with the
// same headers: what the node adds per request, without the kernel's
// share (loadbench measures that).
func BenchmarkServeConnID(b *testing.B) {
	srv := benchServer(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	lim := newConnLimiter(ln, srv.cfg.MaxConns)
	sv := srv.newServing(lim, srv.main, srv.handler)
	nodeConn := func(c net.Conn) net.Conn {
		lim.mu.Lock()
		lc := lim.admitLocked(c)
		lim.mu.Unlock()
		first := monoNow().add(sv.h1t.readHeader)
		return sv.h1Conn(lc, first)
	}
	body := []byte("7230000000000000001\n")
	bare := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(c *fasthttp.RequestCtx) { setBody(c, ctText, body) }}
	same := func(c net.Conn) net.Conn { return c }
	pair(b, "fasthttp", 512, connLoop(b, bare.ServeConn, same), connLoop(b, sv.h1.ServeConn, nodeConn))
}

// BenchmarkAppendIDList encodes a 4,096-ID batch (one tick's worth) into
// a reused buffer, in text and JSON, against copying a body of the same
// size: the encoding cost of one /v1/ids?count=4096 over its floor.
func BenchmarkAppendIDList(b *testing.B) {
	gen, err := generator.New(generator.Settings{Node: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	ids := make([]generator.ID, 4096)
	if _, err := gen.NextN(ids); err != nil {
		b.Fatal(err)
	}
	for _, asJSON := range []bool{false, true} {
		body := AppendIDList(nil, ids, asJSON)
		b.Run(map[bool]string{false: "text", true: "json"}[asJSON], func(b *testing.B) {
			buf := make([]byte, 0, len(body)+4096)
			pair(b, "copy", 1,
				func(n int) {
					for range n {
						buf = append(buf[:0], body...)
					}
				},
				func(n int) {
					for range n {
						buf = AppendIDList(buf[:0], ids, asJSON)
					}
				})
		})
	}
}

// processCPU is the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopback returns a loop sending n GET /v1/id requests over 8 loopback
// keep-alive connections (fasthttp's client) to addr.
func loopback(b *testing.B, addr string) func(n int) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 8}
	b.Cleanup(hc.CloseIdleConnections)
	return func(n int) {
		work := make(chan struct{}, n)
		for range n {
			work <- struct{}{}
		}
		close(work)
		done := make(chan struct{})
		for range 8 {
			go func() {
				defer func() { done <- struct{}{} }()
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				req.SetRequestURI("http://" + addr + "/v1/id")
				for range work {
					if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
						b.Errorf("%v %d", err, resp.StatusCode())
						return
					}
				}
			}()
		}
		for range 8 {
			<-done
		}
	}
}

// BenchmarkLoopbackID sends GET /v1/id over loopback TCP to the node
// (Serve) and to a bare fasthttp server answering a constant, and
// reports the process's CPU time per request of each and their ratio
// (x-fasthttp). Client and servers share the process, so the ratio
// understates the node's: it is a quick check, loadbench the measure.
func BenchmarkLoopbackID(b *testing.B) {
	srv := benchServer(b)
	node := strings.TrimPrefix(serveOn(b, srv), "http://")
	body := []byte("7230000000000000001\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bare := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(c *fasthttp.RequestCtx) { setBody(c, ctText, body) }}
	go bare.Serve(ln)
	b.Cleanup(func() { bare.Shutdown() })
	refLoop, nodeLoop := loopback(b, ln.Addr().String()), loopback(b, node)
	b.ReportAllocs()
	c0 := processCPU()
	refLoop(b.N)
	c1 := processCPU()
	nodeLoop(b.N)
	c2 := processCPU()
	r, s := float64(c1-c0)/float64(b.N), float64(c2-c1)/float64(b.N)
	b.ReportMetric(s, "subject-cpu-ns/op")
	b.ReportMetric(r, "fasthttp-cpu-ns/op")
	b.ReportMetric(s/r, "x-fasthttp")
}

// BenchmarkStrictFraming runs the node's framing check (strict) on a
// parsed GET /v1/id, against fasthttp parsing that request's header: what
// the check adds to the parse every request pays anyway.
func BenchmarkStrictFraming(b *testing.B) {
	raw := "GET /v1/id HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	var h fasthttp.RequestHeader
	rd := strings.NewReader(raw)
	br := bufio.NewReaderSize(rd, 4096)
	parse := func(n int) {
		for range n {
			rd.Reset(raw)
			br.Reset(rd)
			if err := h.Read(br); err != nil {
				b.Fatal(err)
			}
		}
	}
	parse(1)
	check := func(n int) {
		for range n {
			if code, _ := framingError(&h); code != 0 {
				b.Fatal(code)
			}
		}
	}
	pair(b, "parse", 1024, parse, check)
}
