package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every byte back.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeEcho(t, ln)
}

// roundTrip writes a byte through c and reads the echo within d.
func roundTrip(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte{'x'}); err != nil {
		return err
	}
	b := make([]byte, 1)
	_, err := io.ReadFull(c, b)
	return err
}

func TestProxyModes(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("open: %v", err)
	}
	p.SetMode(ProxyDrop)
	if err := roundTrip(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("drop: %v, want a timeout (silence)", err)
	}
	p.SetMode(ProxyOpen) // leaving drop closes the connection
	if err := roundTrip(c, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after drop: %v, want the connection closed", err)
	}
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(c2, 5*time.Second); err != nil {
		t.Fatalf("reopened: %v", err)
	}
	p.SetMode(ProxyRefuse)
	if err := roundTrip(c2, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("refuse: %v, want the connection closed", err)
	}
	c3, err := net.Dial("tcp", p.Addr)
	if err == nil {
		defer c3.Close()
		if err := roundTrip(c3, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("new connection while refusing: %v, want it closed", err)
		}
	}
}
