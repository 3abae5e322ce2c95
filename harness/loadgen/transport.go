package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Transport is an http.RoundTripper over fasthttp's HostClient, for load
// generation: each request runs on the caller's goroutine over a pooled
// keep-alive connection, with none of http.Transport's per-connection
// reader and writer goroutines; the response body is read off the
// connection as the caller reads it, and the caller bounds how much it
// reads (vegeta's MaxBody, server.Client's limit). It speaks plain http://
// only (no TLS, proxies or HTTP/2) and never retries. Every request is bounded by its
// context's deadline, or by DefaultTimeout when the context has none; a
// context cancelled without a deadline ends the request at that bound, not
// at once (fasthttp takes deadlines, not contexts). Safe for concurrent use.
type Transport struct {
	// MaxConnsPerHost bounds the connections to each host, busy and
	// idle; a request finding them all busy waits for one until its
	// deadline. Zero: 1024.
	MaxConnsPerHost int

	mu    sync.Mutex
	hosts map[string]*fasthttp.HostClient
}

var _ http.RoundTripper = (*Transport)(nil)

// errScheme is returned for anything but http://.
var errScheme = errors.New("loadgen: Transport speaks http:// only")

// RoundTrip sends req and returns the response once its head has arrived;
// the connection returns to the pool when the body is closed (closed for
// good when it was not read to its end).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if req.URL.Scheme != "http" {
		return nil, fmt.Errorf("%w: %q", errScheme, req.URL.Scheme)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	freq := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(freq)
	freq.Header.SetMethod(req.Method)
	freq.SetRequestURI(req.URL.String())
	if req.Host != "" {
		freq.Header.SetHost(req.Host)
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			freq.Header.Add(k, v)
		}
	}
	if req.Close {
		freq.SetConnectionClose()
	}
	if req.Body != nil && req.Body != http.NoBody {
		if _, err := io.Copy(freq.BodyWriter(), req.Body); err != nil {
			return nil, err
		}
	}
	fresp := fasthttp.AcquireResponse()
	if err := t.host(req.URL).DoDeadline(freq, fresp, deadline); err != nil {
		fasthttp.ReleaseResponse(fresp)
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		if errors.Is(err, fasthttp.ErrTimeout) {
			return nil, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	code := fresp.StatusCode()
	resp := &http.Response{
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode: code,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, fresp.Header.Len()),
		ContentLength: int64(fresp.Header.ContentLength()),
		Close:         fresp.ConnectionClose(),
		Body:          &fastBody{r: fresp.BodyStream(), resp: fresp},
		Request:       req,
	}
	if resp.ContentLength < 0 {
		resp.ContentLength = -1 // chunked or until close
	}
	for k, v := range fresp.Header.All() {
		resp.Header.Add(string(k), string(v))
	}
	return resp, nil
}

// host returns the HostClient for u's host, making it on first use.
func (t *Transport) host(u *url.URL) *fasthttp.HostClient {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	t.mu.Lock()
	defer t.mu.Unlock()
	if hc := t.hosts[addr]; hc != nil {
		return hc
	}
	if t.hosts == nil {
		t.hosts = map[string]*fasthttp.HostClient{}
	}
	conns := t.MaxConnsPerHost
	if conns <= 0 {
		conns = 1024
	}
	hc := &fasthttp.HostClient{
		Addr:                      addr,
		MaxConns:                  conns,
		MaxConnWaitTimeout:        time.Hour, // each request is bounded by its deadline
		MaxIdemponentCallAttempts: 1,         // never retry: a retried GET /v1/id loses IDs
		StreamResponseBody:        true,      // the caller reads the body off the connection
		NoDefaultUserAgentHeader:  true,
	}
	t.hosts[addr] = hc
	return hc
}

// CloseIdleConnections closes every pooled idle connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, hc := range t.hosts {
		hc.CloseIdleConnections()
	}
}

// fastBody reads a fasthttp response's body off its connection and on
// Close hands the connection back (or closes it when the body was not read
// to its end) and releases the response.
type fastBody struct {
	r    io.Reader
	once sync.Once
	resp *fasthttp.Response
}

// Read reads the body.
func (b *fastBody) Read(p []byte) (int, error) {
	if b.r == nil {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

// Close releases the response; the body is not read after.
func (b *fastBody) Close() error {
	var err error
	b.once.Do(func() {
		err = b.resp.CloseBodyStream()
		b.r = nil
		fasthttp.ReleaseResponse(b.resp)
	})
	return err
}
