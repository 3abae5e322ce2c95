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
	s = p.scenario(root)
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

type parser struct {
	file string
	errs ErrorList
}

func (p *parser) errorf(n *yaml.Node, key, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		return
	}
	line, col := 1, 0
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Column: col, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// entry is one key of a mapping with its value.
type entry struct {
	key *yaml.Node
	val *yaml.Node
}

// mapping checks that n is a mapping whose keys are all in allowed,
// reporting unknown keys (with a suggestion) and repeated keys, and
// returns the entries by key.
func (p *parser) mapping(n *yaml.Node, path string, allowed ...string) map[string]entry {
	n = deref(n)
	out := map[string]entry{}
	if n == nil || n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping with keys %s, found %s", strings.Join(allowed, ", "), describe(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "keys must be plain names")
			continue
		}
		name := k.Value
		kp := join(path, name)
		if !contains(allowed, name) {
			p.errorf(k, kp, "unknown key %q%s (known: %s)", name, suggest(name, allowed), strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[name]; dup {
			p.errorf(k, kp, "key %q repeated", name)
			continue
		}
		out[name] = entry{k, deref(v)}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func describe(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// scalar returns the value of a scalar node, or reports what it found.
func (p *parser) scalar(n *yaml.Node, key, want string) (string, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, key, "want %s, found %s", want, describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) str(n *yaml.Node, key string) string {
	s, _ := p.scalar(n, key, "a string")
	return s
}

func (p *parser) name(n *yaml.Node, key string) string {
	s, ok := p.scalar(n, key, "a name")
	if !ok {
		return ""
	}
	if !validName(s) {
		p.errorf(n, key, "%q is not a valid name: use letters, digits, '-', '_' and '.', starting with a letter or digit", s)
		return ""
	}
	return s
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func (p *parser) integer(n *yaml.Node, key string, lo, hi int64) (int64, bool) {
	s, ok := p.scalar(n, key, "a whole number")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		p.errorf(n, key, "want a whole number, found %q", s)
		return 0, false
	}
	if v < lo || v > hi {
		p.errorf(n, key, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return v, true
}

func (p *parser) number(n *yaml.Node, key string) (float64, bool) {
	s, ok := p.scalar(n, key, "a number")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.errorf(n, key, "want a number, found %q", s)
		return 0, false
	}
	return v, true
}

func (p *parser) boolean(n *yaml.Node, key string) (bool, bool) {
	s, ok := p.scalar(n, key, "on or off")
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true", "on", "yes":
		return true, true
	case "false", "off", "no":
		return false, true
	}
	p.errorf(n, key, "want on or off (true or false), found %q", s)
	return false, false
}

// maxDuration bounds every duration in a file (a year).
const maxDuration = 366 * 24 * time.Hour

// duration parses a Go duration; negative values only when signed.
func (p *parser) duration(n *yaml.Node, key string, signed bool) (time.Duration, bool) {
	s, ok := p.scalar(n, key, "a duration such as 150ms")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(n, key, "want a duration such as 150ms or 24h, found %q", s)
		return 0, false
	}
	if d < 0 && !signed {
		p.errorf(n, key, "must not be negative, found %s", s)
		return 0, false
	}
	if d > maxDuration || d < -maxDuration {
		p.errorf(n, key, "%s is longer than a year", s)
		return 0, false
	}
	return d, true
}

func (p *parser) timestamp(n *yaml.Node, key string) (time.Time, bool) {
	s, ok := p.scalar(n, key, "an RFC 3339 time such as 2026-06-30T23:59:30Z")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.errorf(n, key, "want an RFC 3339 time such as 2026-06-30T23:59:30Z, found %q", s)
		return time.Time{}, false
	}
	if t.Year() < 1971 || t.Year() > 2200 {
		p.errorf(n, key, "%s is outside the years 1971 to 2200", s)
		return time.Time{}, false
	}
	return t.UTC(), true
}

func (p *parser) sequence(n *yaml.Node, key string) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		p.errorf(n, key, "want a list, found %s", describe(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
	}
	return out
}

var topKeys = []string{"name", "description", "seed", "mode", "duration", "start", "nodes", "targets", "load", "faults", "invariants", "expect", "simulation", "real_na"}

func (p *parser) scenario(root *yaml.Node) *Scenario {
	s := &Scenario{File: p.file, Mode: ModeSimulated, Seed: 1, Start: DefaultStart, Line: max(root.Line, 1)}
	m := p.mapping(root, "", topKeys...)
	if e, ok := m["name"]; ok {
		s.Name = p.name(e.val, "name")
	} else {
		p.errorf(root, "name", "missing: every scenario needs a name")
	}
	if e, ok := m["description"]; ok {
		s.Description = p.str(e.val, "description")
	}
	if e, ok := m["real_na"]; ok {
		s.RealNA = p.realNA(e.val, "real_na")
	}
	if e, ok := m["seed"]; ok {
		s.Seed, _ = p.integer(e.val, "seed", math.MinInt64, math.MaxInt64)
	}
	if e, ok := m["mode"]; ok {
		switch v := p.str(e.val, "mode"); v {
		case string(ModeSimulated), string(ModeReal):
			s.Mode = Mode(v)
		case "":
		default:
			p.errorf(e.val, "mode", "want simulated or real, found %q%s", v, suggest(v, []string{"simulated", "real"}))
		}
	}
	durOK := false
	if e, ok := m["duration"]; ok {
		s.Duration, durOK = p.duration(e.val, "duration", false)
		if durOK && s.Duration == 0 {
			p.errorf(e.val, "duration", "must be positive")
			durOK = false
		}
	} else {
		p.errorf(root, "duration", "missing: how long the run lasts, e.g. duration: 10s")
	}
	if e, ok := m["start"]; ok {
		if t, ok := p.timestamp(e.val, "start"); ok {
			s.Start = t
		}
	}
	if e, ok := m["nodes"]; ok {
		s.Nodes = p.nodes(e.val)
	} else {
		p.errorf(root, "nodes", "missing: a scenario needs at least one node")
	}
	if e, ok := m["load"]; ok {
		s.Load = p.load(e.val, s.Duration, durOK)
	} else {
		p.errorf(root, "load", "missing: the request load, e.g. load: {rate: 5000/s}")
	}
	if e, ok := m["simulation"]; ok {
		s.Simulation = p.simulation(e.val)
	}
	if e, ok := m["faults"]; ok {
		s.Faults = p.faults(e.val, s, durOK)
	}
	if e, ok := m["targets"]; ok {
		s.Targets = p.targets(e.val, s)
	} else {
		s.Targets = []Target{{Name: "declared", Use: "declared", Line: s.Line}}
	}
	if e, ok := m["invariants"]; ok {
		for i, n := range p.sequence(e.val, "invariants") {
			key := fmt.Sprintf("invariants[%d]", i)
			if x, ok := p.expr(n, key, ""); ok {
				p.checkDuring(s, n, key, x)
				s.Invariants = append(s.Invariants, x)
			}
		}
	}
	if e, ok := m["expect"]; ok {
		s.Expect = p.expect(e.val, s)
	}
	p.checkStoreOutage(s)
	p.checkCrashHandoffs(s)
	p.checkCrashPoints(s)
	hasTargetInvariants := false
	for _, t := range s.Targets {
		hasTargetInvariants = hasTargetInvariants || len(t.Invariants) > 0
	}
	if len(s.Invariants) == 0 && len(s.Expect) == 0 && !hasTargetInvariants && len(p.errs) == 0 {
		p.errorf(root, "invariants", "missing: a scenario must assert something, e.g. invariants: [\"duplicates == 0\"]")
	}
	return s
}

var nodeKeys = []string{"name", "worker", "policy", "max_wait", "max_lead", "reserve", "layout", "epoch", "checkpoint", "lease",
	"lease_ttl", "worker_range", "handoff_guard", "pause_check", "fence", "mark_write_through", "peer_clock_check", "peer_clock_max_skew",
	"clock_offset", "holder", "fence_margin"}

// leaseKeys are the node keys that only mean something with a lease.
var leaseKeys = []string{"lease_ttl", "worker_range", "handoff_guard", "pause_check", "fence", "mark_write_through",
	"peer_clock_check", "peer_clock_max_skew", "holder", "fence_margin"}

func (p *parser) nodes(n *yaml.Node) []Node {
	items := p.sequence(n, "nodes")
	if n != nil && len(items) == 0 && deref(n).Kind == yaml.SequenceNode {
		p.errorf(n, "nodes", "empty: a scenario needs at least one node")
	}
	var out []Node
	seen := map[string]bool{}
	for i, it := range items {
		path := fmt.Sprintf("nodes[%d]", i)
		m := p.mapping(it, path, nodeKeys...)
		nd := Node{Lease: LeaseNone, Layout: generator.DefaultLayout(), Line: max(it.Line, 1)}
		if e, ok := m["name"]; ok {
			nd.Name = p.name(e.val, path+".name")
			if nd.Name != "" && seen[nd.Name] {
				p.errorf(e.val, path+".name", "node %q declared twice", nd.Name)
			}
			if nd.Name == "all" {
				p.errorf(e.val, path+".name", "\"all\" is reserved for faults aimed at every node")
			}
			seen[nd.Name] = true
		} else {
			p.errorf(it, path+".name", "missing: every node needs a name")
		}
		if e, ok := m["layout"]; ok {
			if v, ok := p.scalar(e.val, path+".layout", "a layout: a preset name or T/N/S[@tick]"); ok {
				l, err := generator.ParseLayout(v)
				if err != nil {
					var names []string
					for _, pr := range generator.Presets() {
						names = append(names, pr.Name)
					}
					p.errorf(e.val, path+".layout", "%v%s (presets: %s; or any T/N/S[@tick] with T+N+S = 63)", err, suggest(v, names), strings.Join(names, ", "))
				} else {
					nd.Layout, nd.LayoutName = l, v
				}
			}
		}
		if e, ok := m["epoch"]; ok {
			if t, ok := p.timestamp(e.val, path+".epoch"); ok {
				nd.Layout.Epoch = t
				if err := nd.Layout.Validate(); err != nil {
					p.errorf(e.val, path+".epoch", "%v", err)
				}
			}
		}
		if e, ok := m["worker"]; ok {
			nd.Worker, _ = p.integer(e.val, path+".worker", 0, nd.Layout.MaxNode())
		} else {
			p.errorf(it, path+".worker", "missing: the worker (node) ID embedded in the node's IDs")
		}
		if e, ok := m["policy"]; ok {
			if v, ok := p.scalar(e.val, path+".policy", "wait, refuse or logical"); ok {
				pol, err := generator.ParsePolicy(v)
				if err != nil {
					p.errorf(e.val, path+".policy", "want wait, refuse or logical, found %q%s", v, suggest(v, []string{"wait", "refuse", "logical"}))
				}
				nd.Policy = pol
			}
		}
		nd.MaxWait = p.optDuration(m, "max_wait", path)
		nd.MaxLead = p.optDuration(m, "max_lead", path)
		nd.Reserve = p.reserve(m, path)
		if e, ok := m["checkpoint"]; ok {
			nd.Checkpoint, _ = p.boolean(e.val, path+".checkpoint")
		}
		if e, ok := m["lease"]; ok {
			nd.Lease = p.lease(e.val, path+".lease")
		}
		nd.LeaseTTL = p.leaseTTL(m, path)
		if e, ok := m["worker_range"]; ok {
			nd.WorkerRange = p.workerRange(e.val, path+".worker_range", nd.Layout.MaxNode())
			if r := nd.WorkerRange; r != nil && (nd.Worker < r.Min || nd.Worker > r.Max) {
				p.errorf(e.val, path+".worker_range", "the node's worker %d (the one it prefers) lies outside its range %s", nd.Worker, r)
			}
		}
		if e, ok := m["handoff_guard"]; ok {
			if b, ok := p.boolean(e.val, path+".handoff_guard"); ok {
				nd.NoHandoffGuard = !b
			}
		}
		if e, ok := m["pause_check"]; ok {
			if b, ok := p.boolean(e.val, path+".pause_check"); ok {
				nd.NoPauseCheck = !b
			}
		}
		if e, ok := m["fence"]; ok {
			if b, ok := p.boolean(e.val, path+".fence"); ok {
				nd.NoFence = !b
			}
		}
		if e, ok := m["mark_write_through"]; ok {
			if b, ok := p.boolean(e.val, path+".mark_write_through"); ok {
				nd.NoMarkWriteThrough = !b
			}
		}
		if e, ok := m["peer_clock_check"]; ok {
			if b, ok := p.boolean(e.val, path+".peer_clock_check"); ok {
				nd.NoPeerClockCheck = !b
			}
		}
		nd.PeerClockMaxSkew = p.peerClockMaxSkew(m, path)
		if e, ok := m["fence_margin"]; ok {
			if b, ok := p.boolean(e.val, path+".fence_margin"); ok {
				nd.NoFenceMargin = !b
			}
		}
		if e, ok := m["holder"]; ok {
			nd.Holder = p.name(e.val, path+".holder")
			for _, o := range out {
				if nd.Holder != "" && (o.Holder == nd.Holder || (o.Holder == "" && o.Name == nd.Holder)) {
					p.errorf(e.val, path+".holder", "holder %q is already node %s's identity: two nodes with one identity are a clone (fault clone with same_holder)", nd.Holder, o.Name)
				}
			}
		}
		if nd.Lease == LeaseNone {
			for _, k := range leaseKeys {
				if e, ok := m[k]; ok {
					p.errorf(e.key, path+"."+k, "%s needs a lease: add lease: memory to the node", k)
				}
			}
		}
		if e, ok := m["clock_offset"]; ok {
			nd.ClockOffset, _ = p.duration(e.val, path+".clock_offset", true)
		}
		out = append(out, nd)
	}
	return out
}

func (p *parser) optDuration(m map[string]entry, key, path string) time.Duration {
	e, ok := m[key]
	if !ok {
		return 0
	}
	d, _ := p.duration(e.val, join(path, key), false)
	return d
}

// MaxReserve bounds a node's reserve (the serve command's --reserve
// has the same bound).
const MaxReserve = time.Hour

// reserve parses a reserve within [0, MaxReserve]; an explicit 0 is
// generator.NoReserve (absent: the generator's default).
func (p *parser) reserve(m map[string]entry, path string) time.Duration {
	e, ok := m["reserve"]
	if !ok {
		return 0
	}
	d, ok := p.duration(e.val, path+".reserve", false)
	if !ok {
		return 0
	}
	if d > MaxReserve {
		p.errorf(e.val, path+".reserve", "%s is out of range [0, %s]", FormatDuration(d), FormatDuration(MaxReserve))
		return 0
	}
	if d == 0 {
		return generator.NoReserve
	}
	return d
}

// minLeaseTTL is the shortest lease TTL a scenario may ask for: the
// Keeper needs room for a renewal every third of it within its margin.
const minLeaseTTL = 200 * time.Millisecond

func (p *parser) leaseTTL(m map[string]entry, path string) time.Duration {
	e, ok := m["lease_ttl"]
	if !ok {
		return 0
	}
	d, ok := p.duration(e.val, path+".lease_ttl", false)
	if ok && d < minLeaseTTL {
		p.errorf(e.val, path+".lease_ttl", "%s is shorter than %s: the lease keeper renews every third of it within a safety margin", d, minLeaseTTL)
		return 0
	}
	return d
}

// peerClockMaxSkew parses a peer clock check bound within (0, lease.MaxPeerClockSkew].
func (p *parser) peerClockMaxSkew(m map[string]entry, path string) time.Duration {
	e, ok := m["peer_clock_max_skew"]
	if !ok {
		return 0
	}
	d, ok := p.duration(e.val, path+".peer_clock_max_skew", false)
	if ok && (d <= 0 || d > lease.MaxPeerClockSkew) {
		p.errorf(e.val, path+".peer_clock_max_skew", "%s outside (0, %s] (switch the check off with peer_clock_check: off)", FormatDuration(d), FormatDuration(lease.MaxPeerClockSkew))
		return 0
	}
	return d
}

// workerRange parses "min-max" or [min, max] within [0, maxNode].
func (p *parser) workerRange(n *yaml.Node, key string, maxNode int64) *WorkerRange {
	var lo, hi string
	switch {
	case n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 2:
		a, ok1 := p.scalar(n.Content[0], key+"[0]", "a worker ID")
		b, ok2 := p.scalar(n.Content[1], key+"[1]", "a worker ID")
		if !ok1 || !ok2 {
			return nil
		}
		lo, hi = a, b
	case n != nil && n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		var ok bool
		lo, hi, ok = strings.Cut(n.Value, "-")
		if !ok {
			p.errorf(n, key, "want a range of worker IDs such as 0-11 or [0, 11], found %q", n.Value)
			return nil
		}
	default:
		p.errorf(n, key, "want a range of worker IDs such as 0-11 or [0, 11], found %s", describe(n))
		return nil
	}
	a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	b, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		p.errorf(n, key, "want a range of worker IDs such as 0-11 or [0, 11], found %q-%q", lo, hi)
		return nil
	case a < 0 || b < a || b > maxNode:
		p.errorf(n, key, "range %d-%d is not within [0, %d] with min <= max", a, b, maxNode)
		return nil
	}
	return &WorkerRange{Min: a, Max: b}
}

