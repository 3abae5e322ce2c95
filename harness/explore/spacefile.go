package explore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Bounds of a space file's values: every number is bounded.
const (
	MaxFaults   = 16
	MaxNodes    = 8
	MaxDuration = time.Minute
	MaxRate     = 1e6
	MaxClients  = 64
	MaxBatch    = 10_000
	MaxShift    = time.Hour
	MaxSpan     = time.Hour
	MaxLeaseTTL = time.Hour
)

// spaceKeys are a space file's keys, in document order.
var spaceKeys = []string{"kinds", "faults", "nodes", "duration", "rate", "clients", "batch", "burst", "shift", "span", "ppm",
	"crash_points", "layouts", "policies", "checkpoint", "leases", "lease_ttl", "max_lead"}

// ParseSpace reads a space file: a YAML mapping whose keys narrow
// DefaultSpace (a key left out keeps its default). Ranges are written
// "min-max" or one value ("1s-3s", "2"), lists as YAML sequences:
//
//	kinds: [step, restart]     # fault kinds
//	faults: 1-4                # faults per schedule (0 to 16)
//	nodes: 1-3                 # 1 to 8
//	duration: 1s-3s            # 10ms to 1m
//	rate: 1000-20000           # requests per second per node (1 to 1e6)
//	clients: 1-4               # per node (1 to 64)
//	batch: 1-64                # IDs per request (1 to 10000)
//	burst: 0.2                 # chance of a burst at the sequence limit (0 to 1)
//	shift: 100us-2s            # size of clock shifts (up to 1h)
//	span: 1ms-2s               # how long faults last (up to 1h)
//	ppm: 1-100000              # drift and slew rates (up to 1e6)
//	crash_points: [new_tick]   # a restart's crash points
//	layouts: ["41/10/12"]      # presets or T/N/S[@tick]
//	policies: [wait, logical]  # for the inprocess target
//	checkpoint: [on]           # on, off
//	leases: [none, memory]
//	lease_ttl: 1s-10s          # up to 1h
//	max_lead: [10ms, 1s]       # the logical policy's bounds
//
// Errors are a scenario.ErrorList: each names file, line and key.
func ParseSpace(file string, data []byte) (sp Space, err error) {
	defer func() {
		if r := recover(); r != nil {
			sp, err = Space{}, scenario.ErrorList{{File: file, Line: 1, Msg: fmt.Sprintf("cannot parse: %v", r)}}
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Space{}, nil // an empty file: the default space
		}
		return Space{}, scenario.ErrorList{{File: file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	p := &spaceParser{file: file}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return Space{}, nil
		}
		p.errorf(root, "", "a space file is a mapping of keys (%s)", strings.Join(spaceKeys, ", "))
		return Space{}, p.errs.Err()
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		if seen[key] {
			p.errorf(k, key, "repeated: give each key once")
			continue
		}
		seen[key] = true
		p.key(&sp, key, k, v)
	}
	return sp, p.errs.Err()
}

type spaceParser struct {
	file string
	errs scenario.ErrorList
}

func (p *spaceParser) errorf(n *yaml.Node, key, format string, a ...any) {
	if len(p.errs) >= 20 {
		return
	}
	p.errs = append(p.errs, &scenario.Error{File: p.file, Line: max(n.Line, 1), Column: n.Column, Key: key, Msg: fmt.Sprintf(format, a...)})
}

// key reads one key's value into sp.
func (p *spaceParser) key(sp *Space, key string, k, v *yaml.Node) {
	switch key {
	case "kinds":
		for _, s := range p.list(key, v) {
			kd := faults.Kind(s.Value)
			if spec, ok := faults.Lookup(kd); !ok || !spec.In(faults.InScenario) {
				p.errorf(s, key, "unknown fault kind %q (known: %s)", s.Value, faults.KindNames(faults.InScenario))
				continue
			}
			sp.Kinds = append(sp.Kinds, kd)
		}
		if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			p.errorf(v, key, "empty: name at least one kind (or leave the key out for every kind)")
		}
	case "faults":
		sp.Faults = p.intRange(key, v, 0, MaxFaults)
	case "nodes":
		sp.Nodes = p.intRange(key, v, 1, MaxNodes)
	case "clients":
		sp.Clients = p.intRange(key, v, 1, MaxClients)
	case "batch":
		sp.Batch = p.intRange(key, v, 1, MaxBatch)
	case "duration":
		sp.Duration = p.durRange(key, v, 10*time.Millisecond, MaxDuration)
	case "shift":
		sp.Shift = p.durRange(key, v, time.Microsecond, MaxShift)
	case "span":
		sp.Span = p.durRange(key, v, time.Microsecond, MaxSpan)
	case "lease_ttl":
		sp.LeaseTTL = p.durRange(key, v, 100*time.Millisecond, MaxLeaseTTL)
	case "rate":
		sp.Rate = p.floatRange(key, v, 1, MaxRate)
	case "ppm":
		sp.PPM = p.floatRange(key, v, faults.PPMResolution, faults.MaxPPM)
	case "burst":
		if !p.scalar(key, v) {
			return
		}
		switch v.Value {
		case "off", "false", "no":
			sp.Burst = -1
			return
		case "on", "true", "yes":
			sp.Burst = 1
			return
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			p.errorf(v, key, "want a chance in [0, 1] (or on, off), found %q", v.Value)
			return
		}
		sp.Burst = f
		if f == 0 {
			sp.Burst = -1
		}
	case "crash_points":
		for _, s := range p.list(key, v) {
			if !slices.Contains(faults.CrashPoints(), s.Value) {
				p.errorf(s, key, "unknown crash point %q (known: %s)", s.Value, strings.Join(faults.CrashPoints(), ", "))
				continue
			}
			sp.CrashPoints = append(sp.CrashPoints, s.Value)
		}
	case "layouts":
		for _, s := range p.list(key, v) {
			if _, err := generator.ParseLayout(s.Value); err != nil {
				p.errorf(s, key, "%v", err)
				continue
			}
			sp.Layouts = append(sp.Layouts, s.Value)
		}
	case "policies":
		for _, s := range p.list(key, v) {
			if _, err := generator.ParsePolicy(s.Value); err != nil {
				p.errorf(s, key, "want wait, refuse or logical, found %q", s.Value)
				continue
			}
			sp.Policies = append(sp.Policies, s.Value)
		}
	case "checkpoint":
		for _, s := range p.list(key, v) {
			switch s.Value {
			case "on", "true", "yes":
				sp.Checkpoint = append(sp.Checkpoint, true)
			case "off", "false", "no":
				sp.Checkpoint = append(sp.Checkpoint, false)
			default:
				p.errorf(s, key, "want on or off, found %q", s.Value)
			}
		}
	case "leases":
		for _, s := range p.list(key, v) {
			switch s.Value {
			case "none":
				sp.Leases = append(sp.Leases, "")
			case "memory":
				sp.Leases = append(sp.Leases, "memory")
			default:
				p.errorf(s, key, "want none or memory (explore runs simulated leases), found %q", s.Value)
			}
		}
	case "max_lead":
		for _, s := range p.list(key, v) {
			d, err := time.ParseDuration(s.Value)
			if err != nil || d < time.Microsecond || d > time.Hour {
				p.errorf(s, key, "want a duration from 1us to 1h, found %q", s.Value)
				continue
			}
			sp.MaxLead = append(sp.MaxLead, d)
		}
	default:
		p.errorf(k, key, "unknown key%s (known: %s)", suggest(key), strings.Join(spaceKeys, ", "))
	}
}

