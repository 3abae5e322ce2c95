package server

import (
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
)

// benchHandler runs h on a reused request for path, b.N times.
func benchHandler(b *testing.B, h fasthttp.RequestHandler, path string, accept string) {
	var c fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI(path)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c.Init(&req, nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.Response.Reset()
		h(&c)
		if c.Response.StatusCode() != 200 {
			b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
		}
	}
}

// BenchmarkRouteID compares the node's whole request path for GET /v1/id
// (routing, metrics, the generator, the body) without a network with a
// handler that answers a constant, the cost fasthttp's bare server adds:
// the difference is what the node adds per request.
func BenchmarkRouteID(b *testing.B) {
	gen, err := generator.New(generator.Settings{Node: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	srv, err := New(Config{Generator: gen, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("7230000000000000001\n")
	b.Run("node", func(b *testing.B) { benchHandler(b, srv.main, "/v1/id", "") })
	b.Run("constant", func(b *testing.B) {
		benchHandler(b, func(c *fasthttp.RequestCtx) {
			c.Response.Header.SetContentTypeBytes(ctText)
			c.Response.Header.SetBytesKV(hdrCacheControl, valNoStore)
			c.SetBody(body)
		}, "/v1/id", "")
	})
}

// benchLoopback sends b.N GET /v1/id requests over loopback keep-alive
// connections (8 at a time, fasthttp's client) to a server on ln.
func benchLoopback(b *testing.B, addr string) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 8}
	defer hc.CloseIdleConnections()
	b.SetParallelism(4)
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + addr + "/v1/id")
		for pb.Next() {
			if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("%v %d", err, resp.StatusCode())
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoopbackID compares GET /v1/id over loopback TCP on the node
// (Serve) with bare fasthttp servers answering a constant: with default
// settings, and with the node's timeouts. Client and servers share the
// process, so only the differences between the rows mean something.
func BenchmarkLoopbackID(b *testing.B) {
	gen, err := generator.New(generator.Settings{Node: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	srv, err := New(Config{Generator: gen, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	url := serveOn(b, srv)
	body := []byte("7230000000000000001\n")
	constant := func(c *fasthttp.RequestCtx) {
		c.Response.Header.SetContentTypeBytes(ctText)
		c.Response.Header.SetBytesKV(hdrCacheControl, valNoStore)
		c.SetBody(body)
	}
	bare := func(s *fasthttp.Server) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go s.Serve(ln)
		b.Cleanup(func() { s.Shutdown() })
		return ln.Addr().String()
	}
	plain := bare(&fasthttp.Server{Handler: constant, NoDefaultServerHeader: true})
	timed := bare(&fasthttp.Server{Handler: constant, NoDefaultServerHeader: true, ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second})
	for range 3 {
		b.Run("node", func(b *testing.B) { benchLoopback(b, strings.TrimPrefix(url, "http://")) })
		b.Run("fasthttp", func(b *testing.B) { benchLoopback(b, plain) })
		b.Run("fasthttp-timeouts", func(b *testing.B) { benchLoopback(b, timed) })
	}
}

// BenchmarkAppendIDList encodes a 4,096-ID batch (one tick's worth) into
// a reused buffer, in text and JSON, beside the floor of copying a body
// of the same size: per op, the encoding cost of one /v1/ids?count=4096.
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
		name := map[bool]string{false: "text", true: "json"}[asJSON]
		body := AppendIDList(nil, ids, asJSON)
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for range b.N {
				buf = AppendIDList(buf[:0], ids, asJSON)
			}
		})
		b.Run(name+"-copy", func(b *testing.B) {
			buf := make([]byte, len(body))
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for range b.N {
				copy(buf, body)
			}
		})
	}
}
