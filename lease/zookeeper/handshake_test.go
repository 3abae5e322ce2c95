package zookeeper

import (
	"encoding/binary"
	"testing"
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
