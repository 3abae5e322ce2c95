package exec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// realClock is the true time the host clocks are faulted from.
var realClock = generator.SystemClock()

// maxViolations bounds the violations a node keeps (the count goes on).
const maxViolations = 100

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
		procs  int // processes started so far
		worker int64
		closed bool
		// clock says whether the processes answer the time request:
		// decided at the first start (time: auto), fixed after.
		clock    clockAnswer
		clockWhy string // why not, for the report
		// violations are the protocol violations so far (at most
		// maxViolations; violated counts them all).
		violations []target.Violation
		violated   int
	}
}

// clockAnswer is whether a node's processes answer the time request.
type clockAnswer int

const (
	clockUndecided clockAnswer = iota
	clockYes
	clockNo
)

var (
	_ target.WideNode = (*node)(nil)
	_ target.Witness  = (*node)(nil)
)

// expand fills the placeholders of s.
func (n *node) expand(s string, port, count int) string {
	return strings.NewReplacer("{worker}", strconv.FormatInt(n.spec.Worker, 10), "{node}", n.spec.Name,
		"{port}", strconv.Itoa(port), "{bin}", n.bin, "{n}", strconv.Itoa(count)).Replace(s)
}

// stdio reports whether the node talks to its processes over stdio.
func (n *node) stdio() bool { return n.x.Protocol == scenario.ProtocolStdio }

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
	p, err := n.startLocked(ctx)
	if err != nil {
		return err
	}
	if n.mu.clock == clockUndecided {
		if p, err = n.decideClockLocked(ctx, p); err != nil {
			return err
		}
	}
	n.mu.p, n.mu.worker = p, n.spec.Worker
	return nil
}

// startLocked starts one process and waits until it is ready.
func (n *node) startLocked(ctx context.Context) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
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
	p, childIn, childOut, err := newProc(n.mu.procs, argv, env, n.x.Dir, n.stdio(), n.x.Timeout)
	if err != nil {
		return nil, err
	}
	p.port = port
	p.stderr.Prefix = "[" + n.spec.Host + "] "
	if err := p.start(childIn, childOut); err != nil {
		return nil, fmt.Errorf("node %s: starting %s: %w", n.spec.Name, argv[0], err)
	}
	n.mu.procs++
	if n.file != nil {
		n.file.SetStart(p.started) // an estimate until the library's own is read below
	}
	if err := n.waitReady(ctx, p); err != nil {
		p.kill()
		n.cleanup(p)
		return nil, fmt.Errorf("node %s: %s %v; stderr:\n%s", n.spec.Name, argv[0], err, p.stderr.String())
	}
	if n.file != nil {
		// libfaketime anchors clock rates on the instant its constructor
		// ran in the first process of the command; read it exactly.
		if s, err := faketime.StartTime(p.pid()); err == nil {
			n.file.SetStart(s)
		}
	}
	n.reachOf(p) // looked at now, so that a fault's instant need not
	return p, nil
}

// waitReady waits, bounded by StartTimeout, for the ready line (stdio) or
// the port (http).
func (n *node) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, n.x.StartTimeout)
	defer cancel()
	switch {
	case n.x.Protocol == scenario.ProtocolHTTP:
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
		for {
			c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
			if err == nil {
				c.Close()
				return nil
			}
			select {
			case <-p.exited:
				return fmt.Errorf("exited before it was ready (%s)", p.cmd.ProcessState)
			case <-ctx.Done():
				return fmt.Errorf("was not ready within %s", n.x.StartTimeout)
			case <-time.After(5 * time.Millisecond):
			}
		}
	case n.x.Ready != "":
		for {
			select {
			case l, ok := <-p.lines:
				if !ok {
					<-p.exited
					return fmt.Errorf("printed no %q line before it exited (%s)", n.x.Ready, p.cmd.ProcessState)
				}
				if l.text == n.x.Ready {
					return nil
				}
			case <-ctx.Done():
				return fmt.Errorf("was not ready within %s", n.x.StartTimeout)
			}
		}
	}
	return nil // the first request waits for it
}

// decideClockLocked asks the first process, once, whether it answers the
// time request (time: auto), or requires it to (time: on). A process left
// out of step by the question (no answer in time) is replaced by a fresh
// one that is never asked.
func (n *node) decideClockLocked(ctx context.Context, p *proc) (*proc, error) {
	if n.x.Time == scenario.TimeOff || (!n.stdio() && n.x.TimeURL == "") || n.host == nil {
		n.mu.clock = clockNo
		switch {
		case n.host == nil:
			n.mu.clockWhy = "clock: none"
		case n.x.Time == scenario.TimeOff:
			n.mu.clockWhy = "time: off in the exec block"
		default:
			n.mu.clockWhy = "the exec block names no time_url"
		}
		return p, nil
	}
	wait := min(n.x.Timeout, 2*time.Second)
	r, err := n.reading(ctx, p, wait)
	if err == nil {
		model := r.mid() + int64(n.host.Clock.Offset())
		if d := time.Duration(r.wall - model); d > 24*time.Hour || d < -24*time.Hour {
			err = fmt.Errorf("%w: %s is %s away from the host clock", ErrNotReading, time.Unix(0, r.wall).UTC().Format(time.RFC3339Nano), d.Round(time.Millisecond))
		}
	}
	if err == nil {
		n.mu.clock = clockYes
		return p, nil
	}
	what := n.timeAsk()
	if n.x.Time == scenario.TimeOn {
		p.kill()
		n.cleanup(p)
		return nil, fmt.Errorf("node %s: time: on, but the process does not answer %s with its clock reading: %v", n.spec.Name, what, err)
	}
	n.mu.clock, n.mu.clockWhy = clockNo, fmt.Sprintf("the process does not answer %s with its clock reading (%v)", what, err)
	if errors.Is(err, ErrHung) || p.usable() != nil {
		// No answer in time (or the question ended the process): its
		// pipe may be out of step. Start afresh, never asking again.
		p.kill()
		n.cleanup(p)
		return n.startLocked(ctx)
	}
	return p, nil
}

