package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestTransport(t *testing.T) {
	var conns, drops atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/slow":
			<-r.Context().Done()
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Method", r.Method)
			w.Header().Set("X-Query", r.URL.RawQuery)
			w.Header().Set("X-Got", r.Header.Get("X-Sent"))
			w.WriteHeader(http.StatusCreated)
			w.Write(b)
		case "/drop":
			// Hang up without an answer: a retrying client would ask again.
			drops.Add(1)
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		default:
			w.Write([]byte("ok"))
		}
	})
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	get := func(path string) (string, error) {
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for i := range 50 {
		if body, err := get("/"); err != nil || body != "ok" {
			t.Fatalf("request %d: %q %v", i, body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("50 sequential requests used %d connections, want 1 (keep-alive)", n)
	}
	if body, err := get("/chunked"); err != nil || body != "ab" {
		t.Fatalf("chunked: %q %v", body, err)
	}
	if body, err := get("/close"); err != nil || body != "bye" {
		t.Fatalf("close: %q %v", body, err)
	}
	if body, err := get("/"); err != nil || body != "ok" {
		t.Fatalf("after close: %q %v", body, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one closed by the server)", n)
	}

	// A body, a query and headers both ways.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/echo?x=1", strings.NewReader(`{"kind":"step"}`))
	req.Header.Set("X-Sent", "yes")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(b) != `{"kind":"step"}` || resp.ContentLength != int64(len(b)) ||
		resp.Header.Get("X-Method") != "POST" || resp.Header.Get("X-Query") != "x=1" || resp.Header.Get("X-Got") != "yes" {
		t.Fatalf("echo: %d %q %v", resp.StatusCode, b, resp.Header)
	}

	// Never retried: one failed request reaches the server once.
	if _, err := get("/drop"); err == nil {
		t.Fatal("a dropped connection gave no error")
	}
	if n := drops.Load(); n != 1 {
		t.Fatalf("the dropped request reached the server %d times, want 1 (no retry)", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", ts.URL+"/slow", nil)
	if _, err := c.Do(req); err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("slow request: %v, want a deadline error", err)
	}
	if body, err := get("/"); err != nil || body != "ok" {
		t.Fatalf("after a timeout: %q %v", body, err)
	}
	if _, err := (&http.Client{Transport: tr}).Get("https://127.0.0.1:1/"); !errors.Is(err, errScheme) {
		t.Fatalf("https: %v", err)
	}
}

// constServer serves a constant ID on loopback with fasthttp's defaults:
// the cheapest server there is, so the client's cost stands out.
func constServer(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) { c.SetBodyString("1234567890123456789\n") }}
	go s.Serve(ln)
	b.Cleanup(func() { s.Shutdown() })
	return "http://" + ln.Addr().String() + "/v1/id"
}

// roundTrips sends n sequential GETs of url through c and returns how
// long they took.
func roundTrips(b *testing.B, c *http.Client, url string, n int) time.Duration {
	start := time.Now()
	for range n {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	return time.Since(start)
}

// BenchmarkTransport is one keep-alive GET at a time against a constant
// server, through Transport and, in alternating blocks of the same run,
// through net/http's Transport (x-std: Transport over net/http's).
func BenchmarkTransport(b *testing.B) {
	url := constServer(b)
	fast := &http.Client{Timeout: 5 * time.Second, Transport: &Transport{}}
	std := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	roundTrips(b, fast, url, 10)
	roundTrips(b, std, url, 10)
	b.ResetTimer()
	var tf, ts time.Duration
	for left := b.N; left > 0; left -= 256 {
		n := min(left, 256)
		tf += roundTrips(b, fast, url, n)
		ts += roundTrips(b, std, url, n)
	}
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "subject-ns/op")
	b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "std-ns/op")
	b.ReportMetric(float64(tf)/float64(ts), "x-std")
}
