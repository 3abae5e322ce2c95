package testenv

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("%d bytes, want 800", got)
	}
}

func TestFreePorts(t *testing.T) {
	p := FreePort(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("port %d not free: %v", p, err)
	}
	ln.Close()
	u, err := FreeUDPPort()
	if err != nil || u <= 0 {
		t.Fatalf("udp port %d, %v", u, err)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(context.Background(), time.Millisecond, nil, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d calls", err, n)
	}
	exited := make(chan struct{})
	close(exited)
	if err := Poll(context.Background(), time.Millisecond, exited, func() bool { return false }); !errors.Is(err, ErrExited) {
		t.Fatalf("Poll on an exited process = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Millisecond, nil, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll with a cancelled context = %v", err)
	}
	if Eventually(context.Background(), time.Millisecond, func() bool { return false }) {
		t.Fatal("Eventually held for a false condition")
	}
	WaitFor(t, time.Second, func() bool { return true }, "never")
}

func TestProcessStopAndLog(t *testing.T) {
	sh := LookPath(t, "sh")
	p, err := StartProcess(exec.Command(sh, "-c", `echo started; trap 'echo bye; exit 0' TERM; while :; do sleep 0.01; done`))
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 10*time.Second, func() bool { return strings.Contains(p.Log(), "started") }, "log %q", p.Log())
	p.Stop(syscall.SIGTERM, 10*time.Second)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the exit")
	}
	p.Stop(syscall.SIGTERM, time.Second) // again: nothing
	if !p.Cmd.ProcessState.Exited() {
		t.Fatalf("state %v", p.Cmd.ProcessState)
	}

	k, err := StartProcess(exec.Command(sh, "-c", `trap '' TERM; while :; do sleep 0.01; done`))
	if err != nil {
		t.Fatal(err)
	}
	k.Stop(nil, 0) // kill at once
	if k.Cmd.ProcessState.Success() {
		t.Fatal("a killed process succeeded")
	}
}

func TestListenAddr(t *testing.T) {
	pr, pw := io.Pipe()
	addr := ListenAddr(pr)
	go func() {
		io.WriteString(pw, "starting\nlistening on 127.0.0.1:1234\nadmin listening on 127.0.0.1:5\nmore\n")
		pw.Close()
	}()
	if a := <-addr; a != "127.0.0.1:1234" {
		t.Fatalf("addr %q", a)
	}
	none := ListenAddr(strings.NewReader("nothing here\n"))
	if a, ok := <-none; ok {
		t.Fatalf("addr %q without a listening line", a)
	}
}

func TestFirstDiff(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"x\ny\n", "x\ny\n", ""},
		{"x\ny\nz", "x\nY\nz", "line 2:\n  file: y\n  now:  Y"},
		{"x\n", "x\ny", "line 2:\n  file: \n  now:  y"},
		{"x\ny", "x", "line 2:\n  file: y\n  now:  "},
	} {
		if got := FirstDiff([]byte(tc.a), []byte(tc.b), "file", "now"); got != tc.want {
			t.Errorf("FirstDiff(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}
