package server

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection-limit tuning.
const (
	// fdReserve is how many descriptors the default connection limit
	// leaves to everything else (listeners, the lease store's pool, the
	// checkpoint writes, NTP, tracing, a connection being shed).
	fdReserve = 64
	// maxShedding bounds the connections being refused at once; beyond
	// it an excess connection is closed without a response.
	maxShedding = 8
	// shedTimeout bounds writing a refusal and draining the request.
	shedTimeout = time.Second
)

// DefaultMaxConns returns the connection limit for an open-file limit of
// nofile: nofile less fdReserve, at least 1 and at most MaxConnsLimit.
func DefaultMaxConns(nofile uint64) int {
	if nofile <= fdReserve {
		return 1
	}
	return int(min(nofile-fdReserve, MaxConnsLimit))
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

// connLimiter is a listener that keeps at most max connections open. When
// a new connection arrives at the limit, or accepting fails because the
// process is out of descriptors, it closes the connection that has been
// idle longest (a keep-alive connection between requests) to make room;
// when none is idle it answers the newcomer 503 at once and closes it, so
// a probe learns within a round trip that the node is saturated rather
// than waiting in the accept queue. Its idea of idle comes from setIdle,
// which the HTTP server's ConnState hook calls; it uses no net/http type.
type connLimiter struct {
	net.Listener
	max      int
	refusal  []byte // the response a shed connection gets
	shedding atomic.Int32

	mu struct {
		sync.Mutex
		open int
		// idle holds the idle connections, oldest first.
		idle []*limitedConn
	}
}

// newConnLimiter wraps ln.
func newConnLimiter(ln net.Listener, max int) *connLimiter {
	l := &connLimiter{Listener: ln, max: max}
	body := `{"error":"` + errUnavailable + `","detail":"connection limit ` + strconv.Itoa(max) +
		` reached and every connection is busy: retry later (the limit is snowchaos serve --max-conns)"}` + "\n"
	l.refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	return l
}

// Accept returns the next connection within the limit, making room by
// closing the longest-idle connection when needed, and refusing (in the
// background) those it cannot make room for.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if isFDExhaustion(err) && l.evictIdle() {
				continue // a descriptor was freed: accept again at once
			}
			return nil, err
		}
		l.mu.Lock()
		var evicted net.Conn
		if l.mu.open >= l.max {
			if len(l.mu.idle) == 0 {
				l.mu.Unlock()
				l.refuse(c)
				continue
			}
			evicted = l.evictIdleLocked()
		}
		l.mu.open++
		l.mu.Unlock()
		if evicted != nil {
			evicted.Close() // before the next Accept takes another descriptor
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// isFDExhaustion reports whether err is the process or the system running
// out of file descriptors.
func isFDExhaustion(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// evictIdle closes the longest-idle connection, reporting whether there
// was one.
func (l *connLimiter) evictIdle() bool {
	l.mu.Lock()
	if len(l.mu.idle) == 0 {
		l.mu.Unlock()
		return false
	}
	c := l.evictIdleLocked()
	l.mu.Unlock()
	c.Close()
	return true
}

// evictIdleLocked takes the longest-idle connection (there is one) off the
// books and returns it for the caller to close outside the lock (the
// server then sees a read error and closes its side).
func (l *connLimiter) evictIdleLocked() net.Conn {
	c := l.mu.idle[0]
	l.mu.idle = l.mu.idle[1:]
	c.idle, c.evicted = false, true
	l.mu.open--
	return c.Conn
}

// refuse answers c 503 and closes it, in the background and within
// shedTimeout; with too many refusals in flight it just closes c.
func (l *connLimiter) refuse(c net.Conn) {
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
		// Half-close and drain what the client sent, so closing does not
		// reset the connection before the client has read the refusal.
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

// limitedConn is a connection counted by a connLimiter.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// Guarded by l.mu.
	idle, evicted, closed bool
}

// setIdle records whether the connection is idle between requests.
func (c *limitedConn) setIdle(idle bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.evicted || c.idle == idle {
		return
	}
	c.idle = idle
	if idle {
		l.mu.idle = append(l.mu.idle, c)
		return
	}
	l.removeIdleLocked(c)
}

// removeIdleLocked drops c from the idle list.
func (l *connLimiter) removeIdleLocked(c *limitedConn) {
	for i, x := range l.mu.idle {
		if x == c {
			l.mu.idle = append(l.mu.idle[:i], l.mu.idle[i+1:]...)
			return
		}
	}
}

// Close closes the connection and frees its slot (once).
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	l := c.l
	l.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.idle {
			l.removeIdleLocked(c)
			c.idle = false
		}
		if !c.evicted {
			l.mu.open--
		}
	}
	l.mu.Unlock()
	return err
}

// stats returns the open and idle connection counts.
func (l *connLimiter) stats() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.open, len(l.mu.idle)
}
