package testenv

import (
	"io"
	"net"
	"testing"
)

// ServeEcho answers every byte back on each connection ln accepts, until
// the end of the test (ln is closed then), and returns ln's address.
func ServeEcho(t testing.TB, ln net.Listener) string {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}
