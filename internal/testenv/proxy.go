package testenv

import (
	"net"
	"sync"
	"testing"
)

// ProxyMode is what a Proxy does with traffic.
type ProxyMode int

// Proxy modes.
const (
	// ProxyOpen forwards every byte both ways.
	ProxyOpen ProxyMode = iota
	// ProxyRefuse closes every connection and refuses new ones at once:
	// the peer sees a reset, as when a server's host is down.
	ProxyRefuse
	// ProxyDrop keeps connections open (and accepts new ones) but
	// forwards nothing: the peer sees silence until its own timeouts, as
	// in a network partition.
	ProxyDrop
)

// Proxy forwards TCP connections from a loopback port to a target and can
// cut them (a partition between a client and a server on one machine).
// Safe for concurrent use.
type Proxy struct {
	// Addr is the proxy's "127.0.0.1:port"; point the client here.
	Addr string

	ln     net.Listener
	target string
	mu     struct {
		sync.Mutex
		mode  ProxyMode
		conns map[net.Conn]struct{}
	}
}

// StartProxy starts a Proxy forwarding to target; it is closed when the
// test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target}
	p.mu.conns = map[net.Conn]struct{}{}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SetMode(ProxyRefuse)
}

// SetMode switches the proxy to m. Entering ProxyRefuse, and leaving
// ProxyDrop, closes every connection, so that clients reconnect afresh.
func (p *Proxy) SetMode(m ProxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == ProxyRefuse || (p.mu.mode == ProxyDrop && m != ProxyDrop) {
		for c := range p.mu.conns {
			c.Close()
			delete(p.mu.conns, c)
		}
	}
	p.mu.mode = m
}

// Mode returns the current mode.
func (p *Proxy) Mode() ProxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.mode
}

// track registers c unless the proxy refuses; it reports whether it did.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.mode == ProxyRefuse {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.mu.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		if p.Mode() == ProxyDrop {
			go p.pump(nil, c) // swallow what the client sends; never dial
			continue
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(d) {
			c.Close()
			continue
		}
		go p.pump(d, c)
		go p.pump(c, d)
	}
}

// pump copies src to dst (nil: nowhere) while the proxy is open, dropping
// what it reads in ProxyDrop; it closes both when src ends.
func (p *Proxy) pump(dst, src net.Conn) {
	defer func() {
		src.Close()
		if dst != nil {
			dst.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && p.Mode() == ProxyOpen {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
