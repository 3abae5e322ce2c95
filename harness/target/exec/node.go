package exec

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
	"github.com/snowchaos/snowchaos/harness/proclog"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// realClock is the true time the host clocks are faulted from.
var realClock = generator.SystemClock()

// node is one host and the process running the command on it.
type node struct {
	spec target.NodeSpec
	x    *scenario.Exec
	kind verify.Kind // the IDs it issues (x.IDKind())
	dir  string

	// The clock route (fixed for the host's life).
	bin      string // {bin}: the program built with the overlay
	lib      string // libfaketime, on the faketime route
	file     *faketime.File
	page     *goclock.Page
	clockEnv []string
	host     *extclock.Host // nil: clock: none
	probe    *extclock.Probe
	probePID int

	mu struct {
		sync.Mutex
		p      *proc
		worker int64
		closed bool
	}
}

var _ target.WideNode = (*node)(nil)

// proc is one running process of the node.
type proc struct {
	cmd    *osexec.Cmd
	exited chan struct{}
	stderr proclog.Tail
	port   int
	// stdio
	io  sync.Mutex // one request at a time
	in  io.WriteCloser
	out *bufio.Reader
	// http
	client *http.Client
}

// expand fills the placeholders of s.
func (n *node) expand(s string, port, count int) string {
	return strings.NewReplacer("{worker}", strconv.FormatInt(n.spec.Worker, 10), "{node}", n.spec.Name,
		"{port}", strconv.Itoa(port), "{bin}", n.bin, "{n}", strconv.Itoa(count)).Replace(s)
}