// timeAsk names how the node asks for a clock reading.
func (n *node) timeAsk() string {
	if n.stdio() {
		return fmt.Sprintf("the request %q", n.x.TimeRequest)
	}
	return n.x.TimeURL
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

// current returns the running process, or why there is none.
func (n *node) current() (*proc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.p == nil {
		return nil, target.ErrStopped
	}
	return n.mu.p, nil
}

// issue sends requests of at most MaxBatch IDs until dst is full or the
// process refuses.
func (n *node) issue(ctx context.Context, dst ids) (int, error) {
	p, err := n.current()
	if err != nil {
		return 0, err
	}
	got, total := 0, dst.len()
	for got < total {
		part := dst.slice(got, min(total, got+n.x.MaxBatch))
		var k int
		if n.stdio() {
			k, err = n.exchange(ctx, p, part)
		} else {
			k, err = n.requestHTTP(ctx, p, part)
		}
		got += k
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// violate records a protocol violation of process p and returns the
// call's error. A stdio process is killed: its pipe is out of step, so no
// later line could be matched to its request.
func (n *node) violate(p *proc, detail string) error {
	n.mu.Lock()
	n.mu.violated++
	if len(n.mu.violations) < maxViolations {
		n.mu.violations = append(n.mu.violations, target.Violation{Process: p.idx, PID: p.pid(), Detail: detail})
	}
	n.mu.Unlock()
	if n.stdio() {
		p.markDown("process " + strconv.Itoa(p.pid()) + " was killed after a protocol violation")
		p.kill()
		n.cleanup(p)
	}
	return fmt.Errorf("%w: exec: node %s: %s", target.ErrProtocol, n.spec.Name, detail)
}

// Violations implements target.Witness.
func (n *node) Violations(i int) []target.Violation {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i >= len(n.mu.violations) {
		return nil
	}
	return append([]target.Violation(nil), n.mu.violations[i:]...)
}

// ClockAnswer says whether the node's processes answer the time request,
// and why not.
func (n *node) ClockAnswer() (bool, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.clock == clockYes, n.mu.clockWhy
}

// Stop implements target.Node: kill -9 (the process group), or SIGTERM
// and up to 10 s when graceful. Nothing persists on the host but its clock.
// After a graceful stop, output the process left unread is a protocol
// violation; after kill -9 it is not judged (an answer may have been cut).
func (n *node) Stop(ctx context.Context, o target.StopOptions) error {
	n.mu.Lock()
	p := n.mu.p
	n.mu.p, n.mu.worker = nil, -1
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	p.stopped.Store(true)
	if o.Graceful {
		syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.exited:
			n.leftover(p, p.drain)
			n.cleanup(p)
			return nil
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
	}
	p.kill()
	n.cleanup(p)
	return nil
}

// leftover records, as a violation, output process p left that no
// request asked for (read by drain, once no request waits).
func (n *node) leftover(p *proc, drain func() ([]string, int)) {
	lines, k := drain()
	if k == 0 || p.down.Load() != nil {
		return
	}
	n.mu.Lock()
	n.mu.violated++
	if len(n.mu.violations) < maxViolations {
		n.mu.violations = append(n.mu.violations, target.Violation{Process: p.idx, PID: p.pid(),
			Detail: fmt.Sprintf("%d line(s) of output no request asked for were left when the process ended, first %q: an answer had more lines than asked for", k, lines)})
	}
	n.mu.Unlock()
}

// cleanup removes what libfaketime leaves behind for a killed process.
func (n *node) cleanup(p *proc) {
	if n.x.Clock == scenario.ClockFaketime {
		faketime.RemoveShm(p.pid())
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
// Output the last process left unread is judged as after a graceful stop:
// no call is in flight once the harness closes a node.
func (n *node) Close() error {
	n.mu.Lock()
	p := n.mu.p
	n.mu.p, n.mu.worker = nil, -1
	n.mu.closed = true
	n.mu.Unlock()
	if p != nil {
		n.leftover(p, p.kill)
		n.cleanup(p)
	}
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
	return os.RemoveAll(n.dir)
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
