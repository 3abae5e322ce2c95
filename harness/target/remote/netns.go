//go:build linux

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/netns"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/server"
)

// Names of the netns targets.
const (
	// NetnsPostgresName runs the nodes' leases on a Postgres of the run's own.
	NetnsPostgresName = "netns-postgres"
	// NetnsEtcdName runs them on an etcd of the run's own.
	NetnsEtcdName = "netns-etcd"
)

func init() {
	target.Register(&Netns{Name: NetnsPostgresName, Store: scenario.LeasePostgres})
	target.Register(&Netns{Name: NetnsEtcdName, Store: scenario.LeaseEtcd})
}

// netnsOffsetTolerance is offsetTolerance plus the path across the
// namespaces: a fault reaches the node, and its offset comes back, over a
// veth pair and a bridge (and a new connection's setns), measured at up
// to about 1 ms on a loaded two-core machine.
const netnsOffsetTolerance = 5 * time.Millisecond

// DefaultClientHosts is the number of load-client namespaces of a netns
// run when Netns.Clients is zero.
const DefaultClientHosts = 8

// Netns is the process target with every part of a run on a network
// stack of its own (harness/netns): each host (a node, its restarts, a
// clone, a handoff's new host) is a network namespace running `snowchaos
// serve`, the lease store runs in one more (a Postgres cluster or an etcd
// member the run starts), each load client sends its calls from its own,
// and the harness's own calls (info, clock faults, lease cleanup) come
// from a control namespace. Traffic between them crosses veth pairs and a
// bridge; a store outage or partition is cut by the kernel (nftables, or
// a link taken down), not by a proxy.
//
// A node that leases (lease: memory, or any store URL) leases from the
// run's store: the scenario's shared store, made real. Clock faults go
// through each node's admin API as with the process target: a namespace
// has no clock of its own.
type Netns struct {
	// Name is the registered name.
	Name string
	// Store is scenario.LeasePostgres or scenario.LeaseEtcd.
	Store string
	// Binary is the snowchaos binary; empty: as for Process.
	Binary string
	// EtcdBinary is the etcd server; empty: $SNOWCHAOS_ETCD_BIN or etcd
	// in PATH.
	EtcdBinary string
	// Args are extra flags for every `snowchaos serve`.
	Args []string
	// Clients is the number of load-client namespaces; client i sends from
	// namespace i mod Clients. Zero: DefaultClientHosts.
	Clients int
	// Stderr, when set, receives the children's stderr.
	Stderr io.Writer
	// StateDir holds the run records (netns.Config); empty: the default.
	StateDir string

	runsMu sync.Mutex
	runs   map[string]*nsRun
}

var (
	_ target.Target       = (*Netns)(nil)
	_ target.RunEnder     = (*Netns)(nil)
	_ target.StoreFaulter = (*Netns)(nil)
	_ target.Judge        = (*Netns)(nil)
)

// nsRun is one run's network, store and process target.
type nsRun struct {
	net     *netns.Net
	ctl     *netns.Host // the harness's own calls
	host    *netns.Host // the store's
	store   *netns.Server
	clients []*http.Client // by client namespace
	proc    *Process
	judge   idJudge // every ID the clients received, by client
}

// Info implements target.Target.
func (t *Netns) Info() target.Info {
	// A handoff is a graceful stop and a start on a new host (a new
	// namespace) with the clock offset the fault gives it.
	kinds := append((&Process{}).Info().Caps.Faults, faults.KindStoreOutage, faults.KindHandoff)
	return target.Info{
		Name: t.Name,
		Doc: fmt.Sprintf("snowchaos serve children each in a network namespace of its own, leases on a %s in another, "+
			"load clients in their own; store outages and partitions cut by the kernel (nftables)", t.Store),
		Caps: target.Capabilities{Faults: kinds, Checkpoint: true, OffsetTolerance: netnsOffsetTolerance,
			Leases: []string{scenario.LeaseMemory, scenario.LeasePostgres, scenario.LeaseEtcd, scenario.LeaseZooKeeper}},
	}
}

