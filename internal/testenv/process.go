package testenv

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: the place for a
// child process's output, or a logger's, read while it is written. The
// zero value is an empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeTCPPort returns a loopback TCP port that was free a moment ago.
// Another process may take it before the caller binds it, so a caller
// that hands it to a child process retries the start.
func FreeTCPPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// FreeUDPPort returns a loopback UDP port that was free a moment ago.
func FreeUDPPort() (int, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port, nil
}

// FreePort is FreeTCPPort failing t when no port can be had.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := FreeTCPPort()
	if err != nil {
		t.Fatalf("testenv: no free loopback port: %v", err)
	}
	return p
}

// Process is a child process started by StartProcess: its output is
// collected and its exit watched. Safe for concurrent use.
type Process struct {
	// Cmd is the started command; Cmd.ProcessState is set once Exited is
	// closed.
	Cmd *exec.Cmd

	log    SyncBuffer
	exited chan struct{}
}

// StartProcess starts cmd with its stdout and stderr, unless already set,
// collected into Log, and watches for its exit. It does not stop the
// process: call Stop, usually from t.Cleanup.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = &p.log
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &p.log
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Exited is closed once the process has exited and been waited for.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Log returns what the process has written to the collected streams so
// far.
func (p *Process) Log() string { return p.log.String() }

// Stop sends sig and waits up to grace for the process to exit, then
// kills it; a nil sig kills it at once. It returns once the process has
// exited; a later call does nothing.
func (p *Process) Stop(sig os.Signal, grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	if sig != nil {
		_ = p.Cmd.Process.Signal(sig)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
			return
		case <-t.C:
		}
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
}

// ListenAddr reads r, the output of snowchaos serve (or anything printing
// "listening on ADDR"), and sends ADDR on the returned channel once that
// line appears; it goes on draining r to EOF, so the writer never blocks,
// and closes the channel at EOF without an address.
func ListenAddr(r io.Reader) <-chan string {
	addr := make(chan string, 1)
	go func() {
		sent := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "listening on "); ok && !sent {
				addr <- strings.Fields(a)[0]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, r) // after a scan error (an over-long line)
		if !sent {
			close(addr)
		}
	}()
	return addr
}
