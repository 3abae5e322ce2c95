package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

// ParseFile reads and parses a scenario file.
func ParseFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// maxErrors bounds the problems reported for one file.
const maxErrors = 20

// Parse parses one scenario from YAML. file names the source in errors.
// On failure the error is an ErrorList whose every entry carries a line:
// syntax errors, unknown or repeated keys (with the nearest known key
// suggested), values of the wrong type or out of range, misspelled
// invariants, faults aimed at unknown nodes or reaching past the duration,
// and expectations for targets the scenario does not run.
func Parse(file string, data []byte) (s *Scenario, err error) {
	p := &parser{file: file}
	defer func() {
		// The YAML library is not ours; never let a panic in it escape.
		if r := recover(); r != nil {
			s, err = nil, ErrorList{{File: file, Line: 1, Msg: fmt.Sprintf("cannot parse: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrorList{{File: file, Line: 1, Msg: "empty file: a scenario needs at least name, duration, nodes and load"}}
		}
		return nil, ErrorList{p.syntaxError(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, ErrorList{{File: file, Line: max(extra.Line, 1), Msg: "a file holds one scenario; a second YAML document starts here"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, ErrorList{p.syntaxError(err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, ErrorList{{File: file, Line: 1, Msg: "empty file"}}
		}
		root = root.Content[0]
	}
	p.paths, p.keys = paths(root)
	var f object[fileEntry]
	_ = f.UnmarshalYAML(root) // never fails: what is wrong, report says
	f.report(p, "")
	s = p.scenario(&f)
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// syntaxError turns a YAML library error into an Error with a line.
func (p *parser) syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		if n, e := strconv.Atoi(m[1]); e == nil && n > 0 {
			line = n
		}
		msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
	}
	return &Error{File: p.file, Line: line, Msg: "invalid YAML: " + msg}
}

// parser collects the problems of one file.
type parser struct {
	file  string
	errs  ErrorList
	paths map[*yaml.Node]string     // every node's key path
	keys  map[*yaml.Node]*yaml.Node // a mapping value's key
}

// errorf reports a problem at n's line under key, once (an aliased value
// is decoded, and reported, wherever it is used).
func (p *parser) errorf(n *yaml.Node, key, format string, args ...any) {
	line, col := 1, 0
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	e := &Error{File: p.file, Line: line, Column: col, Key: key, Msg: fmt.Sprintf(format, args...)}
	if len(p.errs) < maxErrors && !slices.ContainsFunc(p.errs, func(o *Error) bool { return *o == *e }) {
		p.errs = append(p.errs, e)
	}
}

// fail reports a problem with the value (or key) n, under its key path.
func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	p.errorf(n, p.paths[n], format, args...)
}

// failKey reports a problem with the key whose value is n, at the key's
// line.
func (p *parser) failKey(n *yaml.Node, format string, args ...any) {
	if k := p.keys[n]; k != nil {
		n = k
	}
	p.fail(n, format, args...)
}

// at reports a problem with key of the mapping parent (a key that is
// missing, or a rule between keys), at parent's line.
func (p *parser) at(parent *yaml.Node, key, format string, args ...any) {
	p.errorf(parent, join(p.paths[parent], key), format, args...)
}

// line returns n's line, at least 1.
func line(n *yaml.Node) int {
	if n == nil {
		return 1
	}
	return max(n.Line, 1)
}

// The tagged structs a file decodes into: every key a file may hold is a
// yaml tag below (a fault's parameters: faults.Specs).

// fileEntry is a scenario file's document.
type fileEntry struct {
	Name        leaf[name]               `yaml:"name"`
	Description leaf[text]               `yaml:"description"`
	Seed        leaf[whole]              `yaml:"seed"`
	Mode        leaf[text]               `yaml:"mode"`
	Duration    leaf[duration]           `yaml:"duration"`
	Start       leaf[instant]            `yaml:"start"`
	Nodes       list[object[nodeEntry]]  `yaml:"nodes"`
	Targets     list[targetEntry]        `yaml:"targets"`
	Load        object[loadEntry]        `yaml:"load"`
	Faults      list[object[faultEntry]] `yaml:"faults"`
	Invariants  list[raw]                `yaml:"invariants"`
	Expect      raw                      `yaml:"expect"`
	Simulation  object[simEntry]         `yaml:"simulation"`
	RealNA      leaf[text]               `yaml:"real_na" want:"a reason (why real mode cannot judge this)"`
}

// settings are what a node declares and a target overrides.
type settings struct {
	Policy     leaf[text]     `yaml:"policy" want:"wait, refuse or logical"`
	MaxWait    leaf[duration] `yaml:"max_wait"`
	MaxLead    leaf[duration] `yaml:"max_lead"`
	Reserve    leaf[duration] `yaml:"reserve"`
	Lease      leaf[text]     `yaml:"lease" want:"memory, none, postgres://..., etcd://host:port or zk://host:port[/root]"`
	Checkpoint leaf[onOff]    `yaml:"checkpoint"`
	Leased     leaseSettings  `yaml:",inline"`
}

// leaseSettings mean something only with a lease.
type leaseSettings struct {
	LeaseTTL         leaf[duration] `yaml:"lease_ttl"`
	HandoffGuard     leaf[onOff]    `yaml:"handoff_guard"`
	PauseCheck       leaf[onOff]    `yaml:"pause_check"`
	Fence            leaf[onOff]    `yaml:"fence"`
	MarkWriteThrough leaf[onOff]    `yaml:"mark_write_through"`
	PeerClockCheck   leaf[onOff]    `yaml:"peer_clock_check"`
	PeerClockMaxSkew leaf[duration] `yaml:"peer_clock_max_skew"`
	FenceMargin      leaf[onOff]    `yaml:"fence_margin"`
}

// switches pairs each on/off lease setting with the node field that says
// it is off and the target field that overrides it.
func (k *leaseSettings) switches(n *Node, t *Target) []struct {
	l    *leaf[onOff]
	off  *bool
	over **bool
} {
	return []struct {
		l    *leaf[onOff]
		off  *bool
		over **bool
	}{
		{&k.HandoffGuard, &n.NoHandoffGuard, &t.HandoffGuard}, {&k.PauseCheck, &n.NoPauseCheck, &t.PauseCheck},
		{&k.Fence, &n.NoFence, &t.Fence}, {&k.MarkWriteThrough, &n.NoMarkWriteThrough, &t.MarkWriteThrough},
		{&k.PeerClockCheck, &n.NoPeerClockCheck, &t.PeerClockCheck}, {&k.FenceMargin, &n.NoFenceMargin, &t.FenceMargin},
	}
}

// nodeEntry is one of a file's nodes.
type nodeEntry struct {
	Name        leaf[name]    `yaml:"name"`
	Worker      leaf[whole]   `yaml:"worker"`
	Layout      leaf[text]    `yaml:"layout" want:"a layout: a preset name or T/N/S[@tick]"`
	Epoch       leaf[instant] `yaml:"epoch"`
	Settings    settings      `yaml:",inline"`
	ClockOffset leaf[offset]  `yaml:"clock_offset"`
	Leased      struct {
		WorkerRange raw        `yaml:"worker_range"`
		Holder      leaf[name] `yaml:"holder"`
	} `yaml:",inline"`
}

// targetEntry is one of a file's targets: a name, or a mapping.
type targetEntry struct {
	Name leaf[name]
	Obj  object[targetObject]
}

// UnmarshalYAML implements yaml.Unmarshaler; it never fails.
func (t *targetEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return t.Name.UnmarshalYAML(n)
	}
	return t.Obj.UnmarshalYAML(n)
}

// report reports the name or the mapping.
func (t *targetEntry) report(p *parser, _ string) {
	t.Name.report(p, "")
	t.Obj.report(p, "")
}

// targetObject is a target given as a mapping.
type targetObject struct {
	Name          leaf[name]        `yaml:"name"`
	Use           leaf[name]        `yaml:"use"`
	Settings      settings          `yaml:",inline"`
	NotApplicable leaf[text]        `yaml:"not_applicable" want:"ok or error"`
	Invariants    list[raw]         `yaml:"invariants"`
	Exec          object[execEntry] `yaml:"exec"`
	RealNA        leaf[text]        `yaml:"real_na" want:"a reason (why real mode cannot judge this)"`
}

// loadEntry is a file's load: stages, or a single stage's rate and for.
type loadEntry struct {
	Per        leaf[text]               `yaml:"per"`
	Clients    leaf[whole]              `yaml:"clients"`
	Batch      leaf[whole]              `yaml:"batch"`
	Stages     list[object[stageEntry]] `yaml:"stages"`
	Single     stageEntry               `yaml:",inline"`
	FaultBurst leaf[duration]           `yaml:"fault_burst"`
}

// maxFaultBurst bounds load.fault_burst.
const maxFaultBurst = time.Second

// stageEntry is one load stage.
type stageEntry struct {
	Rate leaf[text]     `yaml:"rate" want:"a rate such as 5000/s, or max"`
	For  leaf[duration] `yaml:"for"`
}

// simEntry is a file's simulation section.
type simEntry struct {
	Budget  leaf[whole]    `yaml:"budget"`
	Hot     leaf[duration] `yaml:"hot"`
	Service leaf[duration] `yaml:"service"`
}

// faultEntry is one of a file's faults: where and when, and the kind's
// parameters (Params, by name, from faults.Specs).
type faultEntry struct {
	Name    leaf[name]     `yaml:"name"`
	At      leaf[duration] `yaml:"at"`
	Kind    leaf[text]     `yaml:"kind" want:"a fault kind"`
	Nodes   raw            `yaml:"nodes"`
	Observe leaf[duration] `yaml:"observe"`
	Params  map[string]raw `yaml:",inline"`
}

// extraKeys are the parameters of every fault a scenario takes.
func (*faultEntry) extraKeys() []string {
	var keys []string
	for _, sp := range faults.Specs() {
		for _, prm := range sp.ParamsIn(faults.InScenario) {
			if !slices.Contains(keys, prm.Name) {
				keys = append(keys, prm.Name)
			}
		}
	}
	return keys
}

// dur returns a duration leaf's value, 0 when it is absent or malformed.
func dur[T duration | offset](l *leaf[T]) time.Duration {
	if !l.ok() {
		return 0
	}
	return time.Duration(l.V)
}

// within returns a whole number within [lo, hi].
func (p *parser) within(l *leaf[whole], lo, hi int64) (int64, bool) {
	if !l.ok() {
		return 0, false
	}
	if v := int64(l.V); v < lo || v > hi {
		p.fail(l.N, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return int64(l.V), true
}

// givenKeys returns the keys of struct *v (yaml tags) whose values are
// present, with their nodes, in order.
func givenKeys(v any) (keys []string, nodes []*yaml.Node) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		tag, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
		if n, _ := rv.Field(i).FieldByName("N").Interface().(*yaml.Node); n != nil {
			keys, nodes = append(keys, tag), append(nodes, n)
		}
	}
	return keys, nodes
}

func (p *parser) scenario(f *object[fileEntry]) *Scenario {
	root, x := f.N, &f.V
	s := &Scenario{File: p.file, Mode: ModeSimulated, Seed: 1, Start: DefaultStart, Line: line(root)}
	if x.Name.ok() {
		s.Name = string(x.Name.V)
	} else if x.Name.N == nil {
		p.at(root, "name", "missing: every scenario needs a name")
	}
	s.Description = string(x.Description.V)
	s.RealNA = p.realNA(&x.RealNA)
	if x.Seed.ok() {
		s.Seed = int64(x.Seed.V)
	}
	if x.Mode.ok() {
		switch v := string(x.Mode.V); v {
		case string(ModeSimulated), string(ModeReal):
			s.Mode = Mode(v)
		case "": // the default
		default:
			p.fail(x.Mode.N, "want simulated or real, found %q%s", v, suggest(v, []string{"simulated", "real"}))
		}
	}
	s.Duration = dur(&x.Duration)
	durOK := s.Duration > 0
	if x.Duration.ok() && s.Duration == 0 {
		p.fail(x.Duration.N, "must be positive")
	} else if x.Duration.N == nil {
		p.at(root, "duration", "missing: how long the run lasts, e.g. duration: 10s")
	}
	if x.Start.ok() {
		s.Start = time.Time(x.Start.V)
	}
	if x.Nodes.N == nil {
		p.at(root, "nodes", "missing: a scenario needs at least one node")
	}
	s.Nodes = p.nodes(&x.Nodes)
	if x.Load.N == nil {
		p.at(root, "load", "missing: the request load, e.g. load: {rate: 5000/s}")
	} else {
		s.Load = p.load(&x.Load, s.Duration, durOK)
	}
	s.Simulation = p.simulation(&x.Simulation)
	s.Faults = p.faults(&x.Faults, s, durOK)
	if x.Targets.N == nil {
		s.Targets = []Target{{Name: "declared", Use: "declared", Line: s.Line}}
	} else {
		s.Targets = p.targets(&x.Targets, s)
	}
	s.Invariants = p.invariants(&x.Invariants, s)
	if x.Expect.N != nil {
		s.Expect = p.expect(x.Expect.N, s)
	}
	p.checkStoreOutage(s)
	p.checkCrashHandoffs(s)
	p.checkCrashPoints(s)
	hasTargetInvariants := false
	for _, t := range s.Targets {
		hasTargetInvariants = hasTargetInvariants || len(t.Invariants) > 0
	}
	if len(s.Invariants) == 0 && len(s.Expect) == 0 && !hasTargetInvariants && len(p.errs) == 0 {
		p.at(root, "invariants", "missing: a scenario must assert something, e.g. invariants: [\"duplicates == 0\"]")
	}
	return s
}

// invariants reads a list of invariants.
func (p *parser) invariants(l *list[raw], s *Scenario) []Expr {
	var out []Expr
	for _, it := range l.V {
		if x, ok := p.expr(it.N, ""); ok {
			p.checkDuring(s, it.N, x)
			out = append(out, x)
		}
	}
	return out
}

func (p *parser) nodes(l *list[object[nodeEntry]]) []Node {
	if l.present() && len(l.V) == 0 {
		p.fail(l.N, "empty: a scenario needs at least one node")
	}
	var out []Node
	seen := map[string]bool{}
	for i := range l.V {
		o := &l.V[i]
		x, k := &o.V, &o.V.Settings
		nd := Node{Lease: LeaseNone, Layout: generator.DefaultLayout(), Line: line(o.N)}
		if x.Name.ok() {
			nd.Name = string(x.Name.V)
			if seen[nd.Name] {
				p.fail(x.Name.N, "node %q declared twice", nd.Name)
			}
			if nd.Name == "all" {
				p.fail(x.Name.N, "\"all\" is reserved for faults aimed at every node")
			}
			seen[nd.Name] = true
		} else if x.Name.N == nil {
			p.at(o.N, "name", "missing: every node needs a name")
		}
		if x.Layout.ok() {
			v := string(x.Layout.V)
			if l, err := generator.ParseLayout(v); err != nil {
				var names []string
				for _, pr := range generator.Presets() {
					names = append(names, pr.Name)
				}
				p.fail(x.Layout.N, "%v%s (presets: %s; or any T/N/S[@tick] with T+N+S = 63)", err, suggest(v, names), strings.Join(names, ", "))
			} else {
				nd.Layout, nd.LayoutName = l, v
			}
		}
		if x.Epoch.ok() {
			nd.Layout.Epoch = time.Time(x.Epoch.V)
			if err := nd.Layout.Validate(); err != nil {
				p.fail(x.Epoch.N, "%v", err)
			}
		}
		if x.Worker.N == nil {
			p.at(o.N, "worker", "missing: the worker (node) ID embedded in the node's IDs")
		}
		nd.Worker, _ = p.within(&x.Worker, 0, nd.Layout.MaxNode())
		nd.Policy, _ = p.policy(&k.Policy)
		nd.MaxWait, nd.MaxLead, nd.Reserve = dur(&k.MaxWait), dur(&k.MaxLead), p.reserve(&k.Reserve)
		nd.Checkpoint = bool(k.Checkpoint.V)
		if k.Lease.N != nil {
			nd.Lease = p.lease(&k.Lease)
		}
		nd.LeaseTTL = p.leaseTTL(&k.Leased.LeaseTTL)
		if wr := x.Leased.WorkerRange.N; wr != nil {
			nd.WorkerRange = p.workerRange(wr, nd.Layout.MaxNode())
			if r := nd.WorkerRange; r != nil && (nd.Worker < r.Min || nd.Worker > r.Max) {
				p.fail(wr, "the node's worker %d (the one it prefers) lies outside its range %s", nd.Worker, r)
			}
		}
		for _, sw := range k.Leased.switches(&nd, &Target{}) {
			if sw.l.ok() {
				*sw.off = !bool(sw.l.V)
			}
		}
		nd.PeerClockMaxSkew = p.peerClockMaxSkew(&k.Leased.PeerClockMaxSkew)
		if h := &x.Leased.Holder; h.ok() {
			nd.Holder = string(h.V)
			for _, o := range out {
				if o.Holder == nd.Holder || (o.Holder == "" && o.Name == nd.Holder) {
					p.fail(h.N, "holder %q is already node %s's identity: two nodes with one identity are a clone (fault clone with same_holder)", nd.Holder, o.Name)
				}
			}
		}
		if nd.Lease == LeaseNone {
			keys, nodes := givenKeys(&k.Leased)
			k2, n2 := givenKeys(&x.Leased)
			for i, n := range append(nodes, n2...) {
				p.failKey(n, "%s needs a lease: add lease: memory to the node", append(keys, k2...)[i])
			}
		}
		nd.ClockOffset = dur(&x.ClockOffset)
		out = append(out, nd)
	}
	return out
}

// policy reads a rewind policy.
func (p *parser) policy(l *leaf[text]) (generator.Policy, bool) {
	if !l.ok() {
		return 0, false
	}
	v := string(l.V)
	pol, err := generator.ParsePolicy(v)
	if err != nil {
		p.fail(l.N, "want wait, refuse or logical, found %q%s", v, suggest(v, []string{"wait", "refuse", "logical"}))
		return 0, false
	}
	return pol, true
}

// MaxReserve bounds a node's reserve (the serve command's --reserve
// has the same bound).
const MaxReserve = time.Hour

// reserve reads a reserve within [0, MaxReserve]; an explicit 0 is
// generator.NoReserve (absent: the generator's default).
func (p *parser) reserve(l *leaf[duration]) time.Duration {
	if !l.ok() {
		return 0
	}
	d := time.Duration(l.V)
	switch {
	case d > MaxReserve:
		p.fail(l.N, "%s is out of range [0, %s]", FormatDuration(d), FormatDuration(MaxReserve))
		return 0
	case d == 0:
		return generator.NoReserve
	}
	return d
}

// minLeaseTTL is the shortest lease TTL a scenario may ask for: the
// Keeper needs room for a renewal every third of it within its margin.
const minLeaseTTL = 200 * time.Millisecond

// leaseTTL reads a lease TTL of at least minLeaseTTL.
func (p *parser) leaseTTL(l *leaf[duration]) time.Duration {
	d := dur(l)
	if l.ok() && d < minLeaseTTL {
		p.fail(l.N, "%s is shorter than %s: the lease keeper renews every third of it within a safety margin", d, minLeaseTTL)
		return 0
	}
	return d
}

// peerClockMaxSkew reads a peer clock check bound within (0,
// lease.MaxPeerClockSkew].
func (p *parser) peerClockMaxSkew(l *leaf[duration]) time.Duration {
	d := dur(l)
	if l.ok() && (d <= 0 || d > lease.MaxPeerClockSkew) {
		p.fail(l.N, "%s outside (0, %s] (switch the check off with peer_clock_check: off)", FormatDuration(d), FormatDuration(lease.MaxPeerClockSkew))
		return 0
	}
	return d
}

// workerRange reads "min-max" or [min, max] within [0, maxNode].
func (p *parser) workerRange(n *yaml.Node, maxNode int64) *WorkerRange {
	n = deref(n)
	v, isScalar := scalar(n)
	var lo, hi string
	switch {
	case n.Kind == yaml.SequenceNode && len(n.Content) == 2:
		var ok1, ok2 bool
		lo, ok1 = scalar(n.Content[0])
		hi, ok2 = scalar(n.Content[1])
		if !ok1 || !ok2 {
			p.fail(n, "want a range of worker IDs such as 0-11 or [0, 11], found %s", describe(n))
			return nil
		}
	case isScalar:
		var ok bool
		if lo, hi, ok = strings.Cut(v, "-"); !ok {
			p.fail(n, "want a range of worker IDs such as 0-11 or [0, 11], found %q", v)
			return nil
		}
	default:
		p.fail(n, "want a range of worker IDs such as 0-11 or [0, 11], found %s", describe(n))
		return nil
	}
	a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	b, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		p.fail(n, "want a range of worker IDs such as 0-11 or [0, 11], found %q-%q", lo, hi)
		return nil
	case a < 0 || b < a || b > maxNode:
		p.fail(n, "range %d-%d is not within [0, %d] with min <= max", a, b, maxNode)
		return nil
	}
	return &WorkerRange{Min: a, Max: b}
}

// lease reads a lease backend: none, memory, or a lease store's URL
// (postgres://user@host:port/db?..., etcd://host:port[,host:port],
// zk://host:port[,host:port][/root]); "" when it is none of these.
func (p *parser) lease(l *leaf[text]) string {
	if !l.ok() {
		return ""
	}
	v := string(l.V)
	switch LeaseKind(v) {
	case LeaseNone, LeaseMemory:
		return v
	case LeasePostgres:
		if u, err := url.Parse(v); err == nil && u.Host != "" && u.Opaque == "" {
			return v
		}
		p.fail(l.N, "want a Postgres URL such as postgres://user@host:5432/db?sslmode=disable, found %q", redactURL(v))
		return ""
	case LeaseEtcd:
		u, err := url.Parse(v)
		if err == nil && u.User == nil && u.Opaque == "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
			good := u.Host != ""
			for _, hp := range strings.Split(u.Host, ",") {
				h, port, err := net.SplitHostPort(hp)
				good = good && err == nil && h != "" && port != ""
			}
			if good {
				return v
			}
		}
		p.fail(l.N, "want etcd://host:port[,host:port], found %q", redactURL(v))
		return ""
	case LeaseZooKeeper:
		if _, _, err := zkurl.Parse(v); err != nil {
			p.fail(l.N, "%v", err)
			return ""
		}
		return v
	}
	p.fail(l.N, "want %s, found %q%s", leaseWant, redactURL(v), suggest(v, []string{LeaseMemory, LeaseNone}))
	return ""
}

// leaseWant lists the lease values a scenario may give.
const leaseWant = "memory, none, postgres://..., etcd://host:port or zk://host:port[/root]"

// redactURL hides the password of a URL-like lease value in messages.
func redactURL(v string) string {
	if u, err := url.Parse(v); err == nil && u.User != nil {
		return u.Redacted()
	}
	return v
}

func (p *parser) targets(l *list[targetEntry], s *Scenario) []Target {
	if l.present() && len(l.V) == 0 {
		p.fail(l.N, "empty: leave targets out to run the nodes as declared")
	}
	var out []Target
	seen := map[string]bool{}
	for i := range l.V {
		e := &l.V[i]
		var t Target
		if e.Name.N != nil {
			t = Target{Name: string(e.Name.V), Use: string(e.Name.V), Line: line(e.Name.N)}
			if t.Use == ExecTarget {
				p.at(e.Name.N, "exec", "missing: use: %s needs an exec block (command, protocol, format, env)", ExecTarget)
			}
		} else {
			t = p.target(&e.Obj, s)
		}
		if t.Name != "" {
			if seen[t.Name] {
				entry := e.Name.N
				if entry == nil {
					entry = e.Obj.N
				}
				p.fail(entry, "target %q listed twice", t.Name)
			}
			seen[t.Name] = true
		}
		out = append(out, t)
	}
	return out
}

// target reads a target given as a mapping.
func (p *parser) target(o *object[targetObject], s *Scenario) Target {
	x, k := &o.V, &o.V.Settings
	t := Target{Name: string(x.Name.V), Line: line(o.N)}
	if x.Name.N == nil {
		p.at(o.N, "name", "missing: the target's row name")
	}
	t.Use = t.Name
	if x.Use.ok() {
		t.Use = string(x.Use.V)
	} else if x.Use.N != nil {
		t.Use = ""
	}
	if pol, ok := p.policy(&k.Policy); ok {
		t.Policy = &pol
	}
	t.MaxWait, t.MaxLead, t.Reserve = dur(&k.MaxWait), dur(&k.MaxLead), p.reserve(&k.Reserve)
	if k.Lease.N != nil {
		t.Lease = p.lease(&k.Lease)
	}
	if k.Checkpoint.ok() {
		t.Checkpoint = new(bool(k.Checkpoint.V))
	}
	t.LeaseTTL = p.leaseTTL(&k.Leased.LeaseTTL)
	for _, sw := range k.Leased.switches(&Node{}, &t) {
		if sw.l.ok() {
			*sw.over = new(bool(sw.l.V))
		}
	}
	t.PeerClockMaxSkew = p.peerClockMaxSkew(&k.Leased.PeerClockMaxSkew)
	if na := &x.NotApplicable; na.ok() {
		switch v := string(na.V); strings.ToLower(v) {
		case "ok", "on", "true", "yes":
			t.NotApplicable = true
		case "error", "off", "false", "no":
		default:
			p.fail(na.N, "want ok (report the target n/a when it cannot take the scenario) or error, found %q", v)
		}
	}
	t.RealNA = p.realNA(&x.RealNA)
	if x.Exec.N != nil {
		t.Exec = p.exec(&x.Exec)
		if t.Use != ExecTarget {
			p.failKey(x.Exec.N, "an exec block needs use: %s (target %q uses %q)", ExecTarget, t.Name, t.Use)
		}
	} else if t.Use == ExecTarget {
		p.at(o.N, "exec", "missing: use: %s needs an exec block (command, protocol, format, env)", ExecTarget)
	}
	t.Invariants = p.invariants(&x.Invariants, s)
	return t
}

func (p *parser) load(o *object[loadEntry], duration time.Duration, durOK bool) Load {
	x := &o.V
	l := Load{PerNode: true, Clients: 1, Batch: 1, Line: line(o.N)}
	if x.Per.ok() {
		switch v := string(x.Per.V); v {
		case "node", "total":
			l.PerNode = v == "node"
		case "": // the default
		default:
			p.fail(x.Per.N, "want node or total, found %q%s", v, suggest(v, []string{"node", "total"}))
		}
	}
	if v, ok := p.within(&x.Clients, 1, 10_000); ok {
		l.Clients = int(v)
	}
	if v, ok := p.within(&x.Batch, 1, 1_000_000); ok {
		l.Batch = int(v)
	}
	if l.FaultBurst = dur(&x.FaultBurst); l.FaultBurst > maxFaultBurst {
		p.fail(x.FaultBurst.N, "%s: at most %s", l.FaultBurst, maxFaultBurst)
	}
	single := x.Single.Rate.N != nil || x.Single.For.N != nil
	switch {
	case x.Stages.N != nil:
		if single {
			p.failKey(x.Stages.N, "give either stages or a single rate (and for), not both")
		}
		if x.Stages.present() && len(x.Stages.V) == 0 {
			p.fail(x.Stages.N, "empty: give at least one stage")
		}
		for i := range x.Stages.V {
			st := &x.Stages.V[i]
			l.Stages = append(l.Stages, p.stage(&st.V, st.N, i == len(x.Stages.V)-1))
		}
	case x.Single.Rate.N != nil:
		l.Stages = []Stage{p.stage(&x.Single, o.N, true)}
	case o.present():
		p.fail(o.N, "missing: stages, or a rate such as rate: 5000/s")
	}
	if durOK {
		var total time.Duration
		for i := range l.Stages {
			st := &l.Stages[i]
			if st.For == 0 {
				st.For = duration - total
				if st.For <= 0 {
					p.errorf(o.N, fmt.Sprintf("load.stages[%d]", i), "earlier stages already fill the duration %s", duration)
				}
			}
			total += st.For
		}
		if total > duration {
			p.fail(o.N, "stages last %s, beyond the duration %s", total, duration)
		}
	}
	return l
}

func (p *parser) stage(x *stageEntry, n *yaml.Node, last bool) Stage {
	st := Stage{Line: line(n)}
	switch {
	case x.Rate.ok() && x.Rate.V == "max":
		st.Max = true
	case x.Rate.ok():
		if r, err := ParseRate(string(x.Rate.V)); err != nil {
			p.fail(x.Rate.N, "%v", err)
		} else {
			st.Rate = r
		}
	case x.Rate.N == nil:
		p.at(n, "rate", "missing: requests per unit of time, e.g. rate: 5000/s, or rate: max")
	}
	st.For = dur(&x.For)
	if x.For.ok() && st.For == 0 {
		p.fail(x.For.N, "must be positive")
	} else if x.For.N == nil && !last {
		p.at(n, "for", "missing: only the last stage may run until the end")
	}
	return st
}

// maxRate bounds a rate (one request per nanosecond).
const maxRate = 1e9

// ParseRate parses "5000/s", "100000/ms", "300/m" or "2.5/us" into requests
// per second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("want a rate such as 5000/s (requests per unit), or max; found %q", s)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(num), "_", ""), 64)
	if err != nil || v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a positive number of requests in %q", s)
	}
	var per time.Duration
	switch strings.TrimSpace(unit) {
	case "ns":
		per = time.Nanosecond
	case "us", "µs":
		per = time.Microsecond
	case "ms":
		per = time.Millisecond
	case "s":
		per = time.Second
	case "m", "min":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		return 0, fmt.Errorf("unknown unit %q in rate %q (want ns, us, ms, s, m or h)", unit, s)
	}
	r := v * float64(time.Second) / float64(per)
	if r > maxRate {
		return 0, fmt.Errorf("rate %q is above one request per nanosecond", s)
	}
	return r, nil
}

func (p *parser) simulation(o *object[simEntry]) Simulation {
	x := &o.V
	sim := Simulation{Line: line(o.N), Hot: dur(&x.Hot), Service: dur(&x.Service)}
	if o.N == nil {
		sim.Line = 0
	}
	if v, ok := p.within(&x.Budget, 1000, 100_000_000); ok {
		sim.Budget = int(v)
	}
	return sim
}

func (p *parser) faults(l *list[object[faultEntry]], s *Scenario, durOK bool) []Fault {
	var out []Fault
	names := map[string]bool{}
	kindCount := map[faults.Kind]int{}
	var kinds []string
	for _, k := range faults.Kinds(faults.InScenario) {
		kinds = append(kinds, string(k))
	}
	for i := range l.V {
		o := &l.V[i]
		x := &o.V
		if x.Kind.N == nil {
			p.at(o.N, "kind", "missing: one of %s", strings.Join(kinds, ", "))
			continue
		}
		if !x.Kind.ok() {
			continue
		}
		kind := faults.Kind(x.Kind.V)
		spec, ok := faults.Lookup(kind)
		if !ok || !spec.In(faults.InScenario) {
			p.fail(x.Kind.N, "unknown fault kind %q%s (known: %s)", kind, suggest(string(kind), kinds), strings.Join(kinds, ", "))
			continue
		}
		f := Fault{Line: line(o.N)}
		f.Fault = p.faultParams(kind, spec, o)
		if x.At.N == nil {
			p.at(o.N, "at", "missing: when the fault strikes, as an offset from the start (e.g. at: 2s)")
		}
		f.At, f.Observe = dur(&x.At), dur(&x.Observe)
		// Nodes.
		if _, storeClock := kind.StoreClock(); x.Nodes.N != nil && storeClock {
			p.failKey(x.Nodes.N, "a %s acts on the lease store's clock: it takes no nodes", kind)
		} else if x.Nodes.N != nil {
			f.Partition = kind == faults.KindStoreOutage
			f.Nodes, f.All = p.faultNodes(deref(x.Nodes.N), s)
		} else {
			f.All = true
			for _, nd := range s.Nodes {
				f.Nodes = append(f.Nodes, nd.Name)
			}
		}
		if f.Direction != "" && !f.Partition {
			p.at(o.N, "direction", "a direction needs nodes: only a partition has one")
		}
		if kind == faults.KindHandoff && len(f.Nodes) != 1 {
			p.at(o.N, "nodes", "a handoff moves one node's worker ID: name exactly one node")
		}
		// Name.
		kindCount[kind]++
		if x.Name.N != nil {
			f.Name = string(x.Name.V)
		} else {
			f.Name = string(kind)
			if c := kindCount[kind]; c > 1 {
				f.Name = fmt.Sprintf("%s-%d", kind, c)
			}
		}
		if f.Name != "" {
			if names[f.Name] {
				p.at(o.N, "name", "fault name %q used twice: name the faults apart", f.Name)
			}
			names[f.Name] = true
		}
		// Times.
		if durOK && x.At.ok() {
			if f.At >= s.Duration {
				p.fail(x.At.N, "%s is not before the end of the run (duration %s)", f.At, s.Duration)
			} else if end := f.At + f.length(); end > s.Duration {
				p.fail(o.N, "the %s lasts until %s, beyond the duration %s", kind, end, s.Duration)
			}
		}
		out = append(out, f)
	}
	return out
}

// length is how long the fault itself lasts from At (a drift and a clone
// without `for` last until the end, which only a run knows: 0 here).
func (f Fault) length() time.Duration {
	switch f.Kind {
	case faults.KindFreeze, faults.KindPause, faults.KindRestart, faults.KindClone, faults.KindStoreOutage, faults.KindStorePause:
		return f.For
	case faults.KindSmear:
		return f.Window
	case faults.KindSlew:
		return f.SlewDuration()
	case faults.KindHandoff:
		return f.Gap
	case faults.KindLeap:
		return time.Second
	}
	return 0
}

// faultParams reads a fault's parameters by the fault table
// (faults.Specs): each value as its parameter's type, then the rules of
// faults.Build, every problem under its key.
func (p *parser) faultParams(kind faults.Kind, spec faults.Spec, o *object[faultEntry]) faults.Fault {
	params := map[string]any{}
	for key, r := range o.V.Params {
		prm, ok := spec.Param(key, faults.InScenario)
		params[key] = nil // unreadable, or a key the kind does not take (Build says so)
		if ok {
			if v, ok := p.paramValue(prm, r.N); ok {
				params[key] = v
			}
		}
	}
	f, errs := faults.Build(kind, params, faults.InScenario)
	for _, e := range errs {
		if r, ok := o.V.Params[e.Param]; ok {
			p.fail(r.N, "%s", e.Msg)
		} else if e.Param != "" {
			p.at(o.N, e.Param, "%s", e.Msg)
		} else {
			p.fail(o.N, "%s", e.Msg)
		}
	}
	return f
}

// paramValue reads a fault parameter's value from n as its type's Go type.
func (p *parser) paramValue(prm faults.Param, n *yaml.Node) (any, bool) {
	switch prm.Type {
	case faults.ParamDuration:
		if prm.Min < 0 {
			return readLeaf[offset](p, n, func(v offset) any { return time.Duration(v) })
		}
		return readLeaf[duration](p, n, func(v duration) any { return time.Duration(v) })
	case faults.ParamPPM:
		return readLeaf[number](p, n, func(v number) any { return float64(v) })
	case faults.ParamBool:
		return readLeaf[onOff](p, n, func(v onOff) any { return bool(v) })
	case faults.ParamTime:
		return readLeaf[instant](p, n, func(v instant) any { return time.Time(v) })
	case faults.ParamSeed:
		return readLeaf[whole](p, n, func(v whole) any { return uint64(v) })
	}
	return readLeaf[text](p, n, func(v text) any { return string(v) })
}

// readLeaf reads n as a leaf of T, reporting what is wrong, and converts it.
func readLeaf[T text | name | whole | number | onOff | duration | offset | instant](p *parser, n *yaml.Node, conv func(T) any) (any, bool) {
	var l leaf[T]
	_ = l.UnmarshalYAML(deref(n))
	l.N = n
	l.report(p, "")
	if !l.ok() {
		return nil, false
	}
	return conv(l.V), true
}

// checkStoreOutage reports a store outage in a scenario where nothing
// leases: it would cut off nobody.
func (p *parser) checkStoreOutage(s *Scenario) {
	leases := false
	for _, n := range s.Nodes {
		leases = leases || n.Lease == LeaseMemory
	}
	for _, t := range s.Targets {
		leases = leases || t.Lease == LeaseMemory
	}
	if leases {
		return
	}
	for i, f := range s.Faults {
		_, storeClock := f.Kind.StoreClock()
		switch {
		case f.Kind == faults.KindStoreOutage:
			p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d]", i), "a store_outage needs a node with lease: memory (nothing leases, so nothing would be cut off)")
		case storeClock:
			p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d]", i), "a %s needs a node with lease: memory (nothing leases, so the store's clock decides nothing)", f.Kind)
		}
	}
}

