package server

import (
	"errors"
	"net"
	"os"
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
	// shedTimeout bounds writing a refusal and draining the request.
	shedTimeout = time.Second
)

// MaxShedding bounds the connections a listener at its connection limit
// refuses with a 503 at once: each refusal is in flight until its 503 is
// written and the client's request drained (at most a second); a
// connection arriving while MaxShedding are is closed without a response,
// so that a flood of connections costs the node no more than that.
const MaxShedding = 8

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
// which the HTTP servers' ConnState hooks call.
type connLimiter struct {
	net.Listener
	max      int
	refusal  []byte // the response a shed connection gets
	shedding atomic.Int32
	shedFor  atomic.Int64 // bound on one refusal (ns): shedTimeout but in tests

	mu struct {
		sync.Mutex
		open int
		// conns holds every open connection not evicted.
		conns map[*limitedConn]struct{}
		// idle lists the idle connections, oldest first (linked through
		// limitedConn.prev and next, so a request moves one in O(1)).
		idle  struct{ head, tail *limitedConn }
		nIdle int
	}
}

// newConnLimiter wraps ln.
func newConnLimiter(ln net.Listener, max int) *connLimiter {
	l := &connLimiter{Listener: ln, max: max}
	l.shedFor.Store(int64(shedTimeout))
	l.mu.conns = map[*limitedConn]struct{}{}
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
			if l.mu.idle.head == nil {
				l.mu.Unlock()
				l.refuse(c)
				continue
			}
			evicted = l.evictIdleLocked()
		}
		lc := l.admitLocked(c)
		l.mu.Unlock()
		if evicted != nil {
			evicted.Close() // before the next Accept takes another descriptor
		}
		return lc, nil
	}
}

// admitLocked counts c as open and returns it wrapped.
func (l *connLimiter) admitLocked(c net.Conn) *limitedConn {
	l.mu.open++
	lc := &limitedConn{Conn: c, l: l}
	l.mu.conns[lc] = struct{}{}
	return lc
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
	if l.mu.idle.head == nil {
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
	c := l.mu.idle.head
	l.removeIdleLocked(c)
	c.evicted = true
	l.mu.open--
	delete(l.mu.conns, c)
	return c.Conn
}

// closeAll closes every open connection (a shutdown past its deadline).
func (l *connLimiter) closeAll() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.mu.conns))
	for c := range l.mu.conns {
		conns = append(conns, c.Conn)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// refuse answers c 503 and closes it, in the background and within
// shedTimeout; with MaxShedding refusals in flight it just closes c.
func (l *connLimiter) refuse(c net.Conn) {
	if l.shedding.Add(1) > MaxShedding {
		l.shedding.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.shedding.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Duration(l.shedFor.Load())))
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
	// head holds the bytes read to tell HTTP/2 from HTTP/1.1, returned
	// first by Read. It is set before the connection is handed to a
	// server and read only by that server.
	head []byte
	// timeouts, when set, are the HTTP/1.1 timeouts the connection keeps
	// itself as its server reports its state (see h1State), and make its
	// read and write deadlines lazy (rd, wd; see lazyDeadline): set before
	// the connection is handed to a server that sets deadlines only from
	// the goroutine that reads and writes (fasthttp's). start is when its
	// current request's first byte arrived, and requests counts its
	// requests.
	timeouts *h1Timeouts
	rd, wd   lazyDeadline
	start    mono
	requests int
	// Guarded by l.mu.
	idle, evicted, closed bool
	prev, next            *limitedConn // in l.mu.idle while idle
}

// Read returns what is left of head, then reads the connection.
func (c *limitedConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	for {
		n, err := c.Conn.Read(p)
		if n > 0 || c.timeouts == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.rd.rearm(c.Conn.SetReadDeadline) {
			return n, err
		}
	}
}

// Write writes p, going on past a deadline that fired early.
func (c *limitedConn) Write(p []byte) (int, error) {
	if c.timeouts == nil {
		return c.Conn.Write(p)
	}
	written := 0
	for {
		n, err := c.Conn.Write(p[written:])
		written += n
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.wd.rearm(c.Conn.SetWriteDeadline) {
			return written, err
		}
	}
}

// SetReadDeadline sets the read deadline (lazily once lazy is set).
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if c.timeouts == nil {
		return c.Conn.SetReadDeadline(t)
	}
	return c.rd.set(toMono(t), c.Conn.SetReadDeadline)
}

// SetWriteDeadline sets the write deadline (lazily once lazy is set).
func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	if c.timeouts == nil {
		return c.Conn.SetWriteDeadline(t)
	}
	return c.wd.set(toMono(t), c.Conn.SetWriteDeadline)
}

// SetDeadline sets both deadlines.
func (c *limitedConn) SetDeadline(t time.Time) error {
	if c.timeouts == nil {
		return c.Conn.SetDeadline(t)
	}
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// setIdle records whether the connection is idle between requests.
func (c *limitedConn) setIdle(idle bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.evicted || c.idle == idle {
		return
	}
	if idle {
		l.addIdleLocked(c)
		return
	}
	l.removeIdleLocked(c)
}

// addIdleLocked appends c (not idle) to the idle list.
func (l *connLimiter) addIdleLocked(c *limitedConn) {
	c.idle, c.prev, c.next = true, l.mu.idle.tail, nil
	if c.prev != nil {
		c.prev.next = c
	} else {
		l.mu.idle.head = c
	}
	l.mu.idle.tail = c
	l.mu.nIdle++
}

// removeIdleLocked drops c (idle) from the idle list.
func (l *connLimiter) removeIdleLocked(c *limitedConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.mu.idle.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.mu.idle.tail = c.prev
	}
	c.idle, c.prev, c.next = false, nil, nil
	l.mu.nIdle--
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
		}
		if !c.evicted {
			l.mu.open--
			delete(l.mu.conns, c)
		}
	}
	l.mu.Unlock()
	return err
}

// stats returns the open and idle connection counts.
func (l *connLimiter) stats() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.open, l.mu.nIdle
}
