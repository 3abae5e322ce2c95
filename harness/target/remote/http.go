// Package remote lets the harness run scenarios against HTTP nodes:
// nodes already running at given URLs (target "http"), and child processes
// of `snowchaos serve` that the harness starts itself (target "process"),
// so that a restart is a real kill -9 and start, and a cloned worker ID a
// real second process.
//
// IDs are requested over the network (GET /v1/id, /v1/ids?count=N) and
// clock faults go through each node's admin API, whose reported offset
// confirms them. A node's refusal (HTTP 503) unwraps to the generator's
// sentinel error, so the verifier classifies it as it would a local one.
//
// Importing the package registers both targets with harness/target.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/loadgen"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/server"
)

// Target names.
const (
	// HTTPName is the target of nodes already running at given URLs.
	HTTPName = "http"
	// ProcessName is the target of `snowchaos serve` child processes.
	ProcessName = "process"
)

// Environment variables the registered targets read at Start.
const (
	// EnvNodes lists the http target's nodes: "a=http://127.0.0.1:8081,b=...".
	EnvNodes = "SNOWCHAOS_HTTP_NODES"
	// EnvAllowRemote, set to 1 or true, lets the http target reach nodes
	// on non-loopback addresses (a compose network, a Kubernetes Service):
	// the harness then sends load and admin requests over that network.
	EnvAllowRemote = "SNOWCHAOS_HTTP_ALLOW_REMOTE"
	// EnvToken is the admin token of the http target's nodes.
	EnvToken = "SNOWCHAOS_ADMIN_TOKEN"
	// EnvBinary is the snowchaos binary the process target runs.
	EnvBinary = "SNOWCHAOS_BIN"
)

func init() {
	target.Register(&HTTP{})
	target.Register(&Process{})
}

// offsetTolerance is how closely an admin API's offset matches the
// harness's shadow clock: both are computed, not measured over the
// network, but the fault lands on the node a request's latency later.
const offsetTolerance = time.Millisecond

// newHTTPClient returns the keep-alive client nodes are called with.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &loadgen.Transport{}}
}

// HTTP is the target of nodes already running (snowchaos serve, started by
// hand, compose or CI) at known URLs, one per scenario node name. Clock
// faults need each node's admin token; restarts and clones are not
// possible (the harness does not own the processes).
type HTTP struct {
	// Name is the registered name; empty: "http".
	Name string
	// Nodes maps scenario node names to base URLs; nil: parsed from
	// $SNOWCHAOS_HTTP_NODES at Start.
	Nodes map[string]string
	// Token is the nodes' admin token; empty: $SNOWCHAOS_ADMIN_TOKEN.
	Token string
	// AllowRemote permits non-loopback URLs; false: only when
	// $SNOWCHAOS_HTTP_ALLOW_REMOTE is 1 or true.
	AllowRemote bool
}

var _ target.Target = (*HTTP)(nil)

// Info implements target.Target.
func (t *HTTP) Info() target.Info {
	name := t.Name
	if name == "" {
		name = HTTPName
	}
	return target.Info{
		Name: name,
		Doc:  "snowchaos serve nodes already running at the URLs in $" + EnvNodes + " (name=url,...), faults through their admin API",
		Caps: target.Capabilities{Faults: faults.KindsOf(faults.ScopeClock, faults.InScenario), OffsetTolerance: offsetTolerance},
	}
}