// Start implements target.Target: on a run's first node it creates the
// run's network, control and client namespaces and the store.
func (t *Netns) Start(ctx context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	r, err := t.run(ctx, env.Run)
	if err != nil {
		return nil, err
	}
	if scenario.LeaseKind(spec.Lease) != scenario.LeaseNone {
		spec.Lease = r.store.URL
	}
	n, err := r.proc.Start(ctx, spec, env)
	if err != nil {
		return nil, err
	}
	return &nsNode{procNode: n.(*procNode), r: r}, nil
}

// run returns run's state, creating it on first use.
func (t *Netns) run(ctx context.Context, run string) (*nsRun, error) {
	t.runsMu.Lock()
	defer t.runsMu.Unlock()
	if r := t.runs[run]; r != nil {
		return r, nil
	}
	r, err := t.newRun(ctx)
	if err != nil {
		return nil, err
	}
	if t.runs == nil {
		t.runs = map[string]*nsRun{}
	}
	t.runs[run] = r
	return r, nil
}

// newRun creates a run's network and store; on error nothing is left.
func (t *Netns) newRun(ctx context.Context) (_ *nsRun, err error) {
	nw, err := netns.Create(ctx, netns.Config{StateDir: t.StateDir})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, nw.Close())
		}
	}()
	r := &nsRun{net: nw, judge: newOracleJudge(ctx)}
	defer func() {
		if err != nil {
			r.judge.close()
		}
	}()
	if r.ctl, err = nw.AddHost(ctx, "ctl"); err != nil {
		return nil, err
	}
	if r.host, err = nw.AddHost(ctx, "store"); err != nil {
		return nil, err
	}
	switch t.Store {
	case scenario.LeasePostgres:
		r.store, err = netns.StartPostgres(ctx, r.host)
	case scenario.LeaseEtcd:
		r.store, err = netns.StartEtcd(ctx, r.host, t.EtcdBinary)
	default:
		err = fmt.Errorf("%w: netns target %s: store %q (want postgres or etcd)", target.ErrUnsupported, t.Name, t.Store)
	}
	if err != nil {
		return nil, err
	}
	k := t.Clients
	if k <= 0 {
		k = DefaultClientHosts
	}
	for i := range k {
		h, err := nw.AddHost(ctx, fmt.Sprintf("client%d", i))
		if err != nil {
			return nil, err
		}
		r.clients = append(r.clients, &http.Client{Timeout: 60 * time.Second,
			Transport: &http.Transport{DialContext: h.DialContext, MaxIdleConnsPerHost: 4}})
	}
	r.proc = &Process{Name: t.Name, Binary: t.Binary, Args: t.Args, Stderr: t.Stderr, Dial: r.ctl.DialContext,
		Place: func(ctx context.Context, host string) (Placement, error) {
			h, err := nw.AddHost(ctx, hostKey(host))
			if err != nil {
				return Placement{}, err
			}
			return Placement{Command: h.Command, Addr: h.Addr}, nil
		}}
	return r, nil
}

// invalidHost matches what a namespace host name may not hold.
var invalidHost = regexp.MustCompile(`[^a-z0-9.-]+`)

// hostKey is the namespace host name of a node's host ("n-" and the host
// name, lowercased, other characters as "-"; the prefix keeps it apart
// from ctl, store and the clients).
func hostKey(host string) string {
	k := "n-" + invalidHost.ReplaceAllString(strings.ToLower(host), "-")
	if len(k) > 40 {
		k = k[:40]
	}
	return k
}

// lookup returns run's state, or an error naming it.
func (t *Netns) lookup(run string) (*nsRun, error) {
	t.runsMu.Lock()
	defer t.runsMu.Unlock()
	r := t.runs[run]
	if r == nil {
		return nil, fmt.Errorf("netns: no run %q", run)
	}
	return r, nil
}

// EndRun implements target.RunEnder: the network goes, and with it the
// run's store and what the nodes left in it (so the process target's own
// cleanup of a shared store is not needed): the store stops and every
// namespace is removed, which Close checks.
func (t *Netns) EndRun(ctx context.Context, run string) error {
	t.runsMu.Lock()
	r := t.runs[run]
	delete(t.runs, run)
	t.runsMu.Unlock()
	if r == nil {
		return nil
	}
	r.judge.close() // judged already, or never to be
	for _, c := range r.clients {
		c.CloseIdleConnections()
	}
	return r.net.Close()
}

