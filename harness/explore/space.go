package explore

import (
	"slices"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// Space is what explore may generate. The zero value of a field means its
// default (DefaultSpace); a space file narrows it (ParseSpace). Every
// range is inclusive.
type Space struct {
	// Kinds are the fault kinds drawn from; empty: every kind a scenario
	// takes. A target's capabilities narrow them further.
	Kinds []faults.Kind
	// Faults is how many faults a schedule has.
	Faults IntRange
	// Nodes is how many nodes a schedule runs.
	Nodes IntRange
	// Duration is how long a schedule runs.
	Duration DurRange
	// Rate is each node's request rate per second.
	Rate FloatRange
	// Clients is how many clients send to each node.
	Clients IntRange
	// Batch is how many IDs a request asks for; 1..1: single calls only.
	// One schedule in four has batch calls; a node's IDs per second stay
	// under MaxIDRate.
	Batch IntRange
	// Burst is the chance (0 to 1) of a millisecond burst at or past the
	// sequence's limit.
	Burst float64
	// Shift bounds the size of a clock shift (steps, smears, slews, a
	// restart's offset while down, a handoff's lag, store steps); the sign
	// is drawn apart.
	Shift DurRange
	// Span bounds how long a fault lasts (freezes, pauses, down times,
	// outages, clones, smear windows).
	Span DurRange
	// PPM bounds the size of a drift or slew rate.
	PPM FloatRange
	// CrashPoints are the crash points a restart may strike at; empty:
	// every one (faults.CrashPoints).
	CrashPoints []string
	// Layouts are the layouts drawn from (presets or T/N/S[@tick]);
	// empty: every preset.
	Layouts []string
	// Policies are the rewind policies a node of the declared target may
	// have; empty: wait, refuse and logical.
	Policies []string
	// Checkpoint lists the checkpoint settings drawn from; empty: on and
	// off.
	Checkpoint []bool
	// Leases are the lease backends drawn from ("" or "none", "memory");
	// empty: none and memory.
	Leases []string
	// LeaseTTL bounds a lease's TTL.
	LeaseTTL DurRange
	// MaxLead are the logical policy's bounds drawn from; empty: 5ms,
	// 10ms, 50ms and 1s.
	MaxLead []time.Duration
}

// IntRange is an inclusive range of integers.
type IntRange struct{ Min, Max int }

// DurRange is an inclusive range of durations.
type DurRange struct{ Min, Max time.Duration }

// FloatRange is an inclusive range of numbers.
type FloatRange struct{ Min, Max float64 }

// MaxIDRate bounds the IDs per second a node is asked for outside a
// burst (the rate times the batch).
const MaxIDRate = 300_000

// epochs are the epochs a schedule's layout may have besides the default
// one (one schedule in four).
var epochs = []string{"2015-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}

// DefaultSpace is everything explore draws by default: every fault kind,
// one to four faults, one to three nodes, 1 to 3 s at 1,000 to 20,000
// requests per second per node.
func DefaultSpace() Space {
	var ps []string
	for _, l := range generator.Presets() {
		ps = append(ps, l.Name)
	}
	ps = append(ps, "50/13/0@100us") // no sequence field: every ID its own tick
	return Space{
		Kinds:       faults.Kinds(faults.InScenario),
		Faults:      IntRange{1, 4},
		Nodes:       IntRange{1, 3},
		Duration:    DurRange{time.Second, 3 * time.Second},
		Rate:        FloatRange{1000, 20000},
		Clients:     IntRange{1, 4},
		Batch:       IntRange{1, 2000},
		Burst:       0.2,
		Shift:       DurRange{100 * time.Microsecond, 2 * time.Second},
		Span:        DurRange{time.Millisecond, 2 * time.Second},
		PPM:         FloatRange{1, 100_000},
		CrashPoints: faults.CrashPoints(),
		Layouts:     ps,
		Policies:    []string{generator.PolicyWait.String(), generator.PolicyRefuse.String(), generator.PolicyLogical.String()},
		Checkpoint:  []bool{true, false},
		Leases:      []string{"", "memory"},
		LeaseTTL:    DurRange{300 * time.Millisecond, 2 * time.Second},
		MaxLead:     []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, time.Second},
	}
}

// WithDefaults returns s with every unset field taken from DefaultSpace.
func (s Space) WithDefaults() Space {
	d := DefaultSpace()
	if len(s.Kinds) == 0 {
		s.Kinds = d.Kinds
	}
	if s.Faults == (IntRange{}) {
		s.Faults = d.Faults
	}
	if s.Nodes == (IntRange{}) {
		s.Nodes = d.Nodes
	}
	if s.Duration == (DurRange{}) {
		s.Duration = d.Duration
	}
	if s.Rate == (FloatRange{}) {
		s.Rate = d.Rate
	}
	if s.Clients == (IntRange{}) {
		s.Clients = d.Clients
	}
	if s.Batch == (IntRange{}) {
		s.Batch = d.Batch
	}
	if s.Burst < 0 {
		s.Burst = 0
	} else if s.Burst == 0 {
		s.Burst = d.Burst
	}
	if s.Shift == (DurRange{}) {
		s.Shift = d.Shift
	}
	if s.Span == (DurRange{}) {
		s.Span = d.Span
	}
	if s.PPM == (FloatRange{}) {
		s.PPM = d.PPM
	}
	if len(s.CrashPoints) == 0 {
		s.CrashPoints = d.CrashPoints
	}
	if len(s.Layouts) == 0 {
		s.Layouts = d.Layouts
	}
	if len(s.Policies) == 0 {
		s.Policies = d.Policies
	}
	if len(s.Checkpoint) == 0 {
		s.Checkpoint = d.Checkpoint
	}
	if len(s.Leases) == 0 {
		s.Leases = d.Leases
	}
	if s.LeaseTTL == (DurRange{}) {
		s.LeaseTTL = d.LeaseTTL
	}
	if len(s.MaxLead) == 0 {
		s.MaxLead = d.MaxLead
	}
	return s
}

// leasing reports whether the space may give a node a lease.
func (s Space) leasing() bool {
	return slices.ContainsFunc(s.Leases, func(l string) bool { return l == "memory" })
}
