package explore

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Schedule is one generated scenario in the small shape explore draws and
// shrinks: a few nodes, one load, a list of faults and the invariants. It
// is written as an ordinary scenario file (YAML) and parsed by the
// scenario package, so a schedule runs exactly as `snowchaos run` runs its
// YAML.
type Schedule struct {
	// Name is the scenario's name.
	Name string
	// Seed is the scenario's seed (arrival jitter, routing).
	Seed int64
	// Duration is the run's length.
	Duration time.Duration
	// Nodes are the generator nodes, named a, b, c...
	Nodes []Node
	// Load is the request load.
	Load Load
	// Faults are the timed faults.
	Faults []Fault
	// Target is the target the schedule runs against.
	Target string
	// Invariants are the checks, in the scenario language.
	Invariants []string
}

// Node is one node of a schedule.
type Node struct {
	Name   string
	Worker int64
	// Policy is wait, refuse or logical; "" leaves it to the target.
	Policy string
	// Layout is a preset name or T/N/S[@tick]; "" the default.
	Layout string
	// Epoch is the layout's epoch (RFC 3339); "" the default.
	Epoch string
	// Checkpoint keeps a high-water mark across restarts.
	Checkpoint bool
	// Reserve is the mark's reserve; zero means the default (omitted),
	// NoReserve ("reserve: 0") none.
	Reserve time.Duration
	// MaxLead bounds the logical policy's lead; zero: the default.
	MaxLead time.Duration
	// Lease is "" (none) or "memory".
	Lease string
	// LeaseTTL is the lease's TTL; zero: the default.
	LeaseTTL time.Duration
}

// NoReserve is the Node.Reserve written as "reserve: 0".
const NoReserve = -1

// Load is the load of a schedule: every node gets Rate requests per second
// from Clients clients, each request asking for Batch IDs; a Burst, when
// set, sends Burst.Requests requests to every node within one millisecond.
type Load struct {
	Rate    float64
	Clients int
	Batch   int
	Burst   *Burst
}

// Burst is a millisecond of many requests: at and past the sequence's
// limit.
type Burst struct {
	At       time.Duration
	Requests int
}

// Fault is one timed fault of a schedule: its kind and parameters, its
// instant and the nodes it acts on (none for a fault of the whole lease
// store).
type Fault struct {
	faults.Fault
	At    time.Duration
	Nodes []string
}

// Clone returns a deep copy of s.
func (s *Schedule) Clone() *Schedule {
	c := *s
	c.Nodes = append([]Node(nil), s.Nodes...)
	c.Faults = make([]Fault, len(s.Faults))
	for i, f := range s.Faults {
		f.Nodes = append([]string(nil), f.Nodes...)
		c.Faults[i] = f
	}
	if s.Load.Burst != nil {
		b := *s.Load.Burst
		c.Load.Burst = &b
	}
	c.Invariants = append([]string(nil), s.Invariants...)
	return &c
}

// node returns the named node.
func (s *Schedule) node(name string) (Node, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Scenario parses the schedule's YAML into a scenario; file names it in
// errors.
func (s *Schedule) Scenario(file string) (*scenario.Scenario, error) {
	return scenario.Parse(file, []byte(s.YAML()))
}

// YAML writes the schedule as a scenario file with only the keys it
// needs: each node, fault and stage on one line.
func (s *Schedule) YAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", s.Name)
	fmt.Fprintf(&b, "seed: %d\n", s.Seed)
	fmt.Fprintf(&b, "duration: %s\n", Dur(s.Duration))
	b.WriteString("nodes:\n")
	for _, n := range s.Nodes {
		kv := []string{"name: " + n.Name, fmt.Sprintf("worker: %d", n.Worker)}
		if n.Policy != "" {
			kv = append(kv, "policy: "+n.Policy)
		}
		if n.Layout != "" {
			kv = append(kv, "layout: "+strconv.Quote(n.Layout))
		}
		if n.Epoch != "" {
			kv = append(kv, "epoch: "+n.Epoch)
		}
		if n.Checkpoint {
			kv = append(kv, "checkpoint: on")
		}
		switch {
		case n.Reserve == NoReserve:
			kv = append(kv, "reserve: 0")
		case n.Reserve > 0:
			kv = append(kv, "reserve: "+Dur(n.Reserve))
		}
		if n.MaxLead > 0 {
			kv = append(kv, "max_lead: "+Dur(n.MaxLead))
		}
		if n.Lease != "" {
			kv = append(kv, "lease: "+n.Lease)
			if n.LeaseTTL > 0 {
				kv = append(kv, "lease_ttl: "+Dur(n.LeaseTTL))
			}
		}
		fmt.Fprintf(&b, "  - {%s}\n", strings.Join(kv, ", "))
	}
	b.WriteString("load:\n  per: node\n")
	if s.Load.Clients > 1 {
		fmt.Fprintf(&b, "  clients: %d\n", s.Load.Clients)
	}
	if s.Load.Batch > 1 {
		fmt.Fprintf(&b, "  batch: %d\n", s.Load.Batch)
	}
	rate := Rate(s.Load.Rate)
	if bu := s.Load.Burst; bu != nil {
		b.WriteString("  stages:\n")
		if bu.At > 0 {
			fmt.Fprintf(&b, "    - {rate: %s, for: %s}\n", rate, Dur(bu.At))
		}
		fmt.Fprintf(&b, "    - {rate: %d/ms, for: 1ms}\n", bu.Requests)
		fmt.Fprintf(&b, "    - {rate: %s}\n", rate)
	} else {
		fmt.Fprintf(&b, "  rate: %s\n", rate)
	}
	if len(s.Faults) > 0 {
		b.WriteString("faults:\n")
		for _, f := range s.Faults {
			fmt.Fprintf(&b, "  - {%s}\n", strings.Join(faultKV(f), ", "))
		}
	}
	b.WriteString("invariants:\n")
	for _, inv := range s.Invariants {
		fmt.Fprintf(&b, "  - %s\n", strconv.Quote(inv))
	}
	fmt.Fprintf(&b, "targets: [%s]\n", s.Target)
	return b.String()
}

// faultKV is a fault's keys in the scenario language: at, kind, each
// parameter that is not its absent value, nodes.
func faultKV(f Fault) []string {
	kv := []string{"at: " + Dur(f.At), "kind: " + string(f.Kind)}
	spec, _ := faults.Lookup(f.Kind)
	for _, p := range spec.ParamsIn(faults.InScenario) {
		v := f.Param(p.Name)
		if !p.Required && reflect.DeepEqual(v, faults.Fault{}.Param(p.Name)) {
			continue
		}
		kv = append(kv, p.Name+": "+value(v))
	}
	if len(f.Nodes) > 0 {
		kv = append(kv, "nodes: ["+strings.Join(f.Nodes, ", ")+"]")
	}
	return kv
}

// value writes a parameter's value.
func value(v any) string {
	switch x := v.(type) {
	case time.Duration:
		return Dur(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		if x {
			return "on"
		}
		return "off"
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// Dur writes d exactly in the largest unit that divides it: 2s, 150ms,
// 80500us, 12ns.
func Dur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// Rate writes a per-second rate: 5000/s.
func Rate(r float64) string {
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}