// Start implements target.Node: a new process on the host, reading the
// host clock's current state.
func (n *node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return fmt.Errorf("%w: node closed", target.ErrStopped)
	}
	if n.mu.p != nil {
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	argv := make([]string, len(n.x.Command))
	for i, a := range n.x.Command {
		argv[i] = n.expand(a, port, 0)
	}
	env := os.Environ()
	for _, v := range n.x.Env {
		env = append(env, v.Name+"="+n.expand(v.Value, port, 0))
	}
	switch n.x.Clock {
	case scenario.ClockFaketime:
		env = faketime.Env(n.lib, n.file.Path, env)
	case scenario.ClockGo:
		env = append(env, n.clockEnv...)
	}
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = n.x.Dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children die with it
	p := &proc{cmd: cmd, exited: make(chan struct{}), port: port}
	p.stderr.Prefix = "[" + n.spec.Host + "] "
	cmd.Stderr = &p.stderr
	var stdout io.ReadCloser
	if n.x.Protocol == scenario.ProtocolStdio {
		if p.in, err = cmd.StdinPipe(); err != nil {
			return err
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return err
		}
		p.out = bufio.NewReaderSize(stdout, 64<<10)
	} else {
		p.client = &http.Client{Timeout: n.x.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: starting %s: %w", n.spec.Name, argv[0], err)
	}
	started, _ := realClock.Now()
	if n.file != nil {
		n.file.SetStart(started)
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	if err := n.waitReady(ctx, p); err != nil {
		n.kill(p)
		return fmt.Errorf("node %s: %s %v; stderr:\n%s", n.spec.Name, argv[0], err, p.stderr.String())
	}
	n.mu.p, n.mu.worker = p, n.spec.Worker
	return nil
}

// waitReady waits, bounded by StartTimeout, for the ready line (stdio) or
// the port (http).
func (n *node) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, n.x.StartTimeout)
	defer cancel()
	done := make(chan error, 1)
	switch {
	case n.x.Protocol == scenario.ProtocolHTTP:
		go func() {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
			for ctx.Err() == nil {
				c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
				if err == nil {
					c.Close()
					done <- nil
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	case n.x.Ready != "":
		go func() {
			for {
				line, err := p.out.ReadString('\n')
				if err != nil {
					done <- fmt.Errorf("printed no %q line: %v", n.x.Ready, err)
					return
				}
				if strings.TrimRight(line, "\r\n") == n.x.Ready {
					done <- nil
					return
				}
			}
		}()
	default:
		return nil // the first request waits for it
	}
	select {
	case err := <-done:
		return err
	case <-p.exited:
		return fmt.Errorf("exited before it was ready (%s)", p.cmd.ProcessState)
	case <-ctx.Done():
		return fmt.Errorf("was not ready within %s", n.x.StartTimeout)
	}
}

// Issue implements target.Node: requests of at most MaxBatch IDs until
// dst is full or the process refuses.
func (n *node) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	if n.kind != verify.KindSnowflake {
		return 0, n.otherKind()
	}
	return n.issue(ctx, ids{kind: n.kind, sf: dst})
}

// IssueWide implements target.WideNode, as Issue does for 128-bit IDs.
func (n *node) IssueWide(ctx context.Context, dst []verify.ID128) (int, error) {
	if n.kind == verify.KindSnowflake || n.kind == verify.KindString {
		return 0, n.otherKind()
	}
	return n.issue(ctx, ids{kind: n.kind, wide: dst})
}

// IssueStrings implements target.WideNode, as Issue does for strings.
func (n *node) IssueStrings(ctx context.Context, dst []string) (int, error) {
	if n.kind != verify.KindString {
		return 0, n.otherKind()
	}
	return n.issue(ctx, ids{kind: n.kind, strs: dst})
}

// otherKind is the error of a call for another kind of ID than the node's.
func (n *node) otherKind() error {
	return fmt.Errorf("%w: node %s issues %s IDs (id: %s)", target.ErrUnsupported, n.spec.Name, n.kind, n.x.ID)
}

// ids is where a call's IDs go: the slice of the node's kind.
type ids struct {
	kind verify.Kind
	sf   []generator.ID
	wide []verify.ID128
	strs []string
}

// len returns the number of IDs asked for.
func (d ids) len() int { return len(d.sf) + len(d.wide) + len(d.strs) }

// slice returns IDs i to j.
func (d ids) slice(i, j int) ids {
	switch {
	case d.sf != nil:
		d.sf = d.sf[i:j]
	case d.wide != nil:
		d.wide = d.wide[i:j]
	default:
		d.strs = d.strs[i:j]
	}
	return d
}

// put stores v (of the kind, from ParseID) as ID i.
func (d ids) put(i int, v verify.Value) {
	switch {
	case d.sf != nil:
		d.sf[i] = v.Snowflake()
	case d.wide != nil:
		d.wide[i] = v.Bits
	default:
		d.strs[i] = v.Text
	}
}

// issue sends requests of at most MaxBatch IDs until dst is full or the
// process refuses.
func (n *node) issue(ctx context.Context, dst ids) (int, error) {
	n.mu.Lock()
	p := n.mu.p
	n.mu.Unlock()
	if p == nil {
		return 0, target.ErrStopped
	}
	got, total := 0, dst.len()
	for got < total {
		k, err := n.request(ctx, p, dst.slice(got, min(total, got+n.x.MaxBatch)))
		got += k
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// request asks the process for dst.len() IDs, once.
func (n *node) request(ctx context.Context, p *proc, dst ids) (int, error) {
	if n.x.Protocol == scenario.ProtocolHTTP {
		return n.requestHTTP(ctx, p, dst)
	}
	p.io.Lock()
	defer p.io.Unlock()
	type res struct {
		k   int
		err error
	}
	ch := make(chan res, 1)
	go func() {
		k, err := n.exchange(p, dst)
		ch <- res{k, err}
	}()
	t := time.NewTimer(n.x.Timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil && errors.Is(r.err, io.EOF) {
			select {
			case <-p.exited:
				return r.k, fmt.Errorf("exec: node %s: process exited (%s); stderr:\n%s", n.spec.Name, p.cmd.ProcessState, p.stderr.String())
			case <-time.After(time.Second):
			}
		}
		return r.k, r.err
	case <-t.C:
	case <-ctx.Done():
	}
	// The pipe is out of step with the requests now: the process goes.
	n.kill(p)
	<-ch
	return 0, fmt.Errorf("%w (node %s, %s)", ErrHung, n.spec.Name, n.x.Timeout)
}

// exchange writes one request line and reads the answer lines.
func (n *node) exchange(p *proc, dst ids) (int, error) {
	count := dst.len()
	if _, err := io.WriteString(p.in, n.expand(n.x.Request, p.port, count)+"\n"); err != nil {
		return 0, fmt.Errorf("exec: node %s: writing the request: %w", n.spec.Name, err)
	}
	for i := range count {
		line, err := p.out.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return i, fmt.Errorf("exec: node %s: an answer line longer than 64 KiB", n.spec.Name)
			}
			return i, fmt.Errorf("exec: node %s: reading the answer: %w", n.spec.Name, err)
		}
		s := strings.TrimRight(string(line), "\r\n")
		if msg, ok := answerError(s); ok {
			return i, fmt.Errorf("exec: node %s %s", n.spec.Name, msg)
		}
		id, err := ParseID(n.kind, s)
		if err != nil {
			return i, fmt.Errorf("exec: node %s: %w", n.spec.Name, err)
		}
		dst.put(i, id)
	}
	return count, nil
}

// answerError recognises a "refused: ..." or "error: ..." answer line.
func answerError(s string) (string, bool) {
	for _, pre := range []string{"refused:", "error:"} {
		if strings.HasPrefix(s, pre) {
			return strings.TrimSuffix(pre, ":") + ": " + strings.TrimSpace(s[len(pre):]), true
		}
	}
	return "", false
}

// requestHTTP asks over HTTP.
func (n *node) requestHTTP(ctx context.Context, p *proc, dst ids) (int, error) {
	count := dst.len()
	u := n.expand(n.x.URL, p.port, count)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("exec: node %s: %w", n.spec.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, fmt.Errorf("exec: node %s: reading %s: %w", n.spec.Name, u, err)
	}
	if len(body) > maxBody {
		return 0, fmt.Errorf("exec: node %s: %s answered more than %d bytes", n.spec.Name, u, maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("exec: node %s: refused: %s answered %s: %.200s", n.spec.Name, u, resp.Status, body)
	}
	got, err := ParseResponse(n.x.Format, n.x.Field, body)
	if err != nil {
		return 0, fmt.Errorf("exec: node %s: %s: %w", n.spec.Name, u, err)
	}
	if len(got) > count {
		return 0, fmt.Errorf("exec: node %s: asked for %d IDs, got %d", n.spec.Name, count, len(got))
	}
	for i, s := range got {
		id, err := ParseID(n.kind, s)
		if err != nil {
			return i, fmt.Errorf("exec: node %s: %w", n.spec.Name, err)
		}
		dst.put(i, id)
	}
	if len(got) < count {
		return len(got), fmt.Errorf("exec: node %s: asked for %d IDs, got %d", n.spec.Name, count, len(got))
	}
	return len(got), nil
}

// maxBody bounds an HTTP answer.
const maxBody = 64 << 20

// Stop implements target.Node: kill -9 (the process group), or SIGTERM
// and up to 10 s when graceful. Nothing persists on the host but its clock.
func (n *node) Stop(ctx context.Context, o target.StopOptions) error {
	n.mu.Lock()
	p := n.mu.p
	n.mu.p, n.mu.worker = nil, -1
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	if o.Graceful {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
			n.cleanup(p)
			return nil
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
	}
	n.kill(p)
	return nil
}

// kill sends SIGKILL to the process's group, waits for it and cleans up.
func (n *node) kill(p *proc) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	n.cleanup(p)
}

// cleanup removes what libfaketime leaves behind for a killed process.
func (n *node) cleanup(p *proc) {
	if n.x.Clock == scenario.ClockFaketime {
		faketime.RemoveShm(p.cmd.Process.Pid)
	}
}

// Clock implements target.Node.
func (n *node) Clock() target.ClockControl {
	if n.host == nil {
		return nil
	}
	return clockCtl{n}
}

// Maintain implements target.Node: the process needs no help.
func (n *node) Maintain(context.Context) time.Duration { return -1 }

// Worker implements target.Node.
func (n *node) Worker() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.worker
}

// Close implements target.Node: the process, the probe and the host go.
func (n *node) Close() error {
	err := n.Stop(context.Background(), target.StopOptions{})
	n.mu.Lock()
	n.mu.closed = true
	n.mu.Unlock()
	if n.probe != nil {
		n.probe.Close()
		if n.x.Clock == scenario.ClockFaketime {
			faketime.RemoveShm(n.probePID)
		}
	}
	if n.host != nil {
		n.host.Close()
	}
	if n.page != nil {
		n.page.Close()
	}
	if e := os.RemoveAll(n.dir); e != nil && err == nil {
		err = e
	}
	return err
}

// clockCtl is a node's ClockControl: faults go to the host model, which
// publishes them to the process; the probe measures them.
type clockCtl struct{ n *node }

// Apply implements target.ClockControl.
func (c clockCtl) Apply(_ context.Context, f faults.Fault) error {
	h := c.n.host
	switch f.Kind {
	case faults.KindStep:
		return h.Step(f.By)
	case faults.KindFreeze:
		return h.Freeze(f.For)
	case faults.KindLeap:
		return h.Leap(f.At)
	case faults.KindSmear:
		return h.Smear(f.By, f.Window)
	case faults.KindSlew:
		return h.Slew(f.By, f.PPM)
	case faults.KindDrift:
		return h.Drift(f.PPM)
	case faults.KindRevert:
		return h.Revert()
	case faults.KindPause:
		return fmt.Errorf("%w: %w", target.ErrUnsupported, extclock.ErrPause)
	}
	return fmt.Errorf("%w: clock fault %q", target.ErrUnsupported, f.Kind)
}

// Offset implements target.ClockControl: the probe's reading against true
// time. A publish that failed, or a reading less precise than the
// tolerance, is an error (the fault stays unconfirmed).
func (c clockCtl) Offset(ctx context.Context) (time.Duration, error) {
	if err := c.n.host.Err(); err != nil {
		return 0, err
	}
	off, half, err := c.n.probe.Offset(ctx)
	if err != nil {
		return 0, err
	}
	if half > OffsetTolerance/2 {
		return 0, fmt.Errorf("exec: the clock probe answered in %s at best: too slow to measure within %s", 2*half, OffsetTolerance)
	}
	return off, nil
}

// freePort returns a loopback port free at the moment.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// buildCache builds each Go package once per process: the program
// (dir, pkg), or the clock probe (the empty key).
type buildCache struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
}

// get returns the built binary for pkg in dir (both empty: the probe).
func (b *buildCache) get(ctx context.Context, dir, pkg string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := dir + "\x00" + pkg
	if bin, ok := b.bins[key]; ok {
		return bin, nil
	}
	if b.dir == "" {
		d, err := os.MkdirTemp("", "snowchaos-exec-build-")
		if err != nil {
			return "", err
		}
		b.dir, b.bins = d, map[string]string{}
	}
	sum := sha256.Sum256([]byte(key))
	bin := filepath.Join(b.dir, hex.EncodeToString(sum[:8]))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var err error
	if pkg == "" {
		err = goclock.BuildProbe(ctx, bin)
	} else {
		err = goclock.Build(ctx, dir, pkg, bin)
	}
	if err != nil {
		return "", err
	}
	b.bins[key] = bin
	return bin, nil
}
