package zookeeper

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/snowchaos/snowchaos/lease"
)

// session is one lease's ZooKeeper session: the connection it lives on,
// the znode versions this Registry last wrote, and the lease's own
// deadline.
type session struct {
	r      *Registry
	conn   *zk.Conn
	holder string
	ttl    time.Duration // as the server granted it (set before the claim)
	// answerWithin bounds the wait for a server's connect response:
	// two thirds of the requested session timeout (handshakeConn).
	answerWithin time.Duration

	// Set by the claim, then fixed.
	workerID int64
	token    int64

	// Written by the connection's goroutine (the event callback and the
	// handshake), which must never block on the lock below.
	up          chan struct{} // closed on the first session established
	upOnce      sync.Once
	sid         atomic.Int64 // the session's ID, from the first handshake
	granted     atomic.Int64 // session timeout the server granted, ms
	expired     atomic.Bool  // the server expired the session
	reconnected atomic.Int64 // mono ns of the last re-established connection; 0: none since read

	// lock serialises the lease's calls; a channel, so that waiting for it
	// honours a context.
	lock chan struct{}
	mu   struct { // guarded by lock
		wver, mver int32 // versions of w and m as last written; mver < 0: no m znode
		last       int64 // last_issued_ms as last written
		deadline   int64 // mono ns after which a connected session is ended
		ended      error // why the lease is over; nil while held
	}
	closeOnce sync.Once
}

// dial opens a session for req with its TTL as timeout, waits until the
// server grants it, and checks the granted timeout.
func (r *Registry) dial(ctx context.Context, req lease.Request) (*session, error) {
	s := &session{r: r, holder: req.Holder, up: make(chan struct{}), lock: make(chan struct{}, 1), answerWithin: req.TTL * 2 / 3}
	s.lock <- struct{}{} // whatever the connection's events start waits for s.conn
	conn, _, err := zk.Connect(r.servers, req.TTL,
		zk.WithDialer(s.dialer), zk.WithEventCallback(s.event), zk.WithLogger(r.logger), zk.WithLogInfo(false))
	if err != nil {
		s.unlock()
		return nil, lease.Unavailable(err)
	}
	s.conn = conn
	s.unlock()
	select {
	case <-s.up:
	case <-ctx.Done():
		s.close()
		return nil, lease.Unavailable(fmt.Errorf("lease/zookeeper: no session from %v: %w", r.servers, ctx.Err()))
	}
	s.ttl = time.Duration(s.granted.Load()) * time.Millisecond
	if s.ttl < req.TTL {
		s.close()
		return nil, fmt.Errorf("%w: ttl %v above the session timeout the server grants (%v): raise its maxSessionTimeout", lease.ErrInvalidRequest, req.TTL, s.ttl)
	}
	return s, nil
}

// dialer connects to a server and watches the handshake for the session
// timeout the server grants (go-zookeeper keeps it to itself).
func (s *session) dialer(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c, answer: s.handshake, answerWithin: s.answerWithin}, nil
}

// handshake notes the server's connect response: the first session's ID
// and timeout; a session ID other than the first is a new session, which
// go-zookeeper opens on its own once the server expired the first.
func (s *session) handshake(id int64, timeoutMs int32) {
	switch {
	case id == 0: // the server expired the session
		s.expired.Store(true)
	case s.sid.CompareAndSwap(0, id):
		s.granted.Store(int64(timeoutMs))
	case id != s.sid.Load():
		s.expired.Store(true)
	}
}

// handshakeConn passes a connection through and decodes the first frame
// the server sends, the connect response: int32 length, then int32
// protocol version, int32 timeout (ms), int64 session ID, password.
type handshakeConn struct {
	net.Conn
	answer func(sessionID int64, timeoutMs int32)
	buf    []byte
	done   bool
	// answerWithin caps the read deadline until the connect response is
	// read (zero: no cap). go-zookeeper gives the response ten times its
	// receive timeout, 6.7 session timeouts: a connection that a
	// restarting server accepted but never answers held the session's
	// reconnection that long (20 s at a 3 s TTL, measured under make
	// test-loaded: the session expired meanwhile). ZooKeeper's own client
	// gives it two thirds of the session timeout, and so does this cap;
	// go-zookeeper then dials again.
	answerWithin time.Duration
}

// SetReadDeadline sets the connection's read deadline, no later than
// answerWithin from now while the connect response is awaited. Reads and
// deadlines are set by the same goroutine (go-zookeeper's connection
// loop, then its receive loop), as done is.
func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	if !c.done && !t.IsZero() && c.answerWithin > 0 {
		if limit := time.Now().Add(c.answerWithin); t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// maxHandshake bounds the connect response handshakeConn decodes.
const maxHandshake = 256

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.feed(p[:n])
	return n, err
}

