// Package zktest runs a real ZooKeeper server for tests: the Debian
// package's (apt-get install zookeeper) in standalone mode, on a free
// loopback port, with its configuration and data in a directory of its own.
// A test can kill it, restart it on the same port and data, and pause it
// with SIGSTOP, as a store outage does; it is killed by its PID when the
// test ends.
//
// A missing Java or ZooKeeper skips the test outside CI and fails it when
// CI is set (testenv.Missing). Readiness is polled with the srvr
// four-letter command, never waited out with a fixed sleep.
//
//	zs := zktest.Start(t, zktest.Options{})
//	conn, _, err := zk.Connect([]string{zs.Addr}, 10*time.Second)
package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// EnvJar names the environment variable that overrides the ZooKeeper jar.
const EnvJar = "SNOWCHAOS_ZOOKEEPER_JAR"

// DefaultJar is where Debian's zookeeper package installs the server; its
// manifest's Class-Path names every dependency.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// mainClass runs one server without a quorum.
const mainClass = "org.apache.zookeeper.server.ZooKeeperServerMain"

// Options configure a server. The zero value is a 200 ms tick with session
// timeouts from 400 ms to 10 minutes on a free port.
type Options struct {
	// TickTime is ZooKeeper's basic time unit; session expiry is checked
	// once per tick. Zero: 200ms.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// the server grants. Zero: 2 ticks and 10 minutes.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// Port is the loopback client port; zero: a free one.
	Port int
	// StartTimeout bounds the wait until the server serves; zero: 60s.
	StartTimeout time.Duration
}

// Server is a running (or stopped) ZooKeeper server. Its methods are safe
// for concurrent use.
type Server struct {
	// Addr is "127.0.0.1:port", the client address.
	Addr string
	// Dir holds zoo.cfg and the data directory.
	Dir string

	java, jar, cfg string
	timeout        time.Duration

	mu struct {
		sync.Mutex
		proc   *testenv.Process
		paused bool
	}
}

// Find returns the java binary and the ZooKeeper jar ($SNOWCHAOS_ZOOKEEPER_JAR,
// else DefaultJar), or an error naming what is missing.
func Find() (java, jar string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("zktest: java not found on PATH (Debian: apt-get install default-jre-headless): %w", err)
	}
	jar = os.Getenv(EnvJar)
	if jar == "" {
		jar = DefaultJar
	}
	if _, err := os.Stat(jar); err != nil {
		return "", "", fmt.Errorf("zktest: no ZooKeeper jar (Debian: apt-get install zookeeper, or set $%s): %w", EnvJar, err)
	}
	return java, jar, nil
}

// Start starts a server for t, as Launch does in a directory under
// t.TempDir, and kills it when the test ends. A missing Java or ZooKeeper
// calls testenv.Missing; a server that does not come up fails t with its
// log.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if _, _, err := Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before the server binds it
		s, err := Launch(t.TempDir(), o)
		if err == nil {
			t.Cleanup(s.Kill)
			return s
		}
		lastErr = err
		if o.Port != 0 {
			break
		}
	}
	t.Fatalf("%v", lastErr)
	return nil
}