// lease parses a lease backend: none, memory, or a lease store's URL
// (postgres://user@host:port/db?..., etcd://host:port[,host:port],
// zk://host:port[,host:port][/root]).
func (p *parser) lease(n *yaml.Node, key string) string {
	v, ok := p.scalar(n, key, leaseWant)
	if !ok {
		return ""
	}
	switch LeaseKind(v) {
	case LeaseNone, LeaseMemory:
		return v
	case LeasePostgres:
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || u.Opaque != "" {
			p.errorf(n, key, "want a Postgres URL such as postgres://user@host:5432/db?sslmode=disable, found %q", redactURL(v))
			return ""
		}
		return v
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
		p.errorf(n, key, "want etcd://host:port[,host:port], found %q", redactURL(v))
		return ""
	case LeaseZooKeeper:
		if _, _, err := zkurl.Parse(v); err != nil {
			p.errorf(n, key, "%v", err)
			return ""
		}
		return v
	}
	p.errorf(n, key, "want %s, found %q%s", leaseWant, redactURL(v), suggest(v, []string{LeaseMemory, LeaseNone}))
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

var targetKeys = []string{"name", "use", "policy", "max_wait", "max_lead", "reserve", "lease", "checkpoint",
	"lease_ttl", "handoff_guard", "pause_check", "fence", "mark_write_through", "peer_clock_check", "peer_clock_max_skew",
	"fence_margin", "not_applicable", "invariants", "exec", "real_na"}

func (p *parser) targets(n *yaml.Node, s *Scenario) []Target {
	var out []Target
	seen := map[string]bool{}
	items := p.sequence(n, "targets")
	if n != nil && len(items) == 0 && deref(n).Kind == yaml.SequenceNode {
		p.errorf(n, "targets", "empty: leave targets out to run the nodes as declared")
	}
	for i, it := range items {
		path := fmt.Sprintf("targets[%d]", i)
		t := Target{Line: max(it.Line, 1)}
		if it.Kind == yaml.ScalarNode {
			t.Name = p.name(it, path)
			t.Use = t.Name
			if t.Use == ExecTarget {
				p.errorf(it, path+".exec", "missing: use: %s needs an exec block (command, protocol, format, env)", ExecTarget)
			}
		} else {
			m := p.mapping(it, path, targetKeys...)
			if e, ok := m["name"]; ok {
				t.Name = p.name(e.val, path+".name")
			} else {
				p.errorf(it, path+".name", "missing: the target's row name")
			}
			t.Use = t.Name
			if e, ok := m["use"]; ok {
				t.Use = p.name(e.val, path+".use")
			}
			if e, ok := m["policy"]; ok {
				if v, ok := p.scalar(e.val, path+".policy", "wait, refuse or logical"); ok {
					if pol, err := generator.ParsePolicy(v); err != nil {
						p.errorf(e.val, path+".policy", "want wait, refuse or logical, found %q%s", v, suggest(v, []string{"wait", "refuse", "logical"}))
					} else {
						t.Policy = &pol
					}
				}
			}
			t.MaxWait = p.optDuration(m, "max_wait", path)
			t.MaxLead = p.optDuration(m, "max_lead", path)
			t.Reserve = p.reserve(m, path)
			if e, ok := m["lease"]; ok {
				t.Lease = p.lease(e.val, path+".lease")
			}
			if e, ok := m["checkpoint"]; ok {
				if b, ok := p.boolean(e.val, path+".checkpoint"); ok {
					t.Checkpoint = &b
				}
			}
			t.LeaseTTL = p.leaseTTL(m, path)
			if e, ok := m["handoff_guard"]; ok {
				if b, ok := p.boolean(e.val, path+".handoff_guard"); ok {
					t.HandoffGuard = &b
				}
			}
			if e, ok := m["pause_check"]; ok {
				if b, ok := p.boolean(e.val, path+".pause_check"); ok {
					t.PauseCheck = &b
				}
			}
			if e, ok := m["fence"]; ok {
				if b, ok := p.boolean(e.val, path+".fence"); ok {
					t.Fence = &b
				}
			}
			if e, ok := m["mark_write_through"]; ok {
				if b, ok := p.boolean(e.val, path+".mark_write_through"); ok {
					t.MarkWriteThrough = &b
				}
			}
			if e, ok := m["peer_clock_check"]; ok {
				if b, ok := p.boolean(e.val, path+".peer_clock_check"); ok {
					t.PeerClockCheck = &b
				}
			}
			t.PeerClockMaxSkew = p.peerClockMaxSkew(m, path)
			if e, ok := m["fence_margin"]; ok {
				if b, ok := p.boolean(e.val, path+".fence_margin"); ok {
					t.FenceMargin = &b
				}
			}
			if e, ok := m["not_applicable"]; ok {
				if v, ok := p.scalar(e.val, path+".not_applicable", "ok or error"); ok {
					switch strings.ToLower(v) {
					case "ok", "on", "true", "yes":
						t.NotApplicable = true
					case "error", "off", "false", "no":
					default:
						p.errorf(e.val, path+".not_applicable", "want ok (report the target n/a when it cannot take the scenario) or error, found %q", v)
					}
				}
			}
			if e, ok := m["real_na"]; ok {
				t.RealNA = p.realNA(e.val, path+".real_na")
			}
			if e, ok := m["exec"]; ok {
				t.Exec = p.exec(e.val, path+".exec")
				if t.Use != ExecTarget {
					p.errorf(e.key, path+".exec", "an exec block needs use: %s (target %q uses %q)", ExecTarget, t.Name, t.Use)
				}
			} else if t.Use == ExecTarget {
				p.errorf(it, path+".exec", "missing: use: %s needs an exec block (command, protocol, format, env)", ExecTarget)
			}
			if e, ok := m["invariants"]; ok {
				for j, n := range p.sequence(e.val, path+".invariants") {
					key := fmt.Sprintf("%s.invariants[%d]", path, j)
					if x, ok := p.expr(n, key, ""); ok {
						p.checkDuring(s, n, key, x)
						t.Invariants = append(t.Invariants, x)
					}
				}
			}
		}
		if t.Name != "" {
			if seen[t.Name] {
				p.errorf(it, path, "target %q listed twice", t.Name)
			}
			seen[t.Name] = true
		}
		out = append(out, t)
	}
	return out
}

var loadKeys = []string{"per", "clients", "batch", "stages", "rate", "for"}

func (p *parser) load(n *yaml.Node, duration time.Duration, durOK bool) Load {
	l := Load{PerNode: true, Clients: 1, Batch: 1, Line: max(deref(n).Line, 1)}
	m := p.mapping(n, "load", loadKeys...)
	if e, ok := m["per"]; ok {
		switch v := p.str(e.val, "load.per"); v {
		case "node":
			l.PerNode = true
		case "total":
			l.PerNode = false
		case "":
		default:
			p.errorf(e.val, "load.per", "want node or total, found %q%s", v, suggest(v, []string{"node", "total"}))
		}
	}
	if e, ok := m["clients"]; ok {
		if v, ok := p.integer(e.val, "load.clients", 1, 10_000); ok {
			l.Clients = int(v)
		}
	}
	if e, ok := m["batch"]; ok {
		if v, ok := p.integer(e.val, "load.batch", 1, 1_000_000); ok {
			l.Batch = int(v)
		}
	}
	_, hasRate := m["rate"]
	_, hasFor := m["for"]
	if e, ok := m["stages"]; ok {
		if hasRate || hasFor {
			p.errorf(e.key, "load.stages", "give either stages or a single rate (and for), not both")
		}
		items := p.sequence(e.val, "load.stages")
		if len(items) == 0 && e.val.Kind == yaml.SequenceNode {
			p.errorf(e.val, "load.stages", "empty: give at least one stage")
		}
		for i, it := range items {
			path := fmt.Sprintf("load.stages[%d]", i)
			sm := p.mapping(it, path, "rate", "for")
			l.Stages = append(l.Stages, p.stage(it, sm, path, i == len(items)-1))
		}
	} else if hasRate {
		l.Stages = []Stage{p.stage(n, m, "load", true)}
	} else {
		p.errorf(n, "load", "missing: stages, or a rate such as rate: 5000/s")
	}
	if durOK {
		var total time.Duration
		for i := range l.Stages {
			st := &l.Stages[i]
			if st.For == 0 {
				st.For = duration - total
				if st.For <= 0 {
					p.errorf(n, fmt.Sprintf("load.stages[%d]", i), "earlier stages already fill the duration %s", duration)
				}
			}
			total += st.For
		}
		if total > duration {
			p.errorf(n, "load", "stages last %s, beyond the duration %s", total, duration)
		}
	}
	return l
}

func (p *parser) stage(n *yaml.Node, m map[string]entry, path string, last bool) Stage {
	st := Stage{Line: max(n.Line, 1)}
	if e, ok := m["rate"]; ok {
		if v, ok := p.scalar(e.val, path+".rate", "a rate such as 5000/s, or max"); ok {
			if v == "max" {
				st.Max = true
			} else if r, err := ParseRate(v); err != nil {
				p.errorf(e.val, path+".rate", "%v", err)
			} else {
				st.Rate = r
			}
		}
	} else {
		p.errorf(n, path+".rate", "missing: requests per unit of time, e.g. rate: 5000/s, or rate: max")
	}
	if e, ok := m["for"]; ok {
		st.For, _ = p.duration(e.val, path+".for", false)
		if st.For == 0 {
			p.errorf(e.val, path+".for", "must be positive")
		}
	} else if !last {
		p.errorf(n, path+".for", "missing: only the last stage may run until the end")
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

func (p *parser) simulation(n *yaml.Node) Simulation {
	sim := Simulation{Line: max(n.Line, 1)}
	m := p.mapping(n, "simulation", "budget", "hot", "service")
	if e, ok := m["budget"]; ok {
		if v, ok := p.integer(e.val, "simulation.budget", 1000, 100_000_000); ok {
			sim.Budget = int(v)
		}
	}
	sim.Hot = p.optDuration(m, "hot", "simulation")
	sim.Service = p.optDuration(m, "service", "simulation")
	return sim
}

// faultPlacement are the keys of a fault entry that place it (when, on
// which nodes, under what name, watched how long); every other key is a
// parameter of its kind, from the fault vocabulary (faults.Specs).
var faultPlacement = []string{"name", "at", "kind", "nodes", "observe"}

// faultKeys are every key a fault entry may have.
func faultKeys() []string {
	keys := slices.Clone(faultPlacement)
	for _, sp := range faults.Specs() {
		for _, prm := range sp.ParamsIn(faults.InScenario) {
			if !slices.Contains(keys, prm.Name) {
				keys = append(keys, prm.Name)
			}
		}
	}
	return keys
}

func (p *parser) faults(n *yaml.Node, s *Scenario, durOK bool) []Fault {
	var out []Fault
	names := map[string]bool{}
	kindCount := map[faults.Kind]int{}
	var kinds []string
	for _, k := range faults.Kinds(faults.InScenario) {
		kinds = append(kinds, string(k))
	}
	keys := faultKeys()
	for i, it := range p.sequence(n, "faults") {
		path := fmt.Sprintf("faults[%d]", i)
		m := p.mapping(it, path, keys...)
		f := Fault{Line: max(it.Line, 1)}
		e, ok := m["kind"]
		if !ok {
			p.errorf(it, path+".kind", "missing: one of %s", strings.Join(kinds, ", "))
			continue
		}
		kv, ok := p.scalar(e.val, path+".kind", "a fault kind")
		if !ok {
			continue
		}
		f.Kind = faults.Kind(kv)
		spec, ok := faults.Lookup(f.Kind)
		if !ok || !spec.In(faults.InScenario) {
			p.errorf(e.val, path+".kind", "unknown fault kind %q%s (known: %s)", kv, suggest(kv, kinds), strings.Join(kinds, ", "))
			continue
		}
		params := spec.ParamsIn(faults.InScenario)
		for key, ent := range m {
			if slices.Contains(faultPlacement, key) {
				continue
			}
			prm, ok := spec.Param(key, faults.InScenario)
			if !ok {
				takes := "no parameters"
				if len(params) > 0 {
					var names []string
					for _, q := range params {
						names = append(names, q.Name)
					}
					takes = "only " + strings.Join(names, ", ")
				}
				p.errorf(ent.key, path+"."+key, "a %s fault takes %s", f.Kind, takes)
				continue
			}
			p.faultParam(&f, prm, ent.val, path+"."+key)
		}
		for _, prm := range params {
			if _, ok := m[prm.Name]; prm.Required && !ok {
				p.errorf(it, path+"."+prm.Name, "missing: a %s fault needs %s", f.Kind, prm.Name)
			}
		}
		if e, ok := m["at"]; ok {
			f.At, _ = p.duration(e.val, path+".at", false)
		} else {
			p.errorf(it, path+".at", "missing: when the fault strikes, as an offset from the start (e.g. at: 2s)")
		}
		if e, ok := m["observe"]; ok {
			f.Observe, _ = p.duration(e.val, path+".observe", false)
		}
		// Nodes.
		if e, ok := m["nodes"]; ok && storeClockFault(f.Kind) {
			p.errorf(e.key, path+".nodes", "a %s acts on the lease store's clock: it takes no nodes", f.Kind)
		} else if ok {
			f.Partition = f.Kind == faults.KindStoreOutage
			f.Nodes, f.All = p.faultNodes(e.val, path+".nodes", s)
		} else {
			f.All = true
			for _, nd := range s.Nodes {
				f.Nodes = append(f.Nodes, nd.Name)
			}
		}
		if f.Direction != "" && !f.Partition {
			p.errorf(it, path+".direction", "a direction needs nodes: only a partition has one")
		}
		if f.Point != "" && f.Graceful {
			p.errorf(m["point"].val, path+".point", "a graceful restart does not crash: give point or graceful, not both")
		}
		if f.Point != "" && f.WipeCheckpoint {
			p.errorf(m["point"].val, path+".point", "a crash point is a moment of the checkpoint's write: it needs keep_checkpoint on")
		}
		if f.Kind == faults.KindHandoff && len(f.Nodes) != 1 {
			p.errorf(it, path+".nodes", "a handoff moves one node's worker ID: name exactly one node")
		}
		// Name.
		kindCount[f.Kind]++
		if e, ok := m["name"]; ok {
			f.Name = p.name(e.val, path+".name")
		} else {
			f.Name = string(f.Kind)
			if c := kindCount[f.Kind]; c > 1 {
				f.Name = fmt.Sprintf("%s-%d", f.Kind, c)
			}
		}
		if f.Name != "" {
			if names[f.Name] {
				p.errorf(it, path+".name", "fault name %q used twice: name the faults apart", f.Name)
			}
			names[f.Name] = true
		}
		// Times.
		if durOK {
			if f.At >= s.Duration {
				p.errorf(m["at"].val, path+".at", "%s is not before the end of the run (duration %s)", f.At, s.Duration)
			} else {
				var span time.Duration
				switch f.Kind {
				case faults.KindFreeze, faults.KindPause, faults.KindRestart, faults.KindClone, faults.KindStoreOutage, faults.KindStorePause:
					span = f.For
				case faults.KindSmear:
					span = f.Window
				case faults.KindSlew:
					span = f.SlewDuration()
				case faults.KindHandoff:
					span = f.Gap
				case faults.KindLeap:
					span = time.Second
				}
				if f.At+span > s.Duration {
					p.errorf(it, path, "the %s lasts until %s, beyond the duration %s", f.Kind, f.At+span, s.Duration)
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// faultParam parses one parameter of a fault into f, checking it against
// the vocabulary's bounds.
func (p *parser) faultParam(f *Fault, prm faults.Param, n *yaml.Node, key string) {
	switch prm.Type {
	case faults.ParamDuration:
		d, ok := p.duration(n, key, prm.Min < 0)
		if !ok {
			return
		}
		if err := prm.CheckDuration(d); err != nil {
			p.errorf(n, key, "a %s fault's %v", f.Kind, err)
			return
		}
		switch prm.Name {
		case "by":
			f.By = d
		case "for":
			f.For = d
		case "window":
			f.Window = d
		case "offset_while_down":
			f.OffsetWhileDown = d
		case "behind":
			f.Behind = d
		case "gap":
			f.Gap = d
		}
	case faults.ParamPPM:
		v, ok := p.number(n, key)
		if !ok {
			return
		}
		if err := prm.CheckPPM(v); err != nil {
			p.errorf(n, key, "a %s fault's %v", f.Kind, err)
			return
		}
		f.PPM = v
	case faults.ParamChoice:
		v, ok := p.scalar(n, key, "one of "+strings.Join(prm.Choices, ", "))
		if !ok {
			return
		}
		if err := prm.CheckChoice(v); err != nil {
			p.errorf(n, key, "a %s fault's %v", f.Kind, err)
			return
		}
		switch prm.Name {
		case "direction":
			f.Direction = v
		case "point":
			f.Point = v
		}
	case faults.ParamBool:
		v, ok := p.boolean(n, key)
		if !ok {
			return
		}
		switch prm.Name {
		case "keep_checkpoint":
			f.WipeCheckpoint = !v
		case "same_holder":
			f.SameHolder = v
		case "crash":
			f.Crash = v
		case "hang":
			f.Hang = v
		case "graceful":
			f.Graceful = v
		}
	}
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
		switch {
		case f.Kind == faults.KindStoreOutage:
			p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d]", i), "a store_outage needs a node with lease: memory (nothing leases, so nothing would be cut off)")
		case storeClockFault(f.Kind):
			p.errorf(&yaml.Node{Line: f.Line}, fmt.Sprintf("faults[%d]", i), "a %s needs a node with lease: memory (nothing leases, so the store's clock decides nothing)", f.Kind)
		}
	}
}

// storeClockFault reports whether k acts on the lease store's clock.
func storeClockFault(k faults.Kind) bool {
	_, ok := k.StoreClock()
	return ok
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

func (p *parser) faultNodes(n *yaml.Node, key string, s *Scenario) ([]string, bool) {
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
		p.errorf(n, key, "unknown node %q%s (nodes: %s, or all)", n.Value, suggest(n.Value, known), strings.Join(known, ", "))
		return nil, false
	}
	var out []string
	seen := map[string]bool{}
	for i, it := range p.sequence(n, key) {
		v, ok := p.scalar(it, fmt.Sprintf("%s[%d]", key, i), "a node name")
		if !ok {
			continue
		}
		if v == "all" {
			p.errorf(it, key, "write nodes: all, not a list containing all")
			continue
		}
		if _, ok := s.Node(v); !ok {
			p.errorf(it, fmt.Sprintf("%s[%d]", key, i), "unknown node %q%s (nodes: %s)", v, suggest(v, known), strings.Join(known, ", "))
			continue
		}
		if seen[v] {
			p.errorf(it, fmt.Sprintf("%s[%d]", key, i), "node %q named twice", v)
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 && len(p.errs) == 0 {
		p.errorf(n, key, "empty: name at least one node, or all")
	}
	return out, false
}

func (p *parser) expr(n *yaml.Node, key, prefix string) (Expr, bool) {
	v, ok := p.scalar(n, key, "an invariant such as \"duplicates == 0\"")
	if !ok {
		return Expr{}, false
	}
	if prefix != "" {
		v = prefix + " " + v
	}
	x, err := ParseExpr(v)
	if err != nil {
		p.errorf(n, key, "%v", err)
		return Expr{}, false
	}
	x.Line = max(n.Line, 1)
	return x, true
}

// checkExpectation is checkDuring for a negative control's expectation,
// which also takes no mode: a control real mode cannot catch says so with
// real_na, so that it shows as n/a rather than as neither caught nor
// escaped.
func (p *parser) checkExpectation(s *Scenario, n *yaml.Node, key string, x Expr) {
	p.checkDuring(s, n, key, x)
	if x.Mode != "" {
		p.errorf(n, key, "an expectation takes no \"in %s mode\": give the target real_na: \"<why>\" when real mode cannot catch it", x.Mode)
	}
}

func (p *parser) checkDuring(s *Scenario, n *yaml.Node, key string, x Expr) {
	if x.During == "" {
		return
	}
	if len(s.FaultsNamed(x.During)) > 0 {
		return
	}
	var names []string
	for _, f := range s.Faults {
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		p.errorf(n, key, "\"during %s\": the scenario has no faults", x.During)
		return
	}
	p.errorf(n, key, "\"during %s\": no fault of that name or kind%s (faults: %s)", x.During, suggest(x.During, names), strings.Join(names, ", "))
}

func (p *parser) expect(n *yaml.Node, s *Scenario) []Expectation {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		p.errorf(n, "expect", "want a mapping from target name to what it must be caught doing, found %s", describe(n))
		return nil
	}
	var targets []string
	for _, t := range s.Targets {
		targets = append(targets, t.Name)
	}
	var out []Expectation
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			p.errorf(k, "expect", "keys must be target names")
			continue
		}
		path := "expect." + k.Value
		if !contains(targets, k.Value) {
			p.errorf(k, path, "target %q is not in targets%s (targets: %s)", k.Value, suggest(k.Value, targets), strings.Join(targets, ", "))
			continue
		}
		if seen[k.Value] {
			p.errorf(k, path, "target %q repeated", k.Value)
			continue
		}
		seen[k.Value] = true
		exp := Expectation{Target: k.Value, Line: max(k.Line, 1)}
		switch {
		case v != nil && v.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				mk, mv := deref(v.Content[j]), deref(v.Content[j+1])
				if mk == nil || mk.Kind != yaml.ScalarNode {
					p.errorf(mk, path, "keys must be invariant names")
					continue
				}
				if x, ok := p.expr(mv, path+"."+mk.Value, mk.Value); ok {
					x.Line = max(mk.Line, 1)
					p.checkExpectation(s, mk, path+"."+mk.Value, x)
					exp.Exprs = append(exp.Exprs, x)
				}
			}
		case v != nil && v.Kind == yaml.SequenceNode:
			for j, it := range v.Content {
				key := fmt.Sprintf("%s[%d]", path, j)
				if x, ok := p.expr(deref(it), key, ""); ok {
					p.checkExpectation(s, it, key, x)
					exp.Exprs = append(exp.Exprs, x)
				}
			}
		case v != nil && v.Kind == yaml.ScalarNode && v.Tag != "!!null":
			if x, ok := p.expr(v, path, ""); ok {
				p.checkExpectation(s, v, path, x)
				exp.Exprs = append(exp.Exprs, x)
			}
		default:
			p.errorf(v, path, "want what the target must be caught doing, e.g. {duplicates: \"> 0\"}")
			continue
		}
		if len(exp.Exprs) == 0 {
			continue
		}
		out = append(out, exp)
	}
	return out
}
