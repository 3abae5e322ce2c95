package remote

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/proclog"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
	leasepg "github.com/snowchaos/snowchaos/lease/postgres"
	leasezk "github.com/snowchaos/snowchaos/lease/zookeeper"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
	"github.com/snowchaos/snowchaos/server"
)

// Process is the target whose nodes are `snowchaos serve` child processes
// on free loopback ports, one per host, each with its own admin token and
// host directory (the checkpoint's disk). Stop without Graceful is kill -9;
// Graceful is SIGTERM (in-flight requests finish, the final mark is
// persisted). A clone is a second process with the same worker ID; a
// handoff stops the process (SIGTERM, or kill -9 for a crash handoff) and
// starts one on a new host, with its own holder identity and the clock
// offset the fault gives it.
//
// Nodes may lease their worker ID from a shared store (lease:
// postgres://..., etcd://host:port or zk://host:port/root; an in-memory
// lease cannot span processes): each child gets --lease URL and --holder
// <host>.<run tag>,
// so a restart keeps the node's holder identity (and after a graceful stop
// gets its own worker ID back; after kill -9 a free one until the old lease
// expires) while a clone, on another host, has another one (and gets
// another worker ID, or is refused). With Postgres every run leases from a
// table in its own schema (snowchaos_<hash of the run and pid>), dropped by
// EndRun; with ZooKeeper under a root of its own (<root>/run-<run tag>),
// deleted by EndRun; etcd has no per-run namespace, so the run tag in the
// holder keeps runs apart and a killed run's keys expire with their TTL.
//
// A node with mark_write_through: off (a negative control) gets serve's
// --lease-mark-at-renewal, which only a snowchaos built with -tags
// negativecontrols has.
type Process struct {
	// Name is the registered name; empty: "process".
	Name string
	// Binary is the snowchaos binary; empty: $SNOWCHAOS_BIN, else this
	// executable when it is snowchaos itself.
	Binary string
	// Dir holds the hosts' directories; empty: a new temporary directory
	// per host.
	Dir string
	// Args are extra flags for every `snowchaos serve`.
	Args []string
	// Stderr, when set, receives the children's stderr (each line
	// prefixed with the host); it is also kept, last 8 KiB, for errors.
	Stderr io.Writer
	// StartTimeout bounds a child's start; zero: 15 s.
	StartTimeout time.Duration
	// Place, when set, says where each host runs (the netns targets: a
	// network namespace per host); nil: on this machine's own network
	// stack, listening on loopback.
	Place func(ctx context.Context, host string) (Placement, error)
	// Dial, when set, opens the connections the target makes to its nodes
	// itself (their info and admin calls); nil: the harness's own network
	// stack.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	runsMu sync.Mutex
	runs   map[string]*procRun // by target.Env.Run
}

// procRun is what the target keeps for one run: the lease schema (and the
// Postgres URLs it was created in), the ZooKeeper roots, and the holder
// tag.
type procRun struct {
	tag    string          // hash of the run and this process's pid
	schema string          // Postgres lease schema
	pg     map[string]bool // Postgres URLs the run's nodes leased from
	zk     map[string]bool // the run's own zk:// URLs (roots) its nodes leased from
}

var (
	_ target.Target   = (*Process)(nil)
	_ target.RunEnder = (*Process)(nil)
)

// Info implements target.Target.
func (t *Process) Info() target.Info {
	name := t.Name
	if name == "" {
		name = ProcessName
	}
	kinds := append(faults.KindsOf(faults.ScopeClock, faults.InScenario), faults.KindRestart, faults.KindClone, faults.KindHandoff)
	return target.Info{
		Name: name,
		Doc:  "snowchaos serve child processes on loopback ports: restart is kill -9 and start, a clone a second process, a handoff a process on a new host",
		Caps: target.Capabilities{Faults: kinds, Checkpoint: true, OffsetTolerance: offsetTolerance,
			Leases: []string{scenario.LeasePostgres, scenario.LeaseEtcd, scenario.LeaseZooKeeper}},
	}
}

// binary resolves the snowchaos binary.
func (t *Process) binary() (string, error) {
	if t.Binary != "" {
		return t.Binary, nil
	}
	if b := os.Getenv(EnvBinary); b != "" {
		return b, nil
	}
	exe, err := os.Executable()
	if err == nil {
		base := filepath.Base(exe)
		if strings.HasPrefix(base, "snowchaos") && !strings.HasSuffix(base, ".test") {
			return exe, nil
		}
	}
	return "", fmt.Errorf("%w: no snowchaos binary to run (set $%s)", target.ErrUnsupported, EnvBinary)
}

