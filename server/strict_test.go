package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// exchange sends raw on a new connection, reads one response and reports
// whether the server then closed the connection: it sends a second
// request, which a kept connection answers.
func exchange(t *testing.T, addr, raw string) (resp *http.Response, body string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, raw)
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, &http.Request{Method: strings.Fields(raw)[0]})
	if err != nil {
		t.Fatalf("%q: reading the response: %v", raw, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%q: reading the body: %v", raw, err)
	}
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	next, err := http.ReadResponse(br, nil)
	if err == nil {
		next.Body.Close()
	}
	return resp, string(b), err != nil
}

// TestStrictFraming sends the requests RFC 9112 says a server must reject
// (ambiguous or invalid framing, an unknown major version, a malformed
// field line, a missing or repeated Host): each is answered with its
// status and the node's JSON error, and a framing error closes the
// connection. Well-formed neighbours of each case are served.
func TestStrictFraming(t *testing.T) {
	n := newNode(t, nil)
	addr := strings.TrimPrefix(n.url, "http://")
	const h = "Host: x\r\n"
	for _, tc := range []struct {
		name, raw string
		code      int
		closes    bool
	}{
		// RFC 9112 §6.1: both length headers is the smuggling shape.
		{"CL and TE", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"TE and CL on GET", "GET /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n", 400, true},
		// RFC 9112 §6.3: an invalid Content-Length is unrecoverable.
		{"differing CLs", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, true},
		{"CL list", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: 1, 2\r\n\r\nab", 400, true},
		{"CL not a number", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: abc\r\n\r\n", 400, true},
		{"CL negative", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: -1\r\n\r\n", 400, true},
		{"CL signed", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: +1\r\n\r\na", 400, true},
		{"CL hex", "POST /v1/id HTTP/1.1\r\n" + h + "Content-Length: 0x1\r\n\r\na", 400, true},
		// RFC 9112 §6.3: chunked not last on a request is a 400 and a close;
		// §6.1: a coding the server does not know is a 501.
		{"TE gzip", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip\r\n\r\n", 400, true},
		{"TE identity", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: identity\r\n\r\n", 400, true},
		{"TE chunked then gzip", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked, gzip\r\n\r\n", 400, true},
		{"TE chunked twice", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"TE gzip then chunked", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, true},
		// RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing.
		{"TE in HTTP/1.0", "POST /v1/id HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		// RFC 9112 §2.6, RFC 9110 §15.6.6: only major version 1 here.
		{"HTTP/9.9", "GET /v1/id HTTP/9.9\r\n" + h + "\r\n", 505, true},
		{"HTTP/2.0 without the preface", "GET /v1/id HTTP/2.0\r\n" + h + "\r\n", 505, true},
		{"HTTP/0.9", "GET /v1/id HTTP/0.9\r\n" + h + "\r\n", 505, true},
		// RFC 9112 §5.1: no whitespace between a field name and the colon.
		{"space before colon", "GET /v1/id HTTP/1.1\r\nHost : x\r\n\r\n", 400, true},
		{"tab before colon", "GET /v1/id HTTP/1.1\r\n" + h + "X-A\t: b\r\n\r\n", 400, true},
		// RFC 9112 §3.2: exactly one Host in HTTP/1.1.
		{"no Host", "GET /v1/id HTTP/1.1\r\n\r\n", 400, true},
		{"two Hosts", "GET /v1/id HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, true},
		{"empty and non-empty Host", "GET /v1/id HTTP/1.1\r\nHost:\r\nHost: b\r\n\r\n", 400, true},
		// RFC 9110 §4.2.1: an http URI has a non-empty host, so an empty
		// Host is an invalid one (RFC 9112 §3.2).
		{"empty Host", "GET /v1/id HTTP/1.1\r\nHost:\r\n\r\n", 400, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, closed := exchange(t, addr, tc.raw)
			wantError(t, resp.StatusCode, resp.Header, body, tc.code, errorShort(tc.code))
			if closed != tc.closes {
				t.Errorf("connection closed %v, want %v", closed, tc.closes)
			}
		})
	}
	for _, tc := range []struct{ name, raw string }{
		{"HTTP/1.0 without Host", "GET /v1/id HTTP/1.0\r\n\r\n"},
		{"HTTP/1.2 as 1.1", "GET /v1/id HTTP/1.2\r\n" + h + "\r\n"},
		// RFC 9112 §5.2: an obs-fold is rejected or replaced by spaces;
		// fasthttp replaces it (TestObsFoldUnfolded).
		{"obs-fold", "GET /v1/id HTTP/1.1\r\n" + h + "X-A: b\r\n c\r\n\r\n"},
		{"chunked body", "POST /v1/id HTTP/1.1\r\n" + h + "Transfer-Encoding: Chunked\r\n\r\n0\r\n\r\n"},
		{"a Content-Length of 0", "GET /v1/id HTTP/1.1\r\n" + h + "Content-Length: 0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, _ := exchange(t, addr, tc.raw)
			want := 200
			if strings.HasPrefix(tc.raw, "POST") {
				want = 405
			}
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, want, body)
			}
		})
	}
}

// errorShort is the short error a framing status carries.
func errorShort(code int) string {
	switch code {
	case 501:
		return errNotImplemented
	case 505:
		return errVersion
	}
	return errBadRequest
}

// TestHead sends HEAD wherever GET works: the same status and headers as
// GET, no body (RFC 9110 §9.3.2).
func TestHead(t *testing.T) {
	n := newNode(t, nil)
	addr := strings.TrimPrefix(n.url, "http://")
	for _, path := range []string{"/v1/id", "/v1/ids?count=3", "/v1/decode/1", "/v1/info", "/healthz", "/readyz", "/metrics"} {
		t.Run(path, func(t *testing.T) {
			get, getBody, _ := exchange(t, addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			head, headBody, closed := exchange(t, addr, "HEAD "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if head.StatusCode != get.StatusCode || get.StatusCode != 200 {
				t.Fatalf("HEAD %d, GET %d (%s); want 200 both", head.StatusCode, get.StatusCode, getBody)
			}
			if headBody != "" || closed {
				t.Fatalf("HEAD sent a body %q or closed the connection (%v)", headBody, closed)
			}
			for _, k := range []string{"Content-Type", "Cache-Control"} {
				if head.Header.Get(k) != get.Header.Get(k) {
					t.Errorf("%s: HEAD %q, GET %q", k, head.Header.Get(k), get.Header.Get(k))
				}
			}
			if path != "/metrics" && path != "/v1/info" && head.ContentLength != get.ContentLength {
				t.Errorf("Content-Length: HEAD %d, GET %d", head.ContentLength, get.ContentLength)
			}
			if head.ContentLength <= 0 {
				t.Errorf("HEAD carries no Content-Length (%d)", head.ContentLength)
			}
		})
	}
	code, hdr, body := n.do(t, "POST", "/v1/id", nil, "")
	wantError(t, code, hdr, body, 405, errMethod)
	if a := hdr.Get("Allow"); a != "GET, HEAD" {
		t.Errorf("Allow %q, want %q", a, "GET, HEAD")
	}
}

// TestObsFoldUnfolded: the HTTP/1.1 parser replaces an obs-fold in a
// field value by a space (RFC 9112 section 5.2 lets a server do that or
// reject the request), so a handler sees one line.
func TestObsFoldUnfolded(t *testing.T) {
	var h fasthttp.RequestHeader
	raw := "GET /v1/id HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\td\r\n\r\n"
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if v := string(h.Peek("X-A")); v != "b c d" {
		t.Fatalf("folded value read as %q, want %q", v, "b c d")
	}
}
