package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// DirectTransport is a lean HTTP/1.1 keep-alive transport for load
// generation: each request runs on the caller's goroutine over a pooled
// connection (write, flush, read the response), with none of
// http.Transport's per-connection reader and writer goroutines, so a
// request costs the syscalls it needs and no goroutine hand-offs. It speaks
// plain http:// only (no TLS, proxies or HTTP/2) and never retries; a
// failed request closes its connection. Safe for concurrent use.
type DirectTransport struct {
	// MaxIdlePerHost bounds the idle connections kept per host; zero: 1024.
	MaxIdlePerHost int
	// DialTimeout bounds connecting; zero: 5 s.
	DialTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*directConn
	dial net.Dialer
}

var _ http.RoundTripper = (*DirectTransport)(nil)

// directConn is one pooled connection.
type directConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// errScheme is returned for anything but http://.
var errScheme = errors.New("loadgen: DirectTransport speaks http:// only")

// RoundTrip sends req and reads the response head; the body is read from
// the connection as the caller reads it, and the connection returns to the
// pool when the body has been read to its end and closed.
func (t *DirectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %q", errScheme, req.URL.Scheme)
	}
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	ctx := req.Context()
	dc, err := t.get(ctx, host)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		dc.c.SetDeadline(dl)
	} else {
		dc.c.SetDeadline(time.Time{})
	}
	// A cancelled context interrupts blocked I/O by moving the deadline.
	stop := context.AfterFunc(ctx, func() { dc.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		dc.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		// The connection's deadline is the context's: it can fire a hair
		// before the context's own timer.
		var ne net.Error
		if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
			return nil, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	if err := req.Write(dc.bw); err != nil {
		return fail(err)
	}
	if err := dc.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(dc.br, req)
	if err != nil {
		return fail(err)
	}
	reuse := !resp.Close && !req.Close && resp.ProtoAtLeast(1, 1)
	resp.Body = &directBody{rc: resp.Body, t: t, host: host, dc: dc, reuse: reuse, stop: stop}
	return resp, nil
}

// get returns an idle connection to host, or dials one.
func (t *DirectTransport) get(ctx context.Context, host string) (*directConn, error) {
	t.mu.Lock()
	if l := t.idle[host]; len(l) > 0 {
		dc := l[len(l)-1]
		t.idle[host] = l[:len(l)-1]
		t.mu.Unlock()
		return dc, nil
	}
	t.mu.Unlock()
	d := t.dial
	d.Timeout = t.DialTimeout
	if d.Timeout == 0 {
		d.Timeout = 5 * time.Second
	}
	d.KeepAlive = 30 * time.Second
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &directConn{c: c, br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 4<<10)}, nil
}

// put returns a connection to the pool, or closes it when the pool is full.
func (t *DirectTransport) put(host string, dc *directConn) {
	max := t.MaxIdlePerHost
	if max == 0 {
		max = 1024
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*directConn{}
	}
	if len(t.idle[host]) < max {
		t.idle[host] = append(t.idle[host], dc)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	dc.c.Close()
}

// CloseIdleConnections closes every pooled connection.
func (t *DirectTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, l := range idle {
		for _, dc := range l {
			dc.c.Close()
		}
	}
}

// directBody returns its connection to the pool once read to EOF and
// closed, and closes the connection otherwise.
type directBody struct {
	rc    io.ReadCloser
	t     *DirectTransport
	host  string
	dc    *directConn
	reuse bool
	eof   bool
	done  bool
	stop  func() bool
}

// Read reads the body.
func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close releases the connection.
func (b *directBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.rc.Close()
	cancelled := !b.stop()
	if b.reuse && b.eof && err == nil && !cancelled && b.dc.br.Buffered() == 0 {
		b.t.put(b.host, b.dc)
	} else {
		b.dc.c.Close()
	}
	return err
}
