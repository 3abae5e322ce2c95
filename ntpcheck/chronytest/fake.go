package chronytest

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// Fake describes an in-process NTPv4 server that answers from the host's
// clock plus Offset, with the header fields given. Its zero value is a
// healthy stratum 2 server.
type Fake struct {
	// Offset is added to the host's clock in answers: a positive Offset
	// makes the host look behind, a negative one ahead.
	Offset time.Duration
	// Stratum reported; zero: 2. Use KissCode for a kiss-of-death.
	Stratum uint8
	// Leap is the leap indicator (0-3).
	Leap uint8
	// RefID is the reference ID; zero: 127.0.0.1 (as 0x7f000001).
	RefID uint32
	// KissCode, when set, makes every answer a kiss-of-death: stratum 0
	// with the code as reference ID and leap 3, as ntpd sends them.
	KissCode string
	// RootDelay and RootDispersion reported.
	RootDelay, RootDispersion time.Duration
	// Now is the server's base clock; nil: time.Now.
	Now func() time.Time
}

// StartFake serves f on a free loopback UDP port until the test ends and
// returns its address. It answers every well-formed client request.
func StartFake(t testing.TB, f Fake) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { serveFake(pc, f) })
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

func serveFake(pc net.PacketConn, f Fake) {
	now := f.Now
	if now == nil {
		now = time.Now
	}
	buf := make([]byte, 1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n < 48 || buf[0]&7 != 3 { // client mode only
			continue
		}
		recv := now().Add(f.Offset)
		resp := make([]byte, 48)
		leap, stratum, ref := f.Leap, f.Stratum, f.RefID
		if stratum == 0 {
			stratum = 2
		}
		if ref == 0 {
			ref = 0x7f000001
		}
		if f.KissCode != "" {
			leap, stratum = 3, 0
			var code [4]byte
			copy(code[:], f.KissCode)
			ref = binary.BigEndian.Uint32(code[:])
		}
		version := (buf[0] >> 3) & 7
		resp[0] = leap<<6 | version<<3 | 4
		resp[1] = stratum
		resp[2] = 6    // poll 64 s
		resp[3] = 0xec // precision -20: about 1 µs
		binary.BigEndian.PutUint32(resp[4:], short(f.RootDelay))
		binary.BigEndian.PutUint32(resp[8:], short(f.RootDispersion))
		binary.BigEndian.PutUint32(resp[12:], ref)
		binary.BigEndian.PutUint64(resp[16:], Timestamp(recv.Add(-time.Second)))
		copy(resp[24:32], buf[40:48]) // origin = client's transmit
		binary.BigEndian.PutUint64(resp[32:], Timestamp(recv))
		binary.BigEndian.PutUint64(resp[40:], Timestamp(now().Add(f.Offset)))
		_, _ = pc.WriteTo(resp, from)
	}
}

// ntpEpochOffset is the number of seconds from 1900-01-01 to 1970-01-01.
const ntpEpochOffset = 2208988800

// Timestamp encodes t as a 64-bit NTP timestamp (era 0).
func Timestamp(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := (uint64(t.Nanosecond()) << 32) / 1e9
	return secs<<32 | frac
}

// short encodes d as NTP's 32-bit Q16.16 seconds.
func short(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32((uint64(d) << 16) / uint64(time.Second))
}