// feed takes the next bytes read until the connect response is complete,
// then reports it once.
func (c *handshakeConn) feed(b []byte) {
	if c.done || len(b) == 0 {
		return
	}
	c.buf = append(c.buf, b...)
	if len(c.buf) < 4 {
		return
	}
	size := int(binary.BigEndian.Uint32(c.buf))
	switch {
	case size < 16 || size > maxHandshake:
		c.done, c.buf = true, nil // not a connect response: leave the timeout unknown
	case len(c.buf) >= 4+size:
		c.answer(int64(binary.BigEndian.Uint64(c.buf[12:])), int32(binary.BigEndian.Uint32(c.buf[8:])))
		c.done, c.buf = true, nil
	}
}

// event follows the session's state; it runs on the connection's
// goroutine and must not block.
func (s *session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		first := false
		s.upOnce.Do(func() { first = true; close(s.up) })
		switch {
		case first:
		case s.expired.Load(): // a new session replaced the expired one
			go s.expire()
		default:
			_, mono := s.r.clock.Now()
			s.reconnected.Store(mono)
		}
	case zk.StateExpired:
		s.expired.Store(true)
		go s.expire()
	}
}

// expire ends the lease of a session the server expired.
func (s *session) expire() {
	s.lock <- struct{}{}
	defer s.unlock()
	s.endLocked(s.lost("session expired"))
}

// acquireLock waits for the lease's lock until ctx ends.
func (s *session) acquireLock(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return lease.Unavailable(fmt.Errorf("lease/zookeeper: worker %d busy: %w", s.workerID, ctx.Err()))
	}
}

func (s *session) unlock() { <-s.lock }

// connected reports whether the session is established on a connection.
func (s *session) connected() bool {
	return s.conn.State() == zk.StateHasSession && s.conn.SessionID() == s.sid.Load()
}

// lost returns the ErrLost error for the lease.
func (s *session) lost(why string) error {
	return fmt.Errorf("%w: worker %d token %d (session %#x): %s", lease.ErrLost, s.workerID, s.token, s.sid.Load(), why)
}

// checkLocked decides whether the lease may be written at mono: ErrLost
// once it ended (or the server expired the session, or its deadline passed
// while connected), ErrUnavailable while the session is disconnected.
func (s *session) checkLocked(mono int64) error {
	if s.mu.ended != nil {
		return s.mu.ended
	}
	if s.expired.Load() {
		return s.endLocked(s.lost("session expired"))
	}
	if at := s.reconnected.Swap(0); at != 0 {
		// The server restarted the session's timeout on reconnection; so
		// does the lease.
		s.mu.deadline = max(s.mu.deadline, at+int64(s.ttl))
	}
	if !s.connected() {
		return fmt.Errorf("%w: lease/zookeeper: worker %d: session %#x %v", lease.ErrUnavailable, s.workerID, s.sid.Load(), s.conn.State())
	}
	if mono >= s.mu.deadline {
		return s.endLocked(s.lost("not renewed within its ttl"))
	}
	return nil
}

// end ends the lease for why (an ErrLost error, or the reason of a failed
// acquisition) and closes the session.
func (s *session) end(why error) {
	s.lock <- struct{}{}
	defer s.unlock()
	s.endLocked(why)
}

// endLocked is end with the lock held; it returns the lease's end reason.
func (s *session) endLocked(why error) error {
	if s.mu.ended == nil {
		s.mu.ended = why
		s.r.forget(s)
		s.close()
	}
	return s.mu.ended
}

// close closes the connection (the server deletes the session's w znode)
// in the background; Registry.Close waits for it.
func (s *session) close() {
	s.closeOnce.Do(func() {
		r := s.r
		r.mu.Lock()
		closed := r.mu.closed
		if !closed {
			r.closing.Add(1)
		}
		r.mu.Unlock()
		if closed { // Registry.Close is waiting for this call
			s.conn.Close()
			return
		}
		go func() {
			defer r.closing.Done()
			s.conn.Close()
		}()
	})
}

