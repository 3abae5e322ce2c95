// Package chronytest starts NTP servers on loopback for tests: a real
// chronyd (never touching the system clock) and a tiny in-process responder
// that can lie about the time, the leap indicator or its stratum.
//
// Following the project rule, a test that needs chronyd skips when it is
// missing only outside CI; with CI set, a missing chronyd fails the test.
package chronytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// Options configures a chronyd.
type Options struct {
	// NoLocal leaves out the "local stratum" line, so chronyd has no
	// reference and answers unsynchronised (leap 3, stratum 0).
	NoLocal bool
	// Stratum is the local reference's stratum. Zero: 8.
	Stratum int
	// Extra lines appended to the configuration.
	Extra []string
}

// Chronyd is a running chronyd.
type Chronyd struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// Port is the UDP port it serves NTP on.
	Port int
	// Dir holds its configuration, pid file and drift file.
	Dir string

	proc *testenv.Process
}

// Binary returns the path of chronyd, or "" when it is not installed.
func Binary() string {
	if p, err := exec.LookPath("chronyd"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/chronyd", "/sbin/chronyd", "/usr/local/sbin/chronyd"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// Require returns chronyd's path; it skips the test when chronyd is
// missing and CI is unset, and fails it when CI is set.
func Require(t testing.TB) string {
	t.Helper()
	p := Binary()
	if p == "" {
		testenv.Missing(t, "chronyd not found in PATH, /usr/sbin or /sbin (install Debian's chrony package: apt-get install -y chrony)")
	}
	return p
}

// Start starts chronyd on a free loopback UDP port with a configuration in
// a temporary directory, waits until it answers (and, unless
// opt.NoLocal, until it serves synchronised time), and stops it when the
// test ends. It fails the test, with chronyd's log, if chronyd does not
// come up within 20 s.
func Start(t testing.TB, opt Options) *Chronyd {
	t.Helper()
	bin := Require(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before chronyd binds it
		c, err := start(t, bin, opt)
		if err == nil {
			return c
		}
		lastErr = err
	}
	t.Fatalf("chronytest: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string, opt Options) (*Chronyd, error) {
	dir := t.TempDir()
	port, err := testenv.FreeUDPPort()
	if err != nil {
		return nil, err
	}
	stratum := opt.Stratum
	if stratum == 0 {
		stratum = 8
	}
	conf := fmt.Sprintf("port %d\nbindaddress 127.0.0.1\nallow 127.0.0.1\ncmdport 0\nbindcmdaddress /\n"+
		"pidfile %s\ndriftfile %s\n",
		port, filepath.Join(dir, "chronyd.pid"), filepath.Join(dir, "chronyd.drift"))
	if !opt.NoLocal {
		conf += fmt.Sprintf("local stratum %d\n", stratum)
	}
	for _, l := range opt.Extra {
		conf += l + "\n"
	}
	confPath := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	// -x: never touch the system clock; -d: foreground, log to stderr;
	// -u: stay the current user, so the temp dir stays writable; -U: allow
	// a non-root user; -t: exit on its own should the test process die.
	args := []string{"-x", "-d", "-f", confPath, "-t", "1800"}
	if u, err := user.Current(); err == nil {
		args = append(args, "-u", u.Username)
	}
	if os.Geteuid() != 0 {
		args = append(args, "-U")
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := testenv.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &Chronyd{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir, proc: proc}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.waitReady(ctx, !opt.NoLocal); err != nil {
		c.stop()
		return nil, fmt.Errorf("chronyd on %s: %w\nconfig:\n%s\nlog:\n%s", c.Addr, err, conf, c.Log())
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("chronyd %s log:\n%s", c.Addr, c.Log())
		}
	})
	return c, nil
}

// waitReady polls with queries until chronyd answers (synchronised, when
// synced is set), it exits, or ctx ends.
func (c *Chronyd) waitReady(ctx context.Context, synced bool) error {
	var last string
	err := testenv.Poll(ctx, 20*time.Millisecond, c.proc.Exited(), func() bool {
		r, err := ntp.QueryWithOptions(c.Addr, ntp.QueryOptions{Timeout: 250 * time.Millisecond})
		switch {
		case err != nil:
			last = err.Error()
		case !synced:
			return true
		case r.Stratum > 0 && r.Stratum < 16 && r.Leap != ntp.LeapNotInSync:
			return true
		default:
			last = fmt.Sprintf("answers unsynchronised (stratum %d, leap %d)", r.Stratum, r.Leap)
		}
		return false
	})
	switch {
	case errors.Is(err, testenv.ErrExited):
		return errors.New("chronyd exited")
	case err != nil:
		return fmt.Errorf("not ready: %s", last)
	}
	return nil
}

// Log returns what chronyd has logged so far.
func (c *Chronyd) Log() string { return c.proc.Log() }

// stop terminates chronyd and waits for it, killing it after 5 s.
func (c *Chronyd) stop() { c.proc.Stop(syscall.SIGTERM, 5*time.Second) }

// ClosedAddr returns a loopback address on which nothing listens (a port
// that was free a moment ago): queries to it are refused at once.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	p, err := testenv.FreeUDPPort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}