// checkCrashPoints reports a crash point on a node that has no checkpoint
// under some target: no call would ever reach the point.
func (p *parser) checkCrashPoints(s *Scenario) {
	for i, f := range s.Faults {
		if f.Point == "" {
			continue
		}
		for _, name := range f.Nodes {
			n, ok := s.Node(name)
			if !ok {
				continue
			}
			for _, t := range s.Targets {
				if !t.Apply(n).Checkpoint {
					p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d].point", i),
						"crash point %s on node %s, which has no checkpoint under target %s: no call would reach it", f.Point, n.Name, t.Name)
					break
				}
			}
		}
	}
}

// checkCrashHandoffs reports a crash handoff whose gap is shorter than
// the lease TTL of the node it moves, under any target that leases: the
// crashed holder's lease is still live then, so the new host would get
// another worker ID (or none) instead of taking over this one.
func (p *parser) checkCrashHandoffs(s *Scenario) {
	for i, f := range s.Faults {
		if f.Kind != faults.KindHandoff || !f.Crash || len(f.Nodes) != 1 {
			continue
		}
		n, ok := s.Node(f.Nodes[0])
		if !ok {
			continue
		}
		for _, t := range s.Targets {
			an := t.Apply(n)
			if LeaseKind(an.Lease) == LeaseNone {
				continue
			}
			ttl := an.LeaseTTL
			if ttl == 0 {
				ttl = lease.DefaultTTL
			}
			if f.Gap < ttl {
				p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d].gap", i),
					"a crash handoff's gap (%s) must be at least node %s's lease TTL (%s under target %s): until the crashed holder's lease expires no other host can take its worker ID",
					FormatDuration(f.Gap), n.Name, FormatDuration(ttl), t.Name)
				break
			}
		}
	}
}

