package sink

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Shedding a connection over the limit.
const (
	// maxShedding bounds the refusals being written at once; beyond it a
	// refused connection is closed without an answer.
	maxShedding = 64
	// shedTimeout bounds writing a refusal and draining the request.
	shedTimeout = time.Second
)

// Server is the sink's HTTP server: a handler served on one listener
// with HTTPConfig's connection limit and timeouts.
type Server struct {
	srv *http.Server
	lim *connLimit
}

// Serve serves h on ln in the background, with cfg's connection limit
// and timeouts (the handler sets a body's own deadlines; the server's
// bound every other request). onRefuse, when not nil, is called for each
// connection refused at the limit. The error is cfg's; Shutdown stops it.
func Serve(ln net.Listener, h http.Handler, cfg HTTPConfig, onRefuse func()) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lim := newConnLimit(ln, cfg.MaxConns, onRefuse)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.RequestTimeout,
		WriteTimeout:      cfg.RequestTimeout + answerTime,
		IdleTimeout:       cfg.IdleTimeout,
		ConnState:         lim.connState,
	}
	go srv.Serve(lim)
	return &Server{srv: srv, lim: lim}, nil
}

// Addr is the address served.
func (s *Server) Addr() net.Addr { return s.lim.Addr() }

// Shutdown stops accepting, lets the requests in flight finish until ctx
// ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return err
}

// openFileLimit returns the process's soft RLIMIT_NOFILE, or 0 when it
// cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// connLimit is a listener that keeps at most max connections open: a new
// connection at the limit closes the longest-idle one (a keep-alive
// connection between requests, as the server's ConnState reports), or,
// when none is idle, is answered 503 and closed.
type connLimit struct {
	net.Listener
	max      int
	refusal  []byte
	onRefuse func()
	shedding atomic.Int32
	mu       struct {
		sync.Mutex
		open int
		idle list.List // of *limitConn, longest idle first
	}
}

func newConnLimit(ln net.Listener, max int, onRefuse func()) *connLimit {
	l := &connLimit{Listener: ln, max: max, onRefuse: onRefuse}
	body := `{"error":"connection limit ` + strconv.Itoa(max) + ` reached and every connection is busy: nothing verified, retry later (the limit is snowchaos verify --max-conns)"}` + "\n"
	l.refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	return l
}

// limitConn is a connection counted by a connLimit.
type limitConn struct {
	net.Conn
	l *connLimit
	// Guarded by l.mu.
	idle           *list.Element // in l.mu.idle while idle
	closed, bumped bool          // bumped: closed to make room, no longer counted
}

// Accept returns the next connection within the limit, closing the
// longest-idle one to make room when needed and refusing (in the
// background) those it cannot make room for.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var bump *limitConn
		if l.mu.open >= l.max {
			e := l.mu.idle.Front()
			if e == nil {
				l.mu.Unlock()
				l.refuse(c)
				continue
			}
			bump = e.Value.(*limitConn)
			l.mu.idle.Remove(e)
			bump.idle, bump.bumped = nil, true
			l.mu.open--
		}
		l.mu.open++
		lc := &limitConn{Conn: c, l: l}
		l.mu.Unlock()
		if bump != nil {
			bump.Conn.Close() // its server sees a read error and lets it go
		}
		return lc, nil
	}
}

// refuse answers c 503 and closes it, in the background and within
// shedTimeout; with maxShedding refusals in flight it just closes c.
func (l *connLimit) refuse(c net.Conn) {
	if l.onRefuse != nil {
		l.onRefuse()
	}
	if l.shedding.Add(1) > maxShedding {
		l.shedding.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.shedding.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(shedTimeout))
		if _, err := c.Write(l.refusal); err != nil {
			return
		}
		// Half-close and drain what the client sent, so that closing
		// does not reset the connection before the client read the 503.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}()
}

// connState keeps the idle list as the server reports its connections.
func (l *connLimit) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.closed || lc.bumped {
		return
	}
	switch {
	case st == http.StateIdle && lc.idle == nil:
		lc.idle = l.mu.idle.PushBack(lc)
	case st != http.StateIdle && lc.idle != nil:
		l.mu.idle.Remove(lc.idle)
		lc.idle = nil
	}
}

// Close closes the connection and frees its place (once).
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.closed {
		c.closed = true
		if c.idle != nil {
			l.mu.idle.Remove(c.idle)
			c.idle = nil
		}
		if !c.bumped {
			l.mu.open--
		}
	}
	return err
}

// stats returns the open and idle connection counts.
func (l *connLimit) stats() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.open, l.mu.idle.Len()
}
