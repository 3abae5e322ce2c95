package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// runMainEnv makes the test binary run main instead of the tests, so the
// tests can start snowchaos as a real child process without building it.
const runMainEnv = "SNOWCHAOS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startChild starts "snowchaos args..." as a child process (under
// "ulimit -n nofile" when nofile > 0) and returns the address it listens
// on. The child is killed at the end of the test.
func startChild(t *testing.T, nofile int, env []string, args ...string) (string, *testenv.Process) {
	t.Helper()
	script := `exec "$0" "$@"`
	if nofile > 0 {
		script = fmt.Sprintf("ulimit -n %d && %s", nofile, script)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, os.Args[0]}, args...)...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	p, err := testenv.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(nil, 0); pw.Close() })
	addrc := testenv.ListenAddr(pr)
	select {
	case addr := <-addrc:
		if addr != "" {
			return addr, p
		}
	case <-p.Exited():
	case <-time.After(60 * time.Second):
	}
	t.Fatalf("snowchaos %q did not print its address; log:\n%s", args, p.Log())
	return "", nil
}

// TestServeConnLimitUnderUlimit runs serve with 128 descriptors, opens 150
// keep-alive connections one after another, each left idle after its
// answer, and checks that every one was answered and that /healthz still
// answers on a new connection (before the connection limit, accept failed
// with "too many open files" and /healthz hung).
func TestServeConnLimitUnderUlimit(t *testing.T) {
	addr, p := startChild(t, 128, nil, "serve", "--listen", "127.0.0.1:0")
	for i := range 150 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d of 150 under ulimit -n 128: %v; log:\n%s", i+1, err, p.Log())
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("connection %d: status %d", i+1, resp.StatusCode)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with 150 keep-alive connections under ulimit -n 128: %v; log:\n%s", err, p.Log())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if strings.Contains(p.Log(), "too many open files") {
		t.Errorf("the node ran out of descriptors:\n%s", p.Log())
	}
}

// TestServeSecondSignalForcesExit holds a request in flight (a POST whose
// body never comes), sends SIGTERM, and once the node says it is shutting
// down, a second SIGTERM: the node exits at once with 128+15.
func TestServeSecondSignalForcesExit(t *testing.T) {
	addr, p := startChild(t, 0, []string{"SNOWCHAOS_ADMIN_TOKEN=tok"}, "serve", "--listen", "127.0.0.1:0",
		"--read-timeout", "5m", "--read-header-timeout", "1m", "--shutdown-timeout", "5m")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "POST /admin/v1/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("waiting for 100 Continue (the handler reading the body): %q, %v", line, err)
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testenv.Poll(ctx, 10*time.Millisecond, p.Exited(), func() bool { return strings.Contains(p.Log(), "shutting down") }); err != nil {
		t.Fatalf("no shutdown message after SIGTERM (%v); log:\n%s", err, p.Log())
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after a second SIGTERM; log:\n%s", p.Log())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit code %d, want %d; log:\n%s", code, 128+int(syscall.SIGTERM), p.Log())
	}
	if !strings.Contains(p.Log(), "second terminated") {
		t.Errorf("the forced exit is not explained; log:\n%s", p.Log())
	}
}