// faultNodes reads a fault's nodes: all, a node's name, or a list of
// names.
func (p *parser) faultNodes(n *yaml.Node, s *Scenario) ([]string, bool) {
	var known []string
	for _, nd := range s.Nodes {
		known = append(known, nd.Name)
	}
	if n.Kind == yaml.ScalarNode {
		if n.Value == "all" {
			return known, true
		}
		if _, ok := s.Node(n.Value); ok {
			return []string{n.Value}, false
		}
		p.fail(n, "unknown node %q%s (nodes: %s, or all)", n.Value, suggest(n.Value, known), strings.Join(known, ", "))
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "want a list, found %s", describe(n))
		return nil, false
	}
	var out []string
	seen := map[string]bool{}
	for _, it := range n.Content {
		v, ok := scalar(it)
		switch {
		case !ok:
			p.fail(it, "want a node name, found %s", describe(it))
		case v == "all":
			p.fail(n, "write nodes: all, not a list containing all")
		case !slices.Contains(known, v):
			p.fail(it, "unknown node %q%s (nodes: %s)", v, suggest(v, known), strings.Join(known, ", "))
		case seen[v]:
			p.fail(it, "node %q named twice", v)
		default:
			seen[v] = true
			out = append(out, v)
		}
	}
	if len(out) == 0 && len(p.errs) == 0 {
		p.fail(n, "empty: name at least one node, or all")
	}
	return out, false
}

