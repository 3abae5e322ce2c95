package zookeeper

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// frame is a connect response: length, protocol version, timeout,
// session ID, a 16-byte password.
func frame(timeoutMs int32, id int64) []byte {
	b := make([]byte, 4+4+4+8+4+16)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[8:], uint32(timeoutMs))
	binary.BigEndian.PutUint64(b[12:], uint64(id))
	binary.BigEndian.PutUint32(b[20:], 16)
	return b
}

type answers struct {
	n       int
	id      int64
	timeout int32
}

func (a *answers) answer(id int64, timeoutMs int32) { a.n, a.id, a.timeout = a.n+1, id, timeoutMs }

// TestHandshakeFeed: the connect response is decoded whatever the reads
// split it into, reported once, and what follows it is ignored; a frame
// of an impossible size is never decoded.
func TestHandshakeFeed(t *testing.T) {
	f := append(frame(4000, 0x1234), 0, 0, 0, 9, 1, 2, 3) // and the start of the next frame
	for _, chunk := range []int{1, 3, 4, 7, len(f)} {
		var a answers
		c := &handshakeConn{answer: a.answer}
		for i := 0; i < len(f); i += chunk {
			c.feed(f[i:min(i+chunk, len(f))])
		}
		if a.n != 1 || a.id != 0x1234 || a.timeout != 4000 {
			t.Errorf("chunks of %d: %+v, want one answer (0x1234, 4000)", chunk, a)
		}
	}
	for _, size := range []uint32{0, 15, maxHandshake + 1, 1 << 31} {
		var a answers
		c := &handshakeConn{answer: a.answer}
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b, size)
		c.feed(b)
		c.feed(frame(4000, 1))
		if a.n != 0 || !c.done {
			t.Errorf("size %d: answered %+v, done %v; want no answer and done", size, a, c.done)
		}
	}
}

// FuzzHandshakeFeed: any bytes, in any split, never panic, buffer at most
// one bounded frame and answer at most once.
func FuzzHandshakeFeed(f *testing.F) {
	f.Add(frame(4000, 7), uint8(3))
	f.Add([]byte{0, 0, 0, 16}, uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		step := int(chunk%16) + 1
		var a answers
		c := &handshakeConn{answer: a.answer}
		for i := 0; i < len(data); i += step {
			c.feed(data[i:min(i+step, len(data))])
			if len(c.buf) > 4+maxHandshake+step {
				t.Fatalf("buffered %d bytes", len(c.buf))
			}
		}
		if a.n > 1 {
			t.Fatalf("answered %d times", a.n)
		}
	})
}

// blackHole accepts connections and reads them without ever answering,
// as a restarting server that took the connection before it could
// serve; it is closed when the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// firstLog records when a logger first prints a message containing want.
type firstLog struct {
	want string
	at   chan time.Time
	once sync.Once
}

func (l *firstLog) Printf(format string, args ...any) {
	if strings.Contains(fmt.Sprintf(format, args...), l.want) {
		l.once.Do(func() { l.at <- time.Now() })
	}
}

// TestHandshakeAnswerWithin: go-zookeeper waits ten times its receive
// timeout (6.7 session timeouts: 10 s for 1.5 s) for a server's connect
// response; a session's connection gives up after two thirds of the
// session timeout (1 s) and dials again. Measured: the first
// "authentication failed" after 1.0 s, against 10 s without the cap.
func TestHandshakeAnswerWithin(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	s := &session{answerWithin: ttl * 2 / 3}
	log := &firstLog{want: "authentication failed", at: make(chan time.Time, 1)}
	start := time.Now()
	conn, _, err := zk.Connect([]string{blackHole(t)}, ttl, zk.WithDialer(s.dialer), zk.WithLogger(log), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case at := <-log.at:
		if took := at.Sub(start); took < ttl*2/3 || took > 5*time.Second {
			t.Errorf("the unanswered handshake failed after %v, want about %v (uncapped: %v)", took, ttl*2/3, 10*ttl*2/3)
		} else {
			t.Logf("the unanswered handshake failed after %v", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no handshake failure within 20s")
	}
}

// TestHandshakeDeadlinePassesAfterAnswer: once the connect response is
// read, go-zookeeper's own read deadlines are kept.
func TestHandshakeDeadlinePassesAfterAnswer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &handshakeConn{Conn: a, answer: func(int64, int32) {}, answerWithin: 50 * time.Millisecond}
	go b.Write(frame(3000, 7))
	if _, err := io.ReadFull(c, make([]byte, len(frame(3000, 7)))); err != nil || !c.done {
		t.Fatalf("reading the connect response: %v, done %v", err, c.done)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("a read after the answer ended early: %v (the cap applies only before it)", err)
	case <-time.After(500 * time.Millisecond):
	}
}
