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
)

func TestDirectTransport(t *testing.T) {
	var conns atomic.Int32
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
	tr := &DirectTransport{}
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
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/slow", nil)
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