// expr reads an invariant, with prefix (an expectation's metric) before
// it.
func (p *parser) expr(n *yaml.Node, prefix string) (Expr, bool) {
	v, ok := scalar(n)
	if !ok {
		p.fail(n, "want an invariant such as \"duplicates == 0\", found %s", describe(n))
		return Expr{}, false
	}
	if prefix != "" {
		v = prefix + " " + v
	}
	x, err := ParseExpr(v)
	if err != nil {
		p.fail(n, "%v", err)
		return Expr{}, false
	}
	x.Line = line(n)
	return x, true
}

// checkExpectation is checkDuring for a negative control's expectation,
// which also takes no mode: a control real mode cannot catch says so with
// real_na, so that it shows as n/a rather than as neither caught nor
// escaped.
func (p *parser) checkExpectation(s *Scenario, n *yaml.Node, x Expr) {
	p.checkDuring(s, n, x)
	if x.Mode != "" {
		p.fail(n, "an expectation takes no \"in %s mode\": give the target real_na: \"<why>\" when real mode cannot catch it", x.Mode)
	}
}

func (p *parser) checkDuring(s *Scenario, n *yaml.Node, x Expr) {
	if x.During == "" || len(s.FaultsNamed(x.During)) > 0 {
		return
	}
	var names []string
	for _, f := range s.Faults {
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		p.fail(n, "\"during %s\": the scenario has no faults", x.During)
		return
	}
	p.fail(n, "\"during %s\": no fault of that name or kind%s (faults: %s)", x.During, suggest(x.During, names), strings.Join(names, ", "))
}