// Start implements target.Target: a new host (directory) and a process on it.
func (t *Process) Start(ctx context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	bin, err := t.binary()
	if err != nil {
		return nil, err
	}
	var lz *procLease
	switch kind := scenario.LeaseKind(spec.Lease); kind {
	case scenario.LeaseNone:
	case scenario.LeasePostgres, scenario.LeaseEtcd, scenario.LeaseZooKeeper:
		if spec.WorkerRange != nil || spec.NoHandoffGuard || spec.NoPauseCheck || spec.NoFenceMargin {
			return nil, fmt.Errorf("%w: node %s: snowchaos serve takes no worker range and always guards handoffs, checks pauses and keeps its fence margin", target.ErrUnsupported, spec.Name)
		}
		if kind == scenario.LeaseZooKeeper {
			if _, _, err := zkurl.Parse(spec.Lease); err != nil {
				return nil, fmt.Errorf("node %s: %w", spec.Name, err)
			}
		}
		r := t.run(env.Run, kind, spec.Lease)
		lz = &procLease{url: spec.Lease, holder: spec.Host + "." + r.tag, ttl: spec.LeaseTTL, markAtRenewal: spec.NoMarkWriteThrough,
			peerSkew: spec.PeerClockMaxSkew, noFence: spec.NoFence}
		if spec.NoPeerClockCheck {
			lz.peerSkew = -1
		}
		switch kind {
		case scenario.LeasePostgres:
			lz.schema = r.schema
		case scenario.LeaseZooKeeper:
			lz.url = runRoot(spec.Lease, r.tag)
		}
	default:
		return nil, fmt.Errorf("%w: lease %q across processes", target.ErrUnsupported, spec.Lease)
	}
	var place Placement
	if t.Place != nil {
		if place, err = t.Place(ctx, spec.Host); err != nil {
			return nil, fmt.Errorf("node %s: placing host %s: %w", spec.Name, spec.Host, err)
		}
	}
	dir, err := os.MkdirTemp(t.Dir, "snowchaos-host-"+sanitize(spec.Host)+"-")
	if err != nil {
		return nil, err
	}
	var tok [16]byte
	rand.Read(tok[:])
	n := &procNode{t: t, bin: bin, spec: spec, dir: dir, token: hex.EncodeToString(tok[:]), worker: -1, offset: spec.ClockOffset, lease: lz, place: place}
	if err := n.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return n, nil
}

// run returns the state of run (creating it), noting a Postgres URL or
// the run's ZooKeeper root (url must be valid) used.
func (t *Process) run(run, kind, url string) *procRun {
	t.runsMu.Lock()
	defer t.runsMu.Unlock()
	r := t.runs[run]
	if r == nil {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", run, os.Getpid())))
		tag := hex.EncodeToString(sum[:6])
		r = &procRun{tag: tag, schema: "snowchaos_" + tag, pg: map[string]bool{}, zk: map[string]bool{}}
		if t.runs == nil {
			t.runs = map[string]*procRun{}
		}
		t.runs[run] = r
	}
	switch kind {
	case scenario.LeasePostgres:
		r.pg[url] = true
	case scenario.LeaseZooKeeper:
		r.zk[runRoot(url, r.tag)] = true
	}
	return r
}

// runRoot returns the zk:// URL u (valid) with the run's own root under
// u's: <root>/run-<tag>.
func runRoot(u, tag string) string {
	servers, root, _ := zkurl.Parse(u)
	return zkurl.String(servers, root+"/run-"+tag)
}

// EndRun implements target.RunEnder: it drops the run's Postgres lease
// schema and deletes its ZooKeeper roots (the run's nodes are all closed by
// then).
func (t *Process) EndRun(ctx context.Context, run string) error {
	t.runsMu.Lock()
	r := t.runs[run]
	delete(t.runs, run)
	t.runsMu.Unlock()
	if r == nil {
		return nil
	}
	var errs []error
	for u := range r.pg {
		errs = append(errs, leasepg.DropSchema(ctx, u, r.schema))
	}
	for u := range r.zk {
		errs = append(errs, purgeRoot(ctx, u))
	}
	return errors.Join(errs...)
}

// purgeRoot deletes the ZooKeeper root a zk:// URL names, and everything
// under it.
func purgeRoot(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reg, err := leasezk.OpenURL(u, leasezk.Options{})
	if err != nil {
		return fmt.Errorf("deleting lease root %s: %w", u, err)
	}
	defer reg.Close()
	if err := reg.Purge(ctx); err != nil {
		return fmt.Errorf("deleting lease root %s: %w", u, err)
	}
	return nil
}

// procLease is a node's lease: the store's URL, the holder identity (the
// host's), the TTL (zero: serve's default), the Postgres schema, and
// whether the mark is written only at renewal (a negative control), and
// the peer clock check's bound.
type procLease struct {
	url, holder, schema string
	ttl                 time.Duration
	markAtRenewal       bool
	peerSkew            time.Duration // --peer-clock-max-skew; zero: serve's default; negative: 0 (off)
	noFence             bool          // serve --lease-no-fence (a negative control)
}

