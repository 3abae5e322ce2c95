package server

import (
	"time"

	"github.com/valyala/fasthttp"
)

// h1Timeouts are the HTTP/1.1 serving timeouts, kept by each connection
// rather than by fasthttp. fasthttp reads the wall clock (time.Now, two
// clock reads) for each deadline it moves, three times per request, and
// once more for the request's time; the connection instead reads the
// monotonic clock once when a request's first byte arrives and once when
// it goes idle (see h1State), and the request's start serves the route
// too (requestStart). The deadlines:
//
//   - a new connection's first request: its line and headers within
//     readHeader of the connection's start (set by sniff);
//   - every later request: within readHeader of its first byte;
//   - a request with a body: the rest of ReadTimeout after its headers
//     (fasthttp's HeaderReceived, which sets it through SetReadDeadline);
//   - the response: written within write of the request's first byte, as
//     net/http counts WriteTimeout for HTTP/2 (the handler's own time is
//     bounded below it: an ID request's by its budget);
//   - a keep-alive connection: its next request's first byte within idle
//     of the end of the last response.
type h1Timeouts struct {
	readHeader, write, idle time.Duration
}

// mono is a reading of the monotonic clock, in nanoseconds since
// monoOrigin: the connections' and the route's time, read with one clock
// read where time.Now takes two. As a deadline, 0 means none.
type mono int64

// monoOrigin anchors mono readings.
var monoOrigin = time.Now()

// monoNow reads the monotonic clock.
func monoNow() mono { return mono(time.Since(monoOrigin)) }

// toMono converts t; the zero time is 0 (none), and any other time is
// never 0 (a time at monoOrigin itself is 1 ns earlier).
func toMono(t time.Time) mono {
	if t.IsZero() {
		return 0
	}
	if m := mono(t.Sub(monoOrigin)); m != 0 {
		return m
	}
	return -1
}

// add returns m + d.
func (m mono) add(d time.Duration) mono { return m + mono(d) }

// time returns m as a time.Time (0: the zero time). Its wall-clock part
// is monoOrigin's plus the time elapsed: for deadlines, not timestamps.
func (m mono) time() time.Time {
	if m == 0 {
		return time.Time{}
	}
	return monoOrigin.Add(time.Duration(m))
}

// h1State moves the connection's deadlines as fasthttp reports its state
// (its ConnState hook) and keeps the connection limiter's idle list. A
// deadline that cannot be armed means the connection is closed: its next
// read or write fails, and fasthttp ends it there.
func (c *limitedConn) h1State(st fasthttp.ConnState) {
	switch st {
	case fasthttp.StateActive:
		if t := c.timeouts; t != nil {
			now := monoNow()
			c.start = now
			if c.requests > 0 { // the first request has the deadline sniff set
				c.rd.set(now.add(t.readHeader), c.Conn.SetReadDeadline)
			}
			c.requests++
			c.wd.set(now.add(t.write), c.Conn.SetWriteDeadline)
		}
		c.setIdle(false)
	case fasthttp.StateIdle:
		if t := c.timeouts; t != nil {
			c.rd.set(monoNow().add(t.idle), c.Conn.SetReadDeadline)
		}
		c.setIdle(true)
	}
}

// requestStart is when request c began: its first byte's arrival on a
// connection that keeps its own timeouts, else the time fasthttp gives it.
func requestStart(c *fasthttp.RequestCtx) mono {
	if lc, ok := c.Conn().(*limitedConn); ok && lc.timeouts != nil {
		return lc.start
	}
	return toMono(c.Time())
}

// lazyDeadline keeps a connection's deadline (read or write) armed no
// later than the one wanted, arming a new one only when the wanted
// deadline is earlier than the armed one; an armed deadline that fires
// before the wanted one is re-armed and the I/O goes on. A connection
// whose deadline moves forward at every request (h1State moves the read
// deadline twice and the write deadline once per request) then arms a
// timer once every few timeouts rather than three times per request, and
// a deadline still never fires later than wanted. Only one goroutine may
// use it: the one that sets the deadline and does the I/O.
type lazyDeadline struct {
	want, armed mono // 0: none
}

// set records t as the wanted deadline and arms it when the armed one
// would fire later (or none is armed).
func (d *lazyDeadline) set(t mono, arm func(time.Time) error) error {
	d.want = t
	if t == d.armed || (d.armed != 0 && (t == 0 || t > d.armed)) {
		return nil // the armed deadline fires first; rearm moves it on then
	}
	if err := arm(t.time()); err != nil {
		return err
	}
	d.armed = t
	return nil
}

// rearm is called when the armed deadline fired: it reports false when
// the wanted deadline has passed too (a real timeout), else arms the
// wanted one and reports true (go on).
func (d *lazyDeadline) rearm(arm func(time.Time) error) bool {
	if d.want != 0 && monoNow() >= d.want {
		return false
	}
	if arm(d.want.time()) != nil {
		return false
	}
	d.armed = d.want
	return true
}
