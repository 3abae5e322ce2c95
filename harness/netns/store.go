//go:build linux

package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/harness/proclog"
)

// Server is a lease store's server process running on a host: a
// PostgreSQL cluster of its own (initdb into a temporary directory) or an
// etcd member, listening on the host's address only.
type Server struct {
	// Kind is "postgres" or "etcd".
	Kind string
	// URL is the lease URL nodes are given (postgres://... or etcd://...).
	URL string
	// Addr is the address it listens on.
	Addr netip.AddrPort

	host   *Host
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	log    *proclog.Tail

	closeOnce sync.Once
	closeErr  error
}

// Store ports inside a store's namespace (its own stack: they collide
// with nothing on the machine).
const (
	PostgresPort = 55432
	EtcdPort     = 2379
)

// EnvEtcd names the etcd server binary StartEtcd runs when it is given
// none: the Debian package's etcd or internal/testenv/etcdtest/etcdserver (the same
// flags).
const EnvEtcd = "SNOWCHAOS_ETCD_BIN"

// startTimeout bounds a server's start.
const startTimeout = 60 * time.Second

// PostgresBinDir returns the directory holding initdb and postgres.
func PostgresBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(r), nil
		}
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(ms) == 0 {
		return "", errors.New("netns: no initdb (Debian package postgresql)")
	}
	return filepath.Dir(ms[len(ms)-1]), nil
}

// StartPostgres initialises a cluster in a new temporary directory (owned
// by the postgres user, as the server refuses to run as root) and runs it
// on h, listening on h's address only (the network's Close stops it), trust authentication, no fsync
// (the run's data is thrown away), reachable from the run's subnet only.
// The URL's database is postgres.
func StartPostgres(ctx context.Context, h *Host) (*Server, error) {
	bin, err := PostgresBinDir()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("netns: the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", dirPrefix+"pg-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := h.net.recordDir(dir); err != nil {
		return fail(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	ictx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	initdb := exec.CommandContext(ictx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("netns: initdb: %v: %s", err, out))
	}
	hba := fmt.Sprintf("local all all trust\nhost all all %s trust\n", h.net.Subnet)
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fail(err)
	}
	if err := os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid); err != nil {
		return fail(err)
	}
	addr := netip.AddrPortFrom(h.Addr, PostgresPort)
	s := &Server{Kind: "postgres", Addr: addr, host: h, dir: dir,
		URL: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)}
	s.cmd = h.Command("setpriv", "--reuid", u.Uid, "--regid", u.Gid, "--clear-groups",
		filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-h", h.Addr.String(), "-p", strconv.Itoa(PostgresPort),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=200")
	if err := s.start(ctx, "ready to accept connections"); err != nil {
		return fail(err)
	}
	return s, h.net.adopt(s)
}

// StartEtcd runs an etcd member on h (bin, or $SNOWCHAOS_ETCD_BIN, or etcd
// in PATH), clients on h's address, its peer port on the namespace's
// loopback, data in a new temporary directory.
func StartEtcd(ctx context.Context, h *Host, bin string) (*Server, error) {
	if bin == "" {
		bin = os.Getenv(EnvEtcd)
	}
	if bin == "" {
		p, err := exec.LookPath("etcd")
		if err != nil {
			return nil, fmt.Errorf("netns: no etcd server binary (set $%s, e.g. to a build of ./internal/testenv/etcdtest/etcdserver)", EnvEtcd)
		}
		bin = p
	}
	dir, err := os.MkdirTemp("", dirPrefix+"etcd-")
	if err != nil {
		return nil, err
	}
	if err := h.net.recordDir(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := netip.AddrPortFrom(h.Addr, EtcdPort)
	client := "http://" + addr.String()
	peer := "http://127.0.0.1:2380"
	s := &Server{Kind: "etcd", Addr: addr, host: h, dir: dir, URL: "etcd://" + addr.String()}
	s.cmd = h.Command(bin, "--name", "store", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "store="+peer, "--log-level", "error")
	if err := s.start(ctx, ""); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, h.net.adopt(s)
}

// start runs s.cmd in its own process group and waits until ready: until
// a line of its stderr contains readyLine, or (readyLine empty) until its
// /health answers from the host.
func (s *Server) start(ctx context.Context, readyLine string) error {
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.log = &proclog.Tail{}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return err
	}
	s.cmd.Stdout = s.log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("netns: starting %s: %w", s.Kind, err)
	}
	s.exited = make(chan struct{})
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.log.Write([]byte(line + "\n"))
			if readyLine != "" && strings.Contains(line, readyLine) {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if readyLine == "" {
		go s.pollHealth(ctx, func() { once.Do(func() { close(ready) }) })
	}
	select {
	case <-ready:
		return nil
	case <-s.exited:
		return fmt.Errorf("netns: %s exited before it was ready (%v): %s", s.Kind, s.cmd.ProcessState, s.log.String())
	case <-ctx.Done():
		s.kill()
		return fmt.Errorf("netns: %s not ready within %s: %s", s.Kind, startTimeout, s.log.String())
	}
}

// pollHealth calls ready once GET /health answers 200 from the host.
func (s *Server) pollHealth(ctx context.Context, ready func()) {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: s.host.DialContext, DisableKeepAlives: true}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr.String()+"/health", nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.exited:
			return
		case <-tick.C:
		}
	}
}

// recordDir adds a server's data directory to the run's record before
// anything is written in it, so that a crashed run's is removed too.
func (n *Net) recordDir(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.rec.Dirs = append(n.mu.rec.Dirs, dir)
	return n.mu.rec.write(n.dir)
}

// adopt makes n.Close close s; a closed n closes it at once.
func (n *Net) adopt(s *Server) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		s.Close()
		return ErrClosed
	}
	n.mu.servers = append(n.mu.servers, s)
	return nil
}

// kill ends the server's process group at once and waits for it.
func (s *Server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Close stops the server (SIGTERM, then after 10 s SIGKILL to its process
// group) and deletes its data directory. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	select {
	case <-s.exited:
	default:
		syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.kill()
		}
	}
	// Whatever of the group is left (a backend that outlived its
	// postmaster).
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	return os.RemoveAll(s.dir)
}

// Log returns the last lines the server wrote.
func (s *Server) Log() string { return s.log.String() }