// watch ends the lease once it has not been renewed for its TTL while
// connected; while disconnected the server decides. It returns when the
// lease ends (it may sleep up to a TTL more).
func (s *session) watch() {
	for {
		s.lock <- struct{}{}
		_, mono := s.r.clock.Now()
		err := s.checkLocked(mono)
		wait := time.Duration(s.mu.deadline - mono)
		ended := s.mu.ended != nil
		s.unlock()
		switch {
		case ended:
			return
		case err != nil || wait <= 0: // disconnected past the deadline: look again soon
			wait = s.ttl / 4
		}
		s.r.clock.Sleep(wait)
	}
}

// claim tries to take worker ID id (whose znodes sl read; nil: none) in
// one multi-op through s: create w, and write m at the version read (or
// create it). won is false when another acquirer got there first.
func (s *session) claim(ctx context.Context, id int64, sl *slot, clockMs int64) (l lease.Lease, won bool, err error) {
	if err := s.acquireLock(ctx); err != nil {
		return lease.Lease{}, false, err
	}
	defer s.unlock()
	if s.mu.ended != nil || s.expired.Load() {
		return lease.Lease{}, false, lease.Unavailable(fmt.Errorf("lease/zookeeper: session %#x ended while acquiring", s.sid.Load()))
	}
	r := s.r
	var prev markVal
	mark := func(v markVal) any {
		return &zk.CreateRequest{Path: r.markPath(id), Data: mustJSON(v), Acl: zk.WorldACL(zk.PermAll)}
	}
	if sl != nil && sl.hasMark {
		prev = sl.mark
		ver := sl.mstat.Version
		mark = func(v markVal) any { return &zk.SetDataRequest{Path: r.markPath(id), Data: mustJSON(v), Version: ver} }
	}
	_, mono := r.clock.Now()
	wv := workerVal{Holder: s.holder, TTLms: s.ttl.Milliseconds(), ClockMs: clockMs}
	resp, err := call(ctx, func() ([]zk.MultiResponse, error) {
		return s.conn.Multi(
			&zk.CreateRequest{Path: r.workerPath(id), Data: mustJSON(wv), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral},
			mark(markVal{Holder: s.holder, Token: prev.Token, LastIssuedMs: prev.LastIssuedMs}),
		)
	})
	switch {
	case conflict(err):
		return lease.Lease{}, false, nil
	case err != nil:
		return lease.Lease{}, false, lease.Unavailable(err)
	}
	mver := int32(0) // a created mark
	if len(resp) == 2 && resp[1].Stat != nil {
		mver = resp[1].Stat.Version
	}
	// Won: read w's czxid (the token) and stamp it into m.
	wstat, err := call(ctx, func() (*zk.Stat, error) { _, st, err := s.conn.Exists(r.workerPath(id)); return st, err })
	switch {
	case err != nil:
		return lease.Lease{}, false, lease.Unavailable(err)
	case wstat == nil || wstat.EphemeralOwner != s.sid.Load():
		return lease.Lease{}, false, lease.Unavailable(fmt.Errorf("lease/zookeeper: worker %d claimed by session %#x, then gone", id, s.sid.Load()))
	}
	stamp := markVal{Holder: s.holder, Token: wstat.Czxid, LastIssuedMs: prev.LastIssuedMs}
	mstat, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(r.markPath(id), mustJSON(stamp), mver) })
	if err != nil {
		return lease.Lease{}, false, lease.Unavailable(fmt.Errorf("lease/zookeeper: stamping the token into worker %d's mark: %w", id, err))
	}
	s.workerID, s.token = id, wstat.Czxid
	s.mu.wver, s.mu.mver, s.mu.last = wstat.Version, mstat.Version, prev.LastIssuedMs
	s.mu.deadline = mono + int64(s.ttl)
	return lease.Lease{
		WorkerID:     id,
		Holder:       s.holder,
		Token:        wstat.Czxid,
		LeasedUntil:  time.UnixMilli(wstat.Mtime).Add(s.ttl),
		TTL:          s.ttl,
		LastIssuedMs: prev.LastIssuedMs,
		ReportedMs:   clockMs,
	}, true, nil
}

// op is what write does.
type op int

const (
	opRenew   op = iota // rewrite w (extending the lease) and raise the mark
	opRecord            // check w and raise the mark
	opRelease           // delete w and raise the mark; close the session
)