// envTrue reports whether an environment value switches an option on.
func envTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// ParseNodes parses "a=http://127.0.0.1:8081,b=http://127.0.0.1:8082".
func ParseNodes(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("remote: %q is not name=url", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("remote: node %q listed twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// Start implements target.Target: it finds the node's URL, checks that the
// node runs the scenario's worker ID, layout and policy, reverts its clock
// faults and applies the spec's starting offset.
func (t *HTTP) Start(ctx context.Context, spec target.NodeSpec, _ target.Env) (target.Node, error) {
	nodes := t.Nodes
	if nodes == nil {
		var err error
		if nodes, err = ParseNodes(os.Getenv(EnvNodes)); err != nil {
			return nil, err
		}
	}
	u, ok := nodes[spec.Name]
	if !ok {
		return nil, fmt.Errorf("%w: no URL for node %q (set %s=%s=http://host:port,...)", target.ErrUnsupported, spec.Name, EnvNodes, spec.Name)
	}
	if err := loadgen.CheckLoopback(u); err != nil {
		remote := t.AllowRemote || envTrue(os.Getenv(EnvAllowRemote))
		if !remote || !errors.Is(err, loadgen.ErrRemote) {
			return nil, fmt.Errorf("%w (to reach nodes on a network, set %s=1)", err, EnvAllowRemote)
		}
	}
	token := t.Token
	if token == "" {
		token = os.Getenv(EnvToken)
	}
	r := &remote{c: &server.Client{BaseURL: u, Token: token, HTTP: newHTTPClient()}}
	info, err := r.c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s at %s: %w", spec.Name, u, err)
	}
	if err := checkInfo(spec, info); err != nil {
		return nil, fmt.Errorf("node %s at %s: %w", spec.Name, u, err)
	}
	r.worker = info.Node
	if token != "" {
		if _, err := r.c.Revert(ctx); err != nil {
			return nil, fmt.Errorf("node %s at %s: reverting its clock: %w", spec.Name, u, err)
		}
		if spec.ClockOffset != 0 {
			if _, err := r.c.Inject(ctx, faults.Fault{Kind: faults.KindStep, By: spec.ClockOffset}); err != nil {
				return nil, fmt.Errorf("node %s at %s: %w", spec.Name, u, err)
			}
		}
	} else if spec.ClockOffset != 0 {
		return nil, fmt.Errorf("%w: node %s starts with a clock offset but no admin token is set ($%s)", target.ErrUnsupported, spec.Name, EnvToken)
	}
	return &httpNode{remote: r}, nil
}

// checkInfo refuses a node that does not run the spec's configuration, so
// the verifier's layout and the scenario's thresholds mean what they say.
func checkInfo(spec target.NodeSpec, info server.Info) error {
	l, err := info.Layout.Layout()
	if err != nil {
		return fmt.Errorf("its layout: %w", err)
	}
	want := spec.Layout
	if want.TimeBits == 0 && want.NodeBits == 0 && want.SeqBits == 0 {
		want = generator.DefaultLayout()
	}
	if l.TimeBits != want.TimeBits || l.NodeBits != want.NodeBits || l.SeqBits != want.SeqBits || !l.Epoch.Equal(want.Epoch) || l.Tick != want.Tick {
		return fmt.Errorf("runs layout %s (epoch %s, tick %s), the scenario wants %s (epoch %s, tick %s)",
			l.Name, l.Epoch.Format(time.RFC3339), l.Tick, want.Name, want.Epoch.Format(time.RFC3339), want.Tick)
	}
	if info.Node != spec.Worker {
		return fmt.Errorf("runs worker %d, the scenario wants %d", info.Node, spec.Worker)
	}
	if info.Policy != spec.Policy.String() {
		return fmt.Errorf("runs policy %s, the scenario wants %s", info.Policy, spec.Policy)
	}
	return nil
}

// remote is a node reached over HTTP.
type remote struct {
	c      *server.Client
	worker int64
}

// issue fills dst over HTTP.
func (r *remote) issue(ctx context.Context, dst []generator.ID) (int, error) {
	return r.c.Issue(ctx, dst)
}

// apply sends a clock fault to the admin API (a revert as DELETE); a
// kind the admin API does not take is ErrUnsupported.
func (r *remote) apply(ctx context.Context, f faults.Fault) (server.FaultState, error) {
	if f.Kind == faults.KindRevert {
		return r.c.Revert(ctx)
	}
	if spec, ok := faults.Lookup(f.Kind); !ok || !spec.In(faults.InAdmin) {
		return server.FaultState{}, fmt.Errorf("%w: clock fault %q over the admin API", target.ErrUnsupported, f.Kind)
	}
	return r.c.Inject(ctx, f)
}

// offset reads the node's clock offset from the admin API.
func (r *remote) offset(ctx context.Context) (time.Duration, error) {
	st, err := r.c.Faults(ctx)
	if err != nil {
		return 0, err
	}
	return time.Duration(st.OffsetNs), nil
}

// httpNode is a node of the http target.
type httpNode struct {
	*remote
}

var _ target.Node = (*httpNode)(nil)

// Issue implements target.Node.
func (n *httpNode) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	return n.issue(ctx, dst)
}

// Stop implements target.Node: the harness does not own the process.
func (n *httpNode) Stop(context.Context, target.StopOptions) error {
	return fmt.Errorf("%w: the http target cannot stop a node it did not start (use the process target)", target.ErrUnsupported)
}

// Start implements target.Node.
func (n *httpNode) Start(context.Context) error {
	return fmt.Errorf("%w: the http target cannot start a node (use the process target)", target.ErrUnsupported)
}

// Clock implements target.Node.
func (n *httpNode) Clock() target.ClockControl {
	if n.c.Token == "" {
		return nil
	}
	return remoteClock{n.remote}
}

// Maintain implements target.Node: the node keeps its own lease.
func (n *httpNode) Maintain(context.Context) time.Duration { return -1 }

// Worker implements target.Node.
func (n *httpNode) Worker() int64 { return n.worker }

// Close implements target.Node: it reverts the node's clock faults so the
// next run starts clean, and leaves the node running.
func (n *httpNode) Close() error {
	if n.c.Token == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.c.Revert(ctx)
	return err
}

// remoteClock is the ClockControl of a running HTTP node.
type remoteClock struct{ r *remote }

// Apply implements target.ClockControl.
func (c remoteClock) Apply(ctx context.Context, f faults.Fault) error {
	_, err := c.r.apply(ctx, f)
	return err
}

// Offset implements target.ClockControl.
func (c remoteClock) Offset(ctx context.Context) (time.Duration, error) { return c.r.offset(ctx) }
