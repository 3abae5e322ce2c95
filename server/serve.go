package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Serving limits.
const (
	// maxHeaderBytes bounds a request's line and headers (431 beyond).
	maxHeaderBytes = 16 << 10
	// drainLimit and drainTimeout bound how much of an oversized body is
	// read and discarded before its 413 and the close, so the client
	// reads the 413 rather than a reset.
	drainLimit   = 1 << 20
	drainTimeout = time.Second
)

// h2Preface opens every HTTP/2 connection.
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// serving serves one listener: HTTP/1.1 with fasthttp, and connections
// that open with the HTTP/2 preface (h2c with prior knowledge) with
// net/http's HTTP/2 server over Handler. The first bytes of each new
// connection decide, read within ReadHeaderTimeout.
type serving struct {
	s    *Server
	lim  *connLimiter
	h1   *fasthttp.Server
	h2   *http.Server
	h1ln *chanListener
	h2ln *chanListener
	h1t  h1Timeouts // each HTTP/1.1 connection's

	sniffs sync.WaitGroup // connections whose protocol is being read
	served sync.WaitGroup // the h1 and h2 Serve calls
}

// newServing prepares to serve lim with h (and with nh for h2c).
func (s *Server) newServing(lim *connLimiter, h fasthttp.RequestHandler, nh http.Handler) *serving {
	c := s.cfg
	sv := &serving{s: s, lim: lim, h1ln: newChanListener(lim.Addr()), h2ln: newChanListener(lim.Addr()),
		h1t: h1Timeouts{readHeader: min(c.ReadHeaderTimeout, c.ReadTimeout), write: c.WriteTimeout, idle: c.IdleTimeout}}
	sv.h1 = &fasthttp.Server{
		Handler:      strict(h),
		ErrorHandler: s.requestError,
		ConnState: func(c net.Conn, st fasthttp.ConnState) {
			if lc, ok := c.(*limitedConn); ok {
				lc.h1State(st)
			}
		},
		Logger:                       fasthttpLogger{s.log},
		NoDefaultServerHeader:        true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		// The connection limiter is the limit; fasthttp's own would answer
		// a plain-text 503 to a connection the limiter admitted while the
		// one it evicted is still winding down.
		Concurrency:        2*c.MaxConns + MaxShedding,
		ReadBufferSize:     maxHeaderBytes,
		MaxRequestBodySize: int(c.MaxBodyBytes),
		// The connections keep the read, write and idle timeouts
		// themselves (h1Timeouts), with fewer clock reads; the request's
		// time is read only when asked for (tracing; the route uses
		// requestStart).
		LazyRequestTime: true,
	}
	if body := c.ReadTimeout - c.ReadHeaderTimeout; body > 0 {
		// A request with a body gets the rest of ReadTimeout for it.
		sv.h1.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if h.ContentLength() != 0 {
				return fasthttp.RequestConfig{ReadTimeout: body}
			}
			return fasthttp.RequestConfig{}
		}
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	sv.h2 = &http.Server{
		Protocols:         protocols,
		Handler:           nh,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState: func(c net.Conn, st http.ConnState) {
			if lc, ok := c.(*limitedConn); ok {
				lc.setIdle(st == http.StateIdle)
			}
		},
	}
	return sv
}

// start starts the HTTP/1.1 and h2c servers behind the sniffer. It runs
// before the accept loop's goroutine and before any shutdown, so the
// WaitGroup's Add never races the Wait in shutdown.
func (sv *serving) start() {
	sv.served.Add(2)
	go func() {
		defer sv.served.Done()
		if err := sv.h1.Serve(sv.h1ln); err != nil {
			sv.s.log.Error("server: HTTP/1.1 serving ended", "err", err)
		}
	}()
	go func() {
		defer sv.served.Done()
		if err := sv.h2.Serve(sv.h2ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			sv.s.log.Error("server: h2c serving ended", "err", err)
		}
	}()
}

// accept accepts connections until the listener closes (nil) or fails.
func (sv *serving) accept() error {
	for {
		c, err := sv.lim.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		sv.sniffs.Add(1)
		go sv.sniff(c.(*limitedConn))
	}
}

