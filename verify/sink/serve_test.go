package sink

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// serveSink serves s's protocol on a loopback port with cfg.
func serveSink(t *testing.T, s *Sink, cfg HTTPConfig, onRefuse func()) (*handler, *Server) {
	t.Helper()
	h, err := s.newHandler(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(ln, h.mux, cfg, onRefuse)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.srv.Close() })
	return h, srv
}

// answer is a decoded JSON answer of the sink.
type answer struct {
	code int
	m    map[string]any
}

// postBody posts body (chunked: no Content-Length) to /v1/ids.
func postBody(t *testing.T, base string, body io.Reader) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/ids", body)
	req.ContentLength = -1
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("answer %d is not JSON: %v", resp.StatusCode, err)
	}
	return answer{resp.StatusCode, m}
}

// lines returns n lines of the IDs from first on, one a line.
func lines(first, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", first+i)
	}
	return b.String()
}

// TestHTTPBodyStopsPartWay: a chunked body past MaxBody and a body that
// stalls past RequestTimeout are answered with exactly what was verified
// and the line and byte where they stopped.
func TestHTTPBodyStopsPartWay(t *testing.T) {
	s := newSink(t, Config{})
	_, srv := serveSink(t, s, HTTPConfig{MaxBody: 1024, RequestTimeout: 300 * time.Millisecond}, nil)
	base := "http://" + srv.Addr().String()

	// 1,024 bytes are 204 lines of 5 bytes and 4 bytes of the 205th.
	a := postBody(t, base, strings.NewReader(lines(1000, 600)))
	if a.code != 413 || a.m["ids"] != 204.0 || a.m["line"] != 205.0 || a.m["byte"] != 1024.0 ||
		!strings.Contains(a.m["error"].(string), "grew past 1024 bytes") || !strings.Contains(a.m["error"].(string), "lines 1 to 204 were verified") {
		t.Fatalf("%d %v", a.code, a.m)
	}
	// Three lines, then nothing: the deadline ends the body.
	pr, pw := io.Pipe()
	go pw.Write([]byte(lines(20000, 3) + "200"))
	a = postBody(t, base, pr)
	pw.Close()
	if a.code != 408 || a.m["ids"] != 3.0 || a.m["line"] != 4.0 || a.m["byte"] != 21.0 || !strings.Contains(a.m["error"].(string), "not read within 300ms") {
		t.Fatalf("%d %v", a.code, a.m)
	}
	if tot := s.Totals(); tot.IDs != 207 || tot.Incomplete != 2 || tot.ExitCode(0) != ExitInvalid {
		t.Fatalf("%+v", tot)
	}
}

// TestHTTPRequestSlots: a body waits for a slot while MaxRequests bodies
// are read, and is refused 503 with Retry-After, unread, when none frees
// within RequestTimeout.
func TestHTTPRequestSlots(t *testing.T) {
	s := newSink(t, Config{})
	h, srv := serveSink(t, s, HTTPConfig{MaxRequests: 1, RequestTimeout: 200 * time.Millisecond}, nil)
	base := "http://" + srv.Addr().String()
	h.slots <- struct{}{} // a body is being read
	a := postBody(t, base, strings.NewReader(lines(100, 2)))
	if a.code != 503 || !strings.Contains(a.m["error"].(string), "1 requests are being verified") {
		t.Fatalf("%d %v", a.code, a.m)
	}
	if tot := s.Totals(); tot.Refused != 1 || tot.IDs != 0 || tot.Batches != 0 {
		t.Fatalf("%+v", tot)
	}
	// The slot frees while the next one waits: it is verified.
	done := make(chan answer, 1)
	go func() { done <- postBody(t, base, strings.NewReader(lines(100, 2))) }()
	<-h.slots
	if a := <-done; a.code != 200 || a.m["ids"] != 2.0 {
		t.Fatalf("%d %v", a.code, a.m)
	}
}

// TestHTTPConnLimit: at MaxConns a new connection closes the longest-idle
// one; when every connection is busy it is answered 503 (JSON, with
// Retry-After) and closed.
func TestHTTPConnLimit(t *testing.T) {
	s := newSink(t, Config{})
	var refused atomic.Int32
	_, srv := serveSink(t, s, HTTPConfig{MaxConns: 1}, func() { refused.Add(1) })
	addr := srv.Addr().String()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, br *bufio.Reader) *http.Response {
		t.Helper()
		io.WriteString(c, "GET /v1/totals HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		return resp
	}
	c1, br1 := dial()
	if r := get(c1, br1); r.StatusCode != 200 {
		t.Fatal(r.Status)
	}
	lim := srv.lim
	testenv.WaitFor(t, 30*time.Second, func() bool { _, idle := lim.stats(); return idle == 1 }, "the first connection is not idle")
	// A second connection takes the idle one's place.
	c2, br2 := dial()
	if r := get(c2, br2); r.StatusCode != 200 {
		t.Fatal(r.Status)
	}
	if _, err := br1.ReadByte(); err == nil {
		t.Fatal("the idle connection was not closed to make room")
	}
	// c2 busy with a body that has not come yet: a third is refused.
	io.WriteString(c2, "POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	testenv.WaitFor(t, 30*time.Second, func() bool { _, idle := lim.stats(); return idle == 0 }, "the second connection is not busy")
	c3, br3 := dial()
	io.WriteString(c3, "GET /v1/totals HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br3, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(m["error"], "connection limit 1 reached") || refused.Load() != 1 {
		t.Fatalf("%s %v %v, refused %d", resp.Status, m, err, refused.Load())
	}
}
