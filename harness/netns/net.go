//go:build linux

package netns

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Config configures a run's network. The zero value is usable.
type Config struct {
	// StateDir holds the run records; empty: DefaultStateDir.
	StateDir string
	// Pools are the ranges the subnet is picked from; nil: DefaultPools.
	Pools []netip.Prefix
}

// Caps says which kernel paths a run's network faults can take.
type Caps struct {
	// NFT is true when nft works in the run's namespaces: partitions are
	// nftables drop rules, asymmetric ones included. Otherwise a cut-off
	// host's link is taken down (both directions only); NFTWhy says why.
	NFT    bool
	NFTWhy string
	// Netem is true when the kernel has tc netem (latency and loss on a
	// link); NetemWhy says why not (delay faults then stay on a TCP proxy).
	Netem    bool
	NetemWhy string
}

// String describes the caps for a report.
func (c Caps) String() string {
	p := "partitions via nftables"
	if !c.NFT {
		p = "partitions via link down (no nftables: " + c.NFTWhy + ")"
	}
	d := "delay via netem"
	if !c.Netem {
		d = "delay via proxy (no netem in this kernel: " + c.NetemWhy + ")"
	}
	return p + "; " + d
}

// Errors.
var (
	// ErrUnavailable: this machine cannot create network namespaces (not
	// root, or no ip netns).
	ErrUnavailable = errors.New("netns: network namespaces unavailable")
	// ErrClosed: the network was closed.
	ErrClosed = errors.New("netns: closed")
	// ErrAsymmetric: a one-way partition needs nftables.
	ErrAsymmetric = errors.New("netns: a one-way partition needs nftables")
)

// cmdTimeout bounds every ip, nft and tc command.
const cmdTimeout = 15 * time.Second