// childEnv drops the parent's SNOWCHAOS_* settings, so that only the flags
// the spec implies configure a child (a stray SNOWCHAOS_LEASE or
// SNOWCHAOS_CHECKPOINT would change what the scenario tests).
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SNOWCHAOS_") {
			out = append(out, kv)
		}
	}
	return out
}

// sanitize keeps a host name usable in a file name.
func sanitize(s string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(s, "_")
}

// procNode is one host and the snowchaos serve process running on it.
type procNode struct {
	t     *Process
	bin   string
	spec  target.NodeSpec
	dir   string
	token string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	remote *remote
	worker int64
	offset time.Duration // the host clock's offset while no process runs
	stderr proclog.Tail
	closed bool
	lease  *procLease // nil: no lease
	place  Placement  // zero: loopback on this machine's stack
}

var _ target.Node = (*procNode)(nil)

// args returns the serve flags for the node's spec.
func (n *procNode) args() []string {
	l := n.spec.Layout
	name := l.Name
	if name == "" {
		name = generator.DefaultLayout().Name
	}
	a := []string{"serve", "--listen", n.place.listen(), "--worker", strconv.FormatInt(n.spec.Worker, 10),
		"--layout", name, "--policy", n.spec.Policy.String(), "--log-level", "warn",
		"--request-timeout", "30s", "--shutdown-timeout", "10s"}
	if !l.Epoch.IsZero() {
		a = append(a, "--epoch", l.Epoch.UTC().Format(time.RFC3339Nano))
	}
	if n.spec.MaxWait > 0 {
		a = append(a, "--max-wait", n.spec.MaxWait.String())
	}
	if n.spec.MaxLead > 0 {
		a = append(a, "--max-lead", n.spec.MaxLead.String())
	}
	if n.spec.Reserve > 0 {
		a = append(a, "--reserve", n.spec.Reserve.String())
	} else if n.spec.Reserve == generator.NoReserve {
		a = append(a, "--no-reserve")
	}
	if n.spec.Checkpoint {
		a = append(a, "--checkpoint", filepath.Join(n.dir, "mark"))
	}
	if n.offset != 0 {
		a = append(a, "--clock-offset", n.offset.String())
	}
	if lz := n.lease; lz != nil {
		a = append(a, "--lease", lz.url, "--holder", lz.holder)
		if lz.schema != "" {
			a = append(a, "--lease-schema", lz.schema)
		}
		if lz.ttl > 0 {
			a = append(a, "--lease-ttl", lz.ttl.String())
		}
		if lz.markAtRenewal {
			a = append(a, "--lease-mark-at-renewal")
		}
		if lz.peerSkew != 0 {
			a = append(a, "--peer-clock-max-skew", max(lz.peerSkew, 0).String())
		}
		if lz.noFence {
			a = append(a, noFenceFlag)
		}
	}
	if n.place.Addr.IsValid() {
		a = append(a, "--admin-allow-remote") // its own namespace's address, reached from the run's only
	}
	return append(a, n.t.Args...)
}

// Start implements target.Node: it runs a process on the host, with the
// host clock's current offset, and waits for its address.
func (n *procNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: node closed", target.ErrStopped)
	}
	if n.cmd != nil {
		return nil
	}
	timeout := n.t.StartTimeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	cmd := n.place.command(n.bin, n.args()...)
	cmd.Env = append(childEnv(os.Environ()), EnvToken+"="+n.token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = &n.stderr
	n.stderr.Prefix, n.stderr.Out = "["+n.spec.Host+"] ", n.t.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", n.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
	}()
	fail := func(why string) error {
		cmd.Process.Kill()
		<-exited
		out := n.stderr.String()
		if strings.Contains(out, lease.ErrAllTaken.Error()) {
			// The lease refused the node a worker ID: the harness counts it.
			return fmt.Errorf("node %s: snowchaos serve %s: %w; stderr:\n%s", n.spec.Name, why, lease.ErrAllTaken, out)
		}
		if i := strings.Index(out, lease.ErrPeerClockSkew.Error()); i >= 0 {
			// The peer clock check refused the start: the harness counts it.
			line, _, _ := strings.Cut(out[i+len(lease.ErrPeerClockSkew.Error()):], "\n")
			return fmt.Errorf("node %s: snowchaos serve %s: %w%s", n.spec.Name, why, lease.ErrPeerClockSkew, line)
		}
		if n.lease != nil && n.lease.markAtRenewal && strings.Contains(out, "-lease-mark-at-renewal") {
			return fmt.Errorf("%w: node %s: mark_write_through: off needs a snowchaos built with -tags negativecontrols (%s); stderr:\n%s", target.ErrUnsupported, n.spec.Name, n.bin, out)
		}
		if n.lease != nil && n.lease.noFence && strings.Contains(out, noFenceFlag[1:]) {
			return fmt.Errorf("%w: node %s: fence: off needs a snowchaos built with -tags negativecontrols (%s); stderr:\n%s", target.ErrUnsupported, n.spec.Name, n.bin, out)
		}
		return fmt.Errorf("node %s: snowchaos serve %s; stderr:\n%s", n.spec.Name, why, out)
	}
	var a string
	select {
	case a = <-addr:
	case <-exited:
		return fail("exited before listening (" + cmd.ProcessState.String() + ")")
	case <-time.After(timeout):
		return fail("printed no address within " + timeout.String())
	case <-ctx.Done():
		return fail("start interrupted: " + ctx.Err().Error())
	}
	r := &remote{c: &server.Client{BaseURL: "http://" + a, Token: n.token, HTTP: n.t.httpClient()}}
	info, err := r.c.Info(ctx)
	if err != nil {
		return fail("answered no /v1/info: " + err.Error())
	}
	r.worker = info.Node
	n.cmd, n.exited, n.remote, n.worker = cmd, exited, r, info.Node
	return nil
}