// write performs o with lastIssuedMs (and, for opRenew, the clock report
// clockMs) through the lease's session. A version conflict is checked
// against the znodes: if w is still this session's, with this token, the
// versions are refreshed and the write retried; otherwise the lease is
// lost.
func (s *session) write(ctx context.Context, o op, lastIssuedMs, clockMs int64) (lease.Lease, error) {
	if err := s.acquireLock(ctx); err != nil {
		return lease.Lease{}, err
	}
	defer s.unlock()
	for attempt := 0; ; attempt++ {
		_, mono := s.r.clock.Now()
		if err := s.checkLocked(mono); err != nil {
			return lease.Lease{}, err
		}
		last := max(s.mu.last, lastIssuedMs)
		resp, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(s.opsLocked(o, last, clockMs)...) })
		switch {
		case err == nil:
			l := s.wroteLocked(o, resp, last, mono)
			if o == opRenew {
				l.ReportedMs = clockMs
			}
			return l, nil
		case errors.Is(err, zk.ErrSessionExpired):
			return lease.Lease{}, s.endLocked(s.lost("session expired"))
		case !conflict(err):
			return lease.Lease{}, lease.Unavailable(err)
		case attempt == 2:
			return lease.Lease{}, lease.Unavailable(fmt.Errorf("lease/zookeeper: worker %d: writes keep conflicting: %w", s.workerID, err))
		}
		if err := s.refreshLocked(ctx); err != nil {
			return lease.Lease{}, err
		}
	}
}

// opsLocked builds the multi-op for o (clock is a renewal's report).
func (s *session) opsLocked(o op, last, clock int64) []any {
	wp := s.r.workerPath(s.workerID)
	var w any
	switch o {
	case opRenew:
		w = &zk.SetDataRequest{Path: wp, Data: mustJSON(workerVal{Holder: s.holder, TTLms: s.ttl.Milliseconds(), ClockMs: clock}), Version: s.mu.wver}
	case opRecord:
		w = &zk.CheckVersionRequest{Path: wp, Version: s.mu.wver}
	case opRelease:
		w = &zk.DeleteRequest{Path: wp, Version: s.mu.wver}
	}
	mv := mustJSON(markVal{Holder: s.holder, Token: s.token, LastIssuedMs: last})
	mp := s.r.markPath(s.workerID)
	if s.mu.mver < 0 {
		return []any{w, &zk.CreateRequest{Path: mp, Data: mv, Acl: zk.WorldACL(zk.PermAll)}}
	}
	return []any{w, &zk.SetDataRequest{Path: mp, Data: mv, Version: s.mu.mver}}
}

// wroteLocked records a successful write of o begun at mono and returns
// the lease as it now stands.
func (s *session) wroteLocked(o op, resp []zk.MultiResponse, last, mono int64) lease.Lease {
	s.mu.last = last
	s.mu.mver++
	if len(resp) == 2 && resp[1].Stat != nil {
		s.mu.mver = resp[1].Stat.Version
	}
	l := lease.Lease{WorkerID: s.workerID, Holder: s.holder, Token: s.token, TTL: s.ttl, LastIssuedMs: last}
	switch o {
	case opRenew:
		if len(resp) > 0 && resp[0].Stat != nil {
			s.mu.wver = resp[0].Stat.Version
			l.LeasedUntil = time.UnixMilli(resp[0].Stat.Mtime).Add(s.ttl)
		}
		s.mu.deadline = mono + int64(s.ttl)
	case opRelease:
		s.endLocked(s.lost("released"))
	}
	return l
}

// refreshLocked re-reads w and m after a conflict: the lease is lost
// unless w is still this session's, with this token; otherwise the
// versions (and the stored last_issued_ms, if higher) are taken up.
func (s *session) refreshLocked(ctx context.Context) error {
	type node struct {
		data []byte
		stat *zk.Stat
	}
	read := func(p string) (node, error) {
		return call(ctx, func() (node, error) { d, st, err := s.conn.Get(p); return node{d, st}, err })
	}
	w, err := read(s.r.workerPath(s.workerID))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return s.endLocked(s.lost("its znode is gone"))
	case errors.Is(err, zk.ErrSessionExpired):
		return s.endLocked(s.lost("session expired"))
	case err != nil:
		return lease.Unavailable(err)
	case w.stat.EphemeralOwner != s.sid.Load() || w.stat.Czxid != s.token:
		return s.endLocked(s.lost(fmt.Sprintf("another session (%#x, token %d) holds it", w.stat.EphemeralOwner, w.stat.Czxid)))
	}
	m, err := read(s.r.markPath(s.workerID))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		s.mu.mver = -1
	case err != nil:
		return lease.Unavailable(err)
	default:
		var mv markVal
		json.Unmarshal(m.data, &mv) //nolint:errcheck // a damaged mark reads as zero
		s.mu.mver, s.mu.last = m.stat.Version, max(s.mu.last, mv.LastIssuedMs)
	}
	s.mu.wver = w.stat.Version
	return nil
}