// Available reports why this process cannot create namespaces, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root (euid %d)", ErrUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if _, err := run(context.Background(), nil, "ip", "netns", "list"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// run runs a command with cmdTimeout, stdin from in, and returns its
// output; the error names the command and carries its output.
func run(ctx context.Context, in []byte, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("netns: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Net is one run's network: a hub namespace with a bridge, and hosts
// joined to it. Its methods are safe for concurrent use.
type Net struct {
	// ID is the run's ID (6 hex digits) in every name the run creates.
	ID string
	// Subnet is the run's /24.
	Subnet netip.Prefix
	// Caps says which kernel paths network faults take.
	Caps Caps

	dir string
	hub string

	mu struct {
		sync.Mutex
		rec     record
		hosts   map[string]*Host
		order   []*Host
		servers []*Server
		closed  bool
	}
}

// Host is one host of a run: a namespace with one link into the bridge
// and one address.
type Host struct {
	// Name is the host's name in the run; NS its namespace.
	Name, NS string
	// Addr is its address on the run's subnet.
	Addr netip.Addr

	net *Net
	fd  *os.File // the namespace, for setns

	mu struct {
		sync.Mutex
		blocks []Block
		down   bool
	}
}

// hostName is what a host name may contain (it is part of a file name).
var hostName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,39}$`)

// Create makes a run's network: it first sweeps what crashed runs left
// (see Sweep), then picks a free subnet, writes the run's record, installs
// the guard route and creates the hub namespace with its bridge, and
// detects the kernel's caps. On error nothing it created is left.
func Create(ctx context.Context, cfg Config) (_ *Net, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Pools == nil {
		cfg.Pools = DefaultPools
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, err
	}
	sw, err := Sweep(ctx, cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("netns: removing a crashed run's leftovers: %w", err)
	}
	used, err := usedPrefixes(ctx)
	if err != nil {
		return nil, err
	}
	used = append(used, sw.Live...)
	var idb [3]byte
	crand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	subnet, err := PickSubnet(cfg.Pools, used, mrand(), 256)
	if err != nil {
		return nil, err
	}
	start, ok := procStart(os.Getpid())
	if !ok {
		return nil, fmt.Errorf("netns: cannot read this process's start time")
	}
	n := &Net{ID: id, Subnet: subnet, dir: cfg.StateDir, hub: Prefix + id + "-hub"}
	n.mu.hosts = map[string]*Host{}
	n.mu.rec = record{ID: id, PID: os.Getpid(), PIDStart: start, Subnet: subnet.String(), Route: true, Namespaces: []string{n.hub}}
	if err := n.mu.rec.write(n.dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	if _, err := run(ctx, nil, "ip", "route", "add", "unreachable", subnet.String()); err != nil {
		return n, err
	}
	if _, err := run(ctx, nil, "ip", "netns", "add", n.hub); err != nil {
		return n, err
	}
	if _, err := run(ctx, []byte("link set lo up\nlink add br0 type bridge\nlink set br0 up\n"), "ip", "-n", n.hub, "-batch", "-"); err != nil {
		return n, err
	}
	n.Caps = probeCaps(ctx, n.hub)
	return n, nil
}

// mrand returns a randomly seeded generator for subnet candidates.
func mrand() *rand.Rand {
	var s [16]byte
	cryptoRead(s[:])
	return rand.New(rand.NewPCG(beUint64(s[:8]), beUint64(s[8:])))
}

func cryptoRead(b []byte) { crand.Read(b) }

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// usedPrefixes returns the IPv4 networks of this machine's addresses and
// routes (every table), which a run's subnet must not overlap.
func usedPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	out, err := run(ctx, nil, "ip", "-j", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	used, err := ParseAddrs(out)
	if err != nil {
		return nil, err
	}
	out, err = run(ctx, nil, "ip", "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	rs, err := ParseRoutes(out)
	if err != nil {
		return nil, err
	}
	return append(used, rs...), nil
}

// probeCaps detects nft and netem in the hub namespace (whatever it
// creates there goes with the namespace).
func probeCaps(ctx context.Context, hub string) Caps {
	var c Caps
	if _, err := exec.LookPath("nft"); err != nil {
		c.NFTWhy = "nft not found (Debian package nftables)"
	} else if _, err := run(ctx, []byte(Ruleset(nil)), "ip", "netns", "exec", hub, "nft", "-f", "-"); err != nil {
		c.NFTWhy = err.Error()
	} else {
		c.NFT = true
	}
	if _, err := exec.LookPath("tc"); err != nil {
		c.NetemWhy = "tc not found"
	} else if _, err := run(ctx, nil, "ip", "netns", "exec", hub, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"); err != nil {
		c.NetemWhy = lastLine(err.Error())
	} else {
		c.Netem = true
	}
	return c
}

// lastLine returns what follows the last ": " of s (a command's message).
func lastLine(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// AddHost creates host name: its namespace (loopback up, no default
// route), a veth pair into the bridge, and the next free address. A name
// already added returns that host.
func (n *Net) AddHost(ctx context.Context, name string) (*Host, error) {
	if !hostName.MatchString(name) {
		return nil, fmt.Errorf("netns: host name %q: want [a-z0-9.-], at most 40, starting with a letter or digit", name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return nil, ErrClosed
	}
	if h := n.mu.hosts[name]; h != nil {
		return h, nil
	}
	idx := len(n.mu.order)
	addr, ok := HostAddr(n.Subnet, idx)
	if !ok {
		return nil, fmt.Errorf("netns: more than %d hosts", MaxHosts)
	}
	h := &Host{Name: name, NS: Prefix + n.ID + "-" + name, Addr: addr, net: n}
	n.mu.rec.Namespaces = append(n.mu.rec.Namespaces, h.NS)
	if err := n.mu.rec.write(n.dir); err != nil {
		return nil, err
	}
	// Registered before it exists, so Close removes a half-made host.
	n.mu.hosts[name] = h
	n.mu.order = append(n.mu.order, h)
	if _, err := run(ctx, nil, "ip", "netns", "add", h.NS); err != nil {
		return nil, err
	}
	veth := fmt.Sprintf("v%d", idx)
	hub := fmt.Sprintf("link add %s type veth peer name %s netns %s\nlink set %s master br0 up\n", veth, Link, h.NS, veth)
	if _, err := run(ctx, []byte(hub), "ip", "-n", n.hub, "-batch", "-"); err != nil {
		return nil, err
	}
	in := fmt.Sprintf("link set lo up\naddr add %s/%d dev %s\nlink set %s up\n", addr, n.Subnet.Bits(), Link, Link)
	if _, err := run(ctx, []byte(in), "ip", "-n", h.NS, "-batch", "-"); err != nil {
		return nil, err
	}
	fd, err := os.Open(filepath.Join("/run/netns", h.NS))
	if err != nil {
		return nil, fmt.Errorf("netns: opening %s: %w", h.NS, err)
	}
	h.fd = fd
	return h, nil
}

// Host returns the host added under name, or nil.
func (n *Net) Host(name string) *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.hosts[name]
}

// Hosts returns the hosts in the order they were added.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.mu.order...)
}

// Close removes everything the run created: the servers started on it
// (see StartPostgres), its namespaces (and with them
// every link, address and nftables rule in them), the guard route and the
// record; then checks that none of it is left. It is idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	hosts, servers := n.mu.order, n.mu.servers
	n.mu.Unlock()
	ctx := context.Background()
	var errs []error
	for _, s := range servers {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(hosts) - 1; i >= 0; i-- {
		h := hosts[i]
		if h.fd != nil {
			h.fd.Close()
		}
		if nsExists(h.NS) {
			if _, err := run(ctx, nil, "ip", "netns", "del", h.NS); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if nsExists(n.hub) {
		if _, err := run(ctx, nil, "ip", "netns", "del", n.hub); err != nil {
			errs = append(errs, err)
		}
	}
	if guardExists(n.Subnet) {
		if err := delGuard(n.Subnet); err != nil {
			errs = append(errs, err)
		}
	}
	if left := n.Leftovers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("netns: run %s left %s", n.ID, strings.Join(left, ", ")))
	}
	if len(errs) == 0 {
		if err := os.Remove(recordPath(n.dir, n.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the run exists on the machine now: namespaces
// with the run's prefix and its guard route. Empty after Close.
func (n *Net) Leftovers() []string {
	var left []string
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix+n.ID+"-") {
			left = append(left, "namespace "+e.Name())
		}
	}
	if guardExists(n.Subnet) {
		left = append(left, "route unreachable "+n.Subnet.String())
	}
	return left
}

// Command returns a command that runs name with args in the host's
// namespace (ip netns exec, which execs it: the process's PID is the
// command's).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// DialContext opens a connection from the host's namespace: the socket is
// created on a thread that entered the namespace, and belongs to it for
// its life.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Do runs f on an OS thread that has entered the host's namespace; every
// socket f creates belongs to it. The thread is never returned to the Go
// scheduler (it exits with f's goroutine), so no other goroutine ever runs
// in the namespace by accident.
func (h *Host) Do(f func() error) error {
	if h.fd == nil {
		return fmt.Errorf("netns: host %s not created", h.Name)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if e := unix.Setns(int(h.fd.Fd()), unix.CLONE_NEWNET); e != nil {
			done <- fmt.Errorf("netns: entering %s: %w", h.NS, e)
			return
		}
		done <- f()
	}()
	return <-done
}

// Block replaces the host's blocks with blocks (nil heals it): with
// nftables, the host's table is rewritten in one transaction; without,
// any block takes the host's link down (both directions only: a one-way
// block is ErrAsymmetric) and no block brings it up. It returns how it was
// done, for a report.
func (h *Host) Block(ctx context.Context, blocks []Block) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.net.Caps.NFT {
		if _, err := run(ctx, []byte(Ruleset(blocks)), "ip", "netns", "exec", h.NS, "nft", "-f", "-"); err != nil {
			return "", err
		}
		h.mu.blocks = append(h.mu.blocks[:0], blocks...)
		if len(blocks) == 0 {
			return "healed via nftables (table inet " + Table + " removed in " + h.NS + ")", nil
		}
		return "via nftables (table inet " + Table + " in " + h.NS + ")", nil
	}
	for _, b := range blocks {
		if b.Dir != Both {
			return "", ErrAsymmetric
		}
	}
	down := len(blocks) > 0
	state := "up"
	if down {
		state = "down"
	}
	if _, err := run(ctx, nil, "ip", "-n", h.NS, "link", "set", Link, state); err != nil {
		return "", err
	}
	h.mu.blocks = append(h.mu.blocks[:0], blocks...)
	h.mu.down = down
	return "via link " + state + " (" + Link + " in " + h.NS + "; no nftables: " + h.net.Caps.NFTWhy + ")", nil
}

// Blocks returns the host's current blocks.
func (h *Host) Blocks() []Block {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Block(nil), h.mu.blocks...)
}

// Sweep removes what crashed runs left: for every record in dir whose
// owner process is gone, the namespaces it lists that carry its run's
// prefix, its guard route, and the record. Nothing else is touched: a
// namespace or route no record names, or whose owner still runs, stays.
func Sweep(ctx context.Context, dir string) (SweepResult, error) {
	return sweep(osSystem{}, dir)
}

// osSystem is the machine, for sweep.
type osSystem struct{}

func (osSystem) alive(pid int, start uint64) bool {
	s, ok := procStart(pid)
	return ok && s == start
}
func (osSystem) nsExists(name string) bool { return nsExists(name) }
func (osSystem) killIn(name string) error  { return killIn(name) }
func (osSystem) delNS(name string) error {
	_, err := run(context.Background(), nil, "ip", "netns", "del", name)
	return err
}
func (osSystem) guardExists(p netip.Prefix) bool { return guardExists(p) }
func (osSystem) delGuard(p netip.Prefix) error   { return delGuard(p) }

// killIn kills every process in namespace name (ip netns pids), by PID,
// and waits up to 10 s until none is left.
func killIn(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := run(context.Background(), nil, "ip", "netns", "pids", name)
		if err != nil {
			return err
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: processes %v still in %s", pids, name)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 && pid != os.Getpid() {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond) // the kernel reaps them; ip netns pids is the only way to ask
	}
}

func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// guardExists reports whether the host's namespace has the unreachable
// route for exactly p.
func guardExists(p netip.Prefix) bool {
	out, err := run(context.Background(), nil, "ip", "-j", "-4", "route", "show", "exact", p.String(), "type", "unreachable")
	return err == nil && strings.Contains(string(out), `"dst"`)
}

func delGuard(p netip.Prefix) error {
	_, err := run(context.Background(), nil, "ip", "route", "del", "unreachable", p.String())
	return err
}