// Issue implements target.Node.
func (n *procNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	n.mu.Lock()
	r := n.remote
	n.mu.Unlock()
	if r == nil {
		return 0, target.ErrStopped
	}
	return r.issue(ctx, dst)
}

// Stop implements target.Node: kill -9, or SIGTERM and wait when graceful
// (kill -9 after 15 s). The host clock's offset is read first and carried
// to the next process; Wipe deletes the checkpoint file.
func (n *procNode) Stop(ctx context.Context, o target.StopOptions) error {
	n.mu.Lock()
	cmd, exited, r := n.cmd, n.exited, n.remote
	n.cmd, n.exited, n.remote, n.worker = nil, nil, nil, -1
	if r != nil {
		if off, err := r.offset(ctx); err == nil {
			n.offset = off
		}
	}
	n.mu.Unlock()
	var err error
	if cmd != nil {
		if o.Graceful {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
				if !cmd.ProcessState.Success() {
					err = fmt.Errorf("node %s: graceful stop: %s; stderr:\n%s", n.spec.Name, cmd.ProcessState, n.stderr.String())
				}
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-exited
				err = fmt.Errorf("node %s: no graceful stop within 15s: killed", n.spec.Name)
			}
		} else {
			cmd.Process.Kill() // SIGKILL: nothing is flushed, as in a crash
			<-exited
		}
	}
	if o.Wipe {
		if e := os.Remove(filepath.Join(n.dir, "mark")); e != nil && !errors.Is(e, os.ErrNotExist) && err == nil {
			err = e
		}
	}
	return err
}

// Clock implements target.Node.
func (n *procNode) Clock() target.ClockControl { return procClock{n} }

// Maintain implements target.Node: the process needs no help.
func (n *procNode) Maintain(context.Context) time.Duration { return -1 }

// Worker implements target.Node.
func (n *procNode) Worker() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.worker
}

// Close implements target.Node: kill the process, delete the host.
func (n *procNode) Close() error {
	err := n.Stop(context.Background(), target.StopOptions{})
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	if e := os.RemoveAll(n.dir); e != nil && err == nil {
		err = e
	}
	return err
}

// URL returns the running process's base URL ("" while stopped).
func (n *procNode) URL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.remote == nil {
		return ""
	}
	return n.remote.c.BaseURL
}

// procClock controls a process node's host clock: through the admin API
// while a process runs; while none does, a step moves the offset the next
// process starts with, and other faults are unsupported.
type procClock struct{ n *procNode }

// Apply implements target.ClockControl.
func (c procClock) Apply(ctx context.Context, f faults.Fault) error {
	c.n.mu.Lock()
	r := c.n.remote
	if r == nil {
		defer c.n.mu.Unlock()
		switch f.Kind {
		case faults.KindStep:
			c.n.offset += f.By
			return nil
		case faults.KindRevert:
			c.n.offset = 0
			return nil
		}
		return fmt.Errorf("%w: %s while node %s is down", target.ErrUnsupported, f.Kind, c.n.spec.Name)
	}
	c.n.mu.Unlock()
	_, err := r.apply(ctx, f)
	return err
}

// Offset implements target.ClockControl.
func (c procClock) Offset(ctx context.Context) (time.Duration, error) {
	c.n.mu.Lock()
	r, off := c.n.remote, c.n.offset
	c.n.mu.Unlock()
	if r == nil {
		return off, nil
	}
	return r.offset(ctx)
}
