// Package etcdtest runs an etcd server embedded in the test process (the
// etcd module's, the version the lease package's client speaks) on
// loopback ports, for tests that need a real etcd without the etcd
// package installed.
package etcdtest

import (
	"net"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is one embedded etcd member with its data in a temporary
// directory; it can be stopped and started again on the same ports and
// data.
type Server struct {
	// ClientURL is where clients reach it (http://127.0.0.1:port).
	ClientURL url.URL

	t       testing.TB
	dir     string
	peerURL url.URL
	e       *embed.Etcd
}

// Start starts a server, stopped at the end of the test; it fails the
// test when the server is not ready within 30 s.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:         t,
		dir:       t.TempDir(),
		ClientURL: url.URL{Scheme: "http", Host: freePort(t)},
		peerURL:   url.URL{Scheme: "http", Host: freePort(t)},
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Restart starts the server again after Stop, on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "lease-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.ClientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.ClientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "fatal" // closing the server on purpose logs errors
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("start embedded etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		s.t.Fatalf("embedded etcd not ready after 30s")
	}
	s.e = e
}

// Stop stops the server (a no-op when stopped).
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Client returns a client of endpoint (host:port or a URL), closed at the
// end of the test.
func (s *Server) Client(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