// suggest names the known key nearest to key, if one is near.
func suggest(key string) string {
	best, bd := "", 3
	for _, k := range spaceKeys {
		if d := distance(key, k); d < bd {
			best, bd = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// distance is the edit distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
}

func (p *spaceParser) scalar(key string, v *yaml.Node) bool {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		p.errorf(v, key, "want a value, found %s", nodeKind(v))
		return false
	}
	return true
}

// list returns the scalars of sequence v.
func (p *spaceParser) list(key string, v *yaml.Node) []*yaml.Node {
	if v.Kind != yaml.SequenceNode {
		p.errorf(v, key, "want a list such as [a, b], found %s", nodeKind(v))
		return nil
	}
	var out []*yaml.Node
	for i, s := range v.Content {
		if s.Kind != yaml.ScalarNode {
			p.errorf(s, fmt.Sprintf("%s[%d]", key, i), "want a value, found %s", nodeKind(s))
			continue
		}
		out = append(out, s)
	}
	if len(out) > 64 {
		p.errorf(v, key, "%d entries: at most 64", len(out))
		return nil
	}
	return out
}

func nodeKind(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if v.Tag == "!!null" {
		return "nothing"
	}
	return strconv.Quote(v.Value)
}

// bounds splits "a-b" (or "a") into its two ends.
func (p *spaceParser) bounds(key string, v *yaml.Node) (string, string, bool) {
	if !p.scalar(key, v) {
		return "", "", false
	}
	s := strings.TrimSpace(v.Value)
	if a, b, ok := strings.Cut(s, "-"); ok && a != "" {
		return strings.TrimSpace(a), strings.TrimSpace(b), true
	}
	return s, s, true
}

func (p *spaceParser) intRange(key string, v *yaml.Node, lo, hi int) IntRange {
	a, b, ok := p.bounds(key, v)
	if !ok {
		return IntRange{}
	}
	x, e1 := strconv.Atoi(a)
	y, e2 := strconv.Atoi(b)
	switch {
	case e1 != nil || e2 != nil:
		p.errorf(v, key, "want a whole number or a range min-max, found %q", v.Value)
	case x < lo || y > hi || x > y:
		p.errorf(v, key, "want %d <= min <= max <= %d, found %q", lo, hi, v.Value)
	case y == 0:
		p.errorf(v, key, "want a max of at least 1, found %q", v.Value)
	default:
		return IntRange{x, y}
	}
	return IntRange{}
}

func (p *spaceParser) durRange(key string, v *yaml.Node, lo, hi time.Duration) DurRange {
	a, b, ok := p.bounds(key, v)
	if !ok {
		return DurRange{}
	}
	x, e1 := time.ParseDuration(a)
	y, e2 := time.ParseDuration(b)
	switch {
	case e1 != nil || e2 != nil:
		p.errorf(v, key, "want a duration or a range min-max such as 1ms-2s, found %q", v.Value)
	case x < lo || y > hi || x > y:
		p.errorf(v, key, "want %s <= min <= max <= %s, found %q", lo, hi, v.Value)
	default:
		return DurRange{x, y}
	}
	return DurRange{}
}

func (p *spaceParser) floatRange(key string, v *yaml.Node, lo, hi float64) FloatRange {
	a, b, ok := p.bounds(key, v)
	if !ok {
		return FloatRange{}
	}
	x, e1 := strconv.ParseFloat(a, 64)
	y, e2 := strconv.ParseFloat(b, 64)
	switch {
	case e1 != nil || e2 != nil || math.IsNaN(x) || math.IsNaN(y):
		p.errorf(v, key, "want a number or a range min-max, found %q", v.Value)
	case x < lo || y > hi || x > y:
		p.errorf(v, key, "want %g <= min <= max <= %g, found %q", lo, hi, v.Value)
	default:
		return FloatRange{x, y}
	}
	return FloatRange{}
}