// Launch writes a configuration into dir, starts the server and waits
// until it serves. The caller stops it (Kill or Stop).
func Launch(dir string, o Options) (*Server, error) {
	java, jar, err := Find()
	if err != nil {
		return nil, err
	}
	if o.TickTime == 0 {
		o.TickTime = 200 * time.Millisecond
	}
	if o.MinSessionTimeout == 0 {
		o.MinSessionTimeout = 2 * o.TickTime
	}
	if o.MaxSessionTimeout == 0 {
		o.MaxSessionTimeout = 10 * time.Minute
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Port == 0 {
		if o.Port, err = testenv.FreeTCPPort(); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
forceSync=no
`, o.TickTime.Milliseconds(), o.MinSessionTimeout.Milliseconds(), o.MaxSessionTimeout.Milliseconds(), data, o.Port)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)),
		Dir:  dir, java: java, jar: jar, cfg: cfg, timeout: o.StartTimeout,
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts the server again on the same port and data after Kill or
// Stop (a no-op while it runs) and waits until it serves. Sessions that
// have not expired survive it, as they do a real server's restart.
func (s *Server) Restart() error {
	p, err := s.spawn()
	if err != nil || p == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := testenv.Poll(ctx, 50*time.Millisecond, p.Exited(), func() bool { return s.serving(time.Second) }); err != nil {
		p.Stop(nil, 0)
		return fmt.Errorf("zktest: ZooKeeper on %s not serving: %w\n--- server log ---\n%s", s.Addr, err, p.Log())
	}
	return nil
}

// spawn starts the server process unless it runs (then it returns nil).
func (s *Server) spawn() (*testenv.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.mu.proc; p != nil {
		select {
		case <-p.Exited():
		default:
			return nil, nil
		}
	}
	cmd := exec.Command(s.java,
		"-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true", "-Djava.io.tmpdir="+s.Dir,
		"-cp", s.jar, mainClass, s.cfg)
	// The server dies with the test process, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := testenv.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("zktest: starting %s: %w", s.java, err)
	}
	s.mu.proc, s.mu.paused = p, false
	return p, nil
}

// Serving reports whether the server answers srvr as a serving server
// within timeout.
func (s *Server) Serving(timeout time.Duration) bool { return s.serving(timeout) }

func (s *Server) serving(timeout time.Duration) bool {
	out, err := FourLetter(s.Addr, "srvr", timeout)
	return err == nil && strings.Contains(out, "Mode: standalone")
}

// FourLetter sends a four-letter command (srvr, ruok) to the server at addr
// and returns its answer, all within timeout.
func FourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 64<<10))
	return string(b), err
}

// PID returns the server process's ID (0 when it is not running).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.proc == nil {
		return 0
	}
	select {
	case <-s.mu.proc.Exited():
		return 0
	default:
		return s.mu.proc.Cmd.Process.Pid
	}
}

// Kill kills the server with SIGKILL (a crash: nothing is flushed) and
// waits until it has exited; a paused server is killed too.
func (s *Server) Kill() { s.stop(nil) }

// Stop stops the server with SIGTERM, killing it after 10 s.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

func (s *Server) stop(sig os.Signal) {
	s.mu.Lock()
	p, paused := s.mu.proc, s.mu.paused
	s.mu.paused = false
	s.mu.Unlock()
	if p == nil {
		return
	}
	if paused && sig != nil {
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	}
	p.Stop(sig, 10*time.Second)
}

// Pause stops the server with SIGSTOP: it holds its connections but
// answers nothing, like a frozen VM. It returns once every thread of the
// server has stopped (SIGSTOP reaches each thread on its own, and one
// still running could answer a client), within 5 s. Resume continues it.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP, true); err != nil {
		return err
	}
	return waitStopped(s.PID(), 5*time.Second)
}

// waitStopped waits, within timeout, until no thread of process pid can
// run: each is stopped (state T in /proc/PID/task/TID/stat) or gone.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running, err := runningThread(pid)
		if err != nil || running == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: thread %s of process %d still not stopped %v after SIGSTOP", running, pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThread returns a thread of process pid that is neither stopped
// nor gone, or "" when there is none.
func runningThread(pid int) (string, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("zktest: threads of process %d: %w", pid, err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return "", fmt.Errorf("zktest: %w", err)
		}
		// The state follows the command name, which is in parentheses
		// and may hold any byte: ") S ...".
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return "", fmt.Errorf("zktest: %s/%s/stat has no state: %q", dir, t.Name(), b)
		}
		switch b[i+2] {
		case 'T', 'Z', 'X': // stopped, or exited
		default:
			return t.Name(), nil
		}
	}
	return "", nil
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.proc == nil {
		return errors.New("zktest: server not started")
	}
	select {
	case <-s.mu.proc.Exited():
		return errors.New("zktest: server not running")
	default:
	}
	if err := s.mu.proc.Cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.mu.paused = paused
	return nil
}

// Log returns what the server process has written so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.proc == nil {
		return ""
	}
	return s.mu.proc.Log()
}
