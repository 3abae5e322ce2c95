package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/harness/netns"
)

// child is a process the soak started: it is signalled by its PID only,
// and Wait reaps it once.
type child struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	err   error         // its exit, once done is closed
	log   string        // where its output goes
	mu    sync.Mutex
	out   []string // its standard output after ready (with a ready func)
	ready atomic.Bool
}

func (c *child) readyDone() bool { return c.ready.Load() }

// stdout returns the standard output lines read after it was ready.
func (c *child) stdout() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.out...)
}

// start runs cmd with its output appended to logPath; ready, when set,
// is called with each line of its standard output until it returns true
// (start then returns), for at most timeout.
func start(name string, cmd *exec.Cmd, logPath string, timeout time.Duration, ready func(line string) bool) (*child, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = lf
	var out io.ReadCloser
	if ready != nil {
		if out, err = cmd.StdoutPipe(); err != nil {
			lf.Close()
			return nil, err
		}
	} else {
		cmd.Stdout = lf
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("soak: starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	lines := make(chan string, 16)
	if out != nil {
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				fmt.Fprintln(lf, sc.Text())
				if c.readyDone() {
					c.mu.Lock()
					c.out = append(c.out, sc.Text())
					c.mu.Unlock()
					continue
				}
				select {
				case lines <- sc.Text():
				default:
				}
			}
			close(lines)
		}()
	}
	go func() {
		c.err = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	if ready == nil {
		return c, nil
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				<-c.done
				return nil, fmt.Errorf("soak: %s exited before it was ready (%v); its log: %s", name, c.err, logPath)
			}
			if ready(l) {
				c.ready.Store(true)
				// Keep draining stdout into the log.
				go func() {
					for range lines {
					}
				}()
				return c, nil
			}
		case <-deadline.C:
			c.kill()
			return nil, fmt.Errorf("soak: %s not ready after %s; its log: %s", name, timeout, logPath)
		}
	}
}

// pid is the child's process ID.
func (c *child) pid() int { return c.cmd.Process.Pid }

// signal sends sig to the child if it still runs.
func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL and waits for the exit.
func (c *child) kill() {
	c.signal(syscall.SIGKILL)
	<-c.done
}

// stop sends sig and waits up to grace for the exit, then kills.
func (c *child) stop(sig syscall.Signal, grace time.Duration) {
	c.signal(sig)
	select {
	case <-c.done:
	case <-time.After(grace):
		c.kill()
	}
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cluster is a PostgreSQL cluster of the soak's own (initdb into its
// directory), on 127.0.0.1 only, trust authentication: the lease store
// the soak stops for its outage. The machine's own Postgres is never
// touched.
type cluster struct {
	bin, dir, data string
	port           int
	cred           *syscall.Credential // the postgres user's, when running as root
	proc           *child
}

// newCluster initialises a cluster in dir/pg. The server refuses to run
// as root: as root, the cluster belongs to the postgres user.
func newCluster(ctx context.Context, dir string) (*cluster, error) {
	bin, err := netns.PostgresBinDir()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: filepath.Join(dir, "pg"), port: port}
	c.data = filepath.Join(c.dir, "data")
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("soak: running as root, the cluster needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return nil, err
		}
		// The postgres user must reach c.dir through dir.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("soak: initdb: %v: %s", err, out)
	}
	return c, nil
}

// URL is the lease URL of the cluster's postgres database.
func (c *cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start runs the server and returns once it accepts connections.
func (c *cluster) start() error {
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-k", c.dir, "-h", "127.0.0.1", "-p", strconv.Itoa(c.port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "shared_buffers=16MB", "-c", "max_connections=50")
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	// The server logs to stderr; wait for its port instead of a line.
	p, err := start("postgres", cmd, filepath.Join(filepath.Dir(c.dir), "postgres.log"), 0, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.port), time.Second)
		if err == nil {
			conn.Close()
			c.proc = p
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("soak: postgres exited at start (%v): see %s", p.err, p.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("soak: postgres not accepting connections after 60s: see %s", p.log)
		}
	}
}

// crash stops the server at once, as a crash would (SIGQUIT: immediate
// shutdown, no checkpoint; the next start recovers from the WAL).
func (c *cluster) crash() {
	if c.proc != nil {
		c.proc.stop(syscall.SIGQUIT, 30*time.Second)
		c.proc = nil
	}
}

// close stops the server cleanly (SIGINT: fast shutdown).
func (c *cluster) close() {
	if c.proc != nil {
		c.proc.stop(syscall.SIGINT, 30*time.Second)
		c.proc = nil
	}
}

// readRSS returns VmRSS of pid in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("soak: no VmRSS for pid %d", pid)
}