// sniff reads the first bytes of c and hands it to the HTTP/2 server when
// they are the HTTP/2 preface, else to the HTTP/1.1 server.
func (sv *serving) sniff(c *limitedConn) {
	defer sv.sniffs.Done()
	// The first request's line and headers are due within the read
	// header timeout of the connection's start, the preface among them.
	first := monoNow().add(sv.h1t.readHeader)
	c.SetReadDeadline(first.time())
	buf := make([]byte, len(h2Preface))
	n := 0
	for n < len(buf) && bytes.HasPrefix(h2Preface, buf[:n]) {
		m, err := c.Conn.Read(buf[n:])
		n += m
		if err != nil {
			c.Close()
			return
		}
	}
	c.head = buf[:n]
	if bytes.Equal(c.head, h2Preface) {
		c.SetReadDeadline(time.Time{}) // net/http sets its own
		sv.h2ln.push(c)
		return
	}
	sv.h1ln.push(sv.h1Conn(c, first))
}

// h1Conn prepares c, whose read deadline first is armed, for the
// HTTP/1.1 server. fasthttp does a connection's I/O in one goroutine,
// which also reports the connection's state: the connection keeps its
// own timeouts, lazily (h1Timeouts).
func (sv *serving) h1Conn(c *limitedConn, first mono) *limitedConn {
	c.timeouts = &sv.h1t
	c.rd = lazyDeadline{want: first, armed: first}
	return c
}

// shutdown stops accepting, lets in-flight requests finish within ctx and
// closes every connection; past ctx it closes them at once.
func (sv *serving) shutdown(ctx context.Context) error {
	sv.lim.Close()
	sniffed := make(chan struct{})
	go func() { sv.sniffs.Wait(); close(sniffed) }()
	select {
	case <-sniffed:
	case <-ctx.Done():
		sv.lim.closeAll()
		<-sniffed
	}
	err := sv.h1.ShutdownWithContext(ctx)
	if err2 := sv.h2.Shutdown(ctx); err == nil {
		err = err2
	}
	sv.h1ln.Close() // in case Serve had not yet started
	sv.h2ln.Close()
	if err != nil {
		sv.lim.closeAll()
		sv.h2.Close()
	}
	sv.served.Wait()
	return err
}

// requestError answers a request fasthttp could not read, in JSON: 413
// for a body beyond MaxBodyBytes (after draining some of it, so the client
// reads the answer), 431 for headers beyond 16 KiB, 408 for a timeout,
// 501 or 400 for a Transfer-Encoding it does not take
// (transferCodingError), else 400. fasthttp closes the connection after.
func (s *Server) requestError(c *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	if code, detail, ok := transferCodingError(err); ok {
		short := errBadRequest
		if code == http.StatusNotImplemented {
			short = errNotImplemented
		}
		writeErrorCtx(c, code, short, detail)
		return
	}
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeErrorCtx(c, http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("body exceeds %d bytes", s.cfg.MaxBodyBytes))
		drain(c.Conn(), c.Request.Header.ContentLength())
	case errors.As(err, &small):
		writeErrorCtx(c, http.StatusRequestHeaderFieldsTooLarge, errBadRequest, fmt.Sprintf("request line and headers exceed %d bytes", maxHeaderBytes))
	case errors.As(err, &ne) && ne.Timeout():
		writeErrorCtx(c, http.StatusRequestTimeout, errBadRequest, "request not received in time")
	default:
		writeErrorCtx(c, http.StatusBadRequest, errBadRequest, "malformed request: "+err.Error())
	}
}

// drain reads and discards up to n bytes of c (at most drainLimit, within
// drainTimeout).
func drain(c net.Conn, n int) {
	if n <= 0 || c == nil {
		return
	}
	c.SetReadDeadline(time.Now().Add(drainTimeout))
	io.CopyN(io.Discard, c, int64(min(n, drainLimit)))
}

// chanListener is a listener whose connections are handed to it.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the listener's server, or closes it once the listener
// is closed.
func (l *chanListener) push(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection handed over.
func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept fail; it is idempotent.
func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the listener the connections came from.
func (l *chanListener) Addr() net.Addr { return l.addr }

// fasthttpLogger logs fasthttp's messages as warnings.
type fasthttpLogger struct{ l *slog.Logger }

// Printf logs one message.
func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("server: " + fmt.Sprintf(format, args...))
}