// probeTimeout is how long a connection to a cut-off store is given
// before the cut counts as confirmed.
const probeTimeout = 300 * time.Millisecond

// CutStore implements target.StoreFaulter: a whole outage drops every
// packet on the store's link; a partition drops, in the named hosts'
// namespaces, the packets to or from the store. It is confirmed by a
// connection to the store that fails from where the cut applies.
func (t *Netns) CutStore(ctx context.Context, run string, hosts []string, dir string) (string, error) {
	r, err := t.lookup(run)
	if err != nil {
		return "", err
	}
	d, err := netns.ParseDirection(dir)
	if err != nil {
		return "", err
	}
	var hows []string
	var from []*netns.Host
	if len(hosts) == 0 {
		how, err := r.host.Block(ctx, []netns.Block{{}})
		if err != nil {
			return "", err
		}
		hows = append(hows, "store outage "+how)
		from = append(from, r.ctl)
	}
	for _, name := range hosts {
		h := r.net.Host(hostKey(name))
		if h == nil {
			return "", fmt.Errorf("netns: no host %s in the run", name)
		}
		how, err := h.Block(ctx, []netns.Block{{Peer: r.store.Addr.Addr(), Dir: d}})
		if err != nil {
			return "", err
		}
		hows = append(hows, fmt.Sprintf("partition (%s) %s", d, how))
		from = append(from, h)
	}
	for _, h := range from {
		if err := r.probe(ctx, h, probeTimeout); err == nil {
			return strings.Join(hows, "; "), fmt.Errorf("%s still reaches the store at %s", h.Name, r.store.Addr)
		}
	}
	return strings.Join(hows, "; ") + "; " + r.net.Caps.String(), nil
}

// HealStore implements target.StoreFaulter: it removes the cut and
// waits (up to 5 s) until the store answers from where it was cut.
func (t *Netns) HealStore(ctx context.Context, run string, hosts []string) (string, error) {
	r, err := t.lookup(run)
	if err != nil {
		return "", err
	}
	var hows []string
	var from []*netns.Host
	if len(hosts) == 0 {
		how, err := r.host.Block(ctx, nil)
		if err != nil {
			return "", err
		}
		hows = append(hows, how)
		from = append(from, r.ctl)
	}
	for _, name := range hosts {
		h := r.net.Host(hostKey(name))
		if h == nil {
			return "", fmt.Errorf("netns: no host %s in the run", name)
		}
		how, err := h.Block(ctx, nil)
		if err != nil {
			return "", err
		}
		hows = append(hows, how)
		from = append(from, h)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, h := range from {
		for {
			err := r.probe(ctx, h, time.Second)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return strings.Join(hows, "; "), fmt.Errorf("%s does not reach the store at %s: %v", h.Name, r.store.Addr, err)
			}
		}
	}
	return strings.Join(hows, "; "), nil
}

// probe opens (and closes) a connection from h to the store.
func (r *nsRun) probe(ctx context.Context, h *netns.Host, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := h.DialContext(ctx, "tcp", r.store.Addr.String())
	if err != nil {
		return err
	}
	return c.Close()
}

// client returns the HTTP client of load client i.
func (r *nsRun) client(i int) *http.Client { return r.clients[i%len(r.clients)] }

// nsNode is a process node whose load arrives from the clients'
// namespaces.
type nsNode struct {
	*procNode
	r *nsRun
}

var _ target.Node = (*nsNode)(nil)

// Issue implements target.Node: a load client's call goes out from its
// own namespace; the harness's own from the control namespace.
func (n *nsNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	i, ok := target.ClientOf(ctx)
	if !ok {
		return n.procNode.Issue(ctx, dst)
	}
	u := n.URL()
	if u == "" {
		return 0, target.ErrStopped
	}
	c := server.Client{BaseURL: u, HTTP: n.r.client(i)}
	k, err := c.Issue(ctx, dst)
	n.r.judge.add(i, dst[:k])
	return k, err
}

// Clock implements target.Node (the process node's, through its admin
// API from the control namespace).
func (n *nsNode) Clock() target.ClockControl { return n.procNode.Clock() }