// expect reads the negative controls: a mapping from target name to an
// invariant, a list of them, or a mapping from metric to the rest of one.
func (p *parser) expect(n *yaml.Node, s *Scenario) []Expectation {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.fail(n, "want a mapping from target name to what it must be caught doing, found %s", describe(n))
		return nil
	}
	var targets []string
	for _, t := range s.Targets {
		targets = append(targets, t.Name)
	}
	var out []Expectation
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		switch {
		case k.Kind != yaml.ScalarNode:
			p.fail(n, "keys must be target names")
			continue
		case !slices.Contains(targets, k.Value):
			p.fail(k, "target %q is not in targets%s (targets: %s)", k.Value, suggest(k.Value, targets), strings.Join(targets, ", "))
			continue
		case seen[k.Value]:
			p.fail(k, "target %q repeated", k.Value)
			continue
		}
		seen[k.Value] = true
		exp := Expectation{Target: k.Value, Line: line(k)}
		add := func(n *yaml.Node, at *yaml.Node, prefix string) {
			if x, ok := p.expr(n, prefix); ok {
				x.Line = line(at)
				p.checkExpectation(s, at, x)
				exp.Exprs = append(exp.Exprs, x)
			}
		}
		switch {
		case v.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				if mk := v.Content[j]; mk.Kind != yaml.ScalarNode {
					p.fail(k, "keys must be invariant names")
				} else {
					add(v.Content[j+1], mk, mk.Value)
				}
			}
		case v.Kind == yaml.SequenceNode:
			for _, it := range v.Content {
				add(it, it, "")
			}
		case v.Kind == yaml.ScalarNode && v.Tag != nothing:
			add(v, v, "")
		default:
			p.fail(v, "want what the target must be caught doing, e.g. {duplicates: \"> 0\"}")
		}
		if len(exp.Exprs) > 0 {
			out = append(out, exp)
		}
	}
	return out
}
