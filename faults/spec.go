package faults

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind names a fault. Specs is the one vocabulary of faults: the scenario
// parser, the admin API, the harness's targets and the metrics' kind label
// all take their kinds, parameters and bounds from it. Adding a fault is
// one Specs entry and its implementation (a Clock method and a case in
// Fault.ApplyTo for a clock fault; the harness's lifecycle for the others).
type Kind string

// Fault kinds.
const (
	// Clock faults: a Clock applies them (Fault.ApplyTo).
	KindStep    Kind = "step"
	KindFreeze  Kind = "freeze"
	KindRelease Kind = "release"
	KindLeap    Kind = "leap"
	KindSmear   Kind = "smear"
	KindSlew    Kind = "slew"
	KindDrift   Kind = "drift"
	KindPause   Kind = "pause"
	KindJitter  Kind = "jitter"
	KindRevert  Kind = "revert"
	// Lifecycle faults: the harness applies them to nodes and the lease
	// store.
	KindRestart     Kind = "restart"
	KindClone       Kind = "clone"
	KindHandoff     Kind = "handoff"
	KindStoreOutage Kind = "store_outage"
	// Store clock faults: the harness applies them to the lease store's
	// own clock (simulated stores only), which decides lease expiry.
	KindStoreStep  Kind = "store_step"
	KindStoreDrift Kind = "store_drift"
	KindStorePause Kind = "store_pause"
)

// Scope is what a fault acts on.
type Scope uint8

// Scopes.
const (
	// ScopeClock: a node's clock; the harness must control it.
	ScopeClock Scope = iota + 1
	// ScopeNode: a node's process or its worker ID (restart, clone,
	// handoff).
	ScopeNode
	// ScopeStore: the lease store (an outage, a partition, or a fault of
	// its own clock).
	ScopeStore
)

// Where says which interface takes a fault kind or parameter.
type Where uint8

// Interfaces.
const (
	// InScenario: scenario files (harness/scenario).
	InScenario Where = 1 << iota
	// InAdmin: the node's admin API (POST /admin/v1/faults).
	InAdmin
	// Both interfaces.
	InBoth = InScenario | InAdmin
)

// ParamType is a parameter's type.
type ParamType string

// Parameter types.
const (
	// ParamDuration is a duration: a Go duration string ("-150ms"), or
	// integer nanoseconds in JSON.
	ParamDuration ParamType = "duration"
	// ParamPPM is a rate in parts per million.
	ParamPPM ParamType = "ppm"
	// ParamTime is an RFC 3339 instant.
	ParamTime ParamType = "time"
	// ParamSeed is an integer in [0, 2^64-1].
	ParamSeed ParamType = "seed"
	// ParamBool is on/off (true/false).
	ParamBool ParamType = "bool"
	// ParamChoice is one of Param.Choices.
	ParamChoice ParamType = "choice"
)

// Bounds of fault parameters: they keep a fault within what a test means
// and a node can recover from. The fault clock accepts any value (it
// saturates).
const (
	// MaxOffset bounds every wall-clock shift a fault asks for and the
	// clock's offset a step, smear or slew may leave it at: a year.
	MaxOffset = 366 * 24 * time.Hour
	// MaxSpan bounds how long a fault lasts: a year.
	MaxSpan = 366 * 24 * time.Hour
	// MaxJitter bounds a jitter's max: an hour.
	MaxJitter = time.Hour
	// MaxPPM bounds a slew's or drift's rate: 1e6 ppm (the wall runs at
	// twice, or stops at zero times, the base rate).
	MaxPPM = 1e6
	// PPMResolution is the fault clock's resolution of a rate (it keeps
	// rates in parts per billion): a rate that is not 0 must be at least
	// this in magnitude, since a smaller one would have no effect (a
	// drift of 1e-300 ppm would be accepted and never listed).
	PPMResolution = 0.001
	// MaxListed bounds how many leaps and smears may be in force at once
	// on a node's clock (each is listed in Clock.Active until a revert).
	MaxListed = 256
)

// Param describes one parameter of a fault kind.
type Param struct {
	// Name is the key, in scenario files and admin bodies alike.
	Name string
	// Type is its type.
	Type ParamType
	// Required: the kind needs it.
	Required bool
	// NonZero: zero is refused (a step by 0 does nothing).
	NonZero bool
	// Where says which interfaces take it.
	Where Where
	// Min and Max bound a ParamDuration, inclusive; for a ParamTime, Max
	// bounds its distance from the clock's now (either side).
	Min, Max time.Duration
	// MinPPM and MaxPPM bound a ParamPPM, inclusive.
	MinPPM, MaxPPM float64
	// Choices are a ParamChoice's values.
	Choices []string
	// Meaning says what the value does and what a special value means.
	Meaning string
}

// Bounds describes the parameter's accepted range in words.
func (p Param) Bounds() string {
	nz := ""
	if p.NonZero {
		nz = ", not 0"
	}
	switch p.Type {
	case ParamDuration:
		return "[" + p.Min.String() + ", " + p.Max.String() + "]" + nz
	case ParamPPM:
		small := ", at least " + fmtFloat(PPMResolution) + " from 0"
		if !p.NonZero {
			small = ", 0 or" + small[1:]
		}
		return "[" + fmtFloat(p.MinPPM) + ", " + fmtFloat(p.MaxPPM) + "]" + small
	case ParamTime:
		return "within " + p.Max.String() + " of the clock's now"
	case ParamBool:
		return "on or off"
	case ParamChoice:
		return "one of " + strings.Join(p.Choices, ", ")
	}
	return "any"
}

// CheckDuration reports a duration outside the parameter's bounds; the
// error names the parameter, the value and the bound.
func (p Param) CheckDuration(d time.Duration) error {
	if d < p.Min || d > p.Max || (p.NonZero && d == 0) {
		return fmt.Errorf("%q %v is out of range %s", p.Name, d, p.Bounds())
	}
	return nil
}

// CheckChoice reports a value that is not one of the parameter's
// choices.
func (p Param) CheckChoice(v string) error {
	if !slices.Contains(p.Choices, v) {
		return fmt.Errorf("%q %q is not %s", p.Name, v, p.Bounds())
	}
	return nil
}

// CheckPPM reports a rate outside the parameter's bounds, and one that is
// not 0 but below the fault clock's resolution (PPMResolution), which
// would have no effect: the one rule for every interface.
func (p Param) CheckPPM(v float64) error {
	if math.IsNaN(v) || v < p.MinPPM || v > p.MaxPPM || (p.NonZero && v == 0) {
		return fmt.Errorf("%q %v is out of range %s", p.Name, v, p.Bounds())
	}
	if v != 0 && math.Abs(v) < PPMResolution {
		return fmt.Errorf("%q %v is below the fault clock's resolution of %v ppm: it would have no effect (want %s)", p.Name, v, PPMResolution, p.Bounds())
	}
	return nil
}

// Check reports a value outside the parameter's bounds (a time's bound
// depends on the clock's now, which the caller checks). v must have the
// Go type of the parameter's type (ParamType.Go); another type is an
// error.
func (p Param) Check(v any) error {
	if reflect.TypeOf(v) != p.Type.Go() {
		return fmt.Errorf("%q takes a %s, not %T", p.Name, p.Type, v)
	}
	switch p.Type {
	case ParamDuration:
		return p.CheckDuration(v.(time.Duration))
	case ParamPPM:
		return p.CheckPPM(v.(float64))
	case ParamChoice:
		return p.CheckChoice(v.(string))
	}
	return nil
}

// Go returns the Go type that holds a value of the type: time.Duration,
// float64, time.Time, uint64, bool or string.
func (t ParamType) Go() reflect.Type {
	switch t {
	case ParamDuration:
		return reflect.TypeFor[time.Duration]()
	case ParamPPM:
		return reflect.TypeFor[float64]()
	case ParamTime:
		return reflect.TypeFor[time.Time]()
	case ParamSeed:
		return reflect.TypeFor[uint64]()
	case ParamBool:
		return reflect.TypeFor[bool]()
	}
	return reflect.TypeFor[string]()
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Spec describes one fault kind.
type Spec struct {
	// Kind is the kind's name.
	Kind Kind
	// Scope is what it acts on.
	Scope Scope
	// Where says which interfaces take it.
	Where Where
	// Effect says what the fault does.
	Effect string
	// Params are the parameters it takes; no other is allowed.
	Params []Param
	// OneOf, when set, names parameters of which exactly one is given.
	OneOf []string
	// Forward: the fault can move the wall clock ahead, so with a
	// checkpoint it moves the persisted mark ahead too.
	Forward bool
	// Example is an admin request body that takes this kind ("" when the
	// admin API does not).
	Example string
}

// In reports whether interface w takes the kind.
func (s Spec) In(w Where) bool { return s.Where&w != 0 }

// Param returns the parameter called name that interface w takes.
func (s Spec) Param(name string, w Where) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name && p.Where&w != 0 {
			return p, true
		}
	}
	return Param{}, false
}

// ParamsIn returns the parameters interface w takes, in table order.
func (s Spec) ParamsIn(w Where) []Param {
	var out []Param
	for _, p := range s.Params {
		if p.Where&w != 0 {
			out = append(out, p)
		}
	}
	return out
}

// shift is a wall-clock shift parameter ("by").
func shift(meaning string) Param {
	return Param{Name: "by", Type: ParamDuration, Required: true, NonZero: true, Where: InBoth, Min: -MaxOffset, Max: MaxOffset, Meaning: meaning}
}

// specs is the vocabulary, in the order documents list it.
var specs = []Spec{
	{Kind: KindStep, Scope: ScopeClock, Where: InBoth, Forward: true,
		Effect:  "the wall clock moves by `by` at once, as an NTP step",
		Params:  []Param{shift("how far; negative: back")},
		Example: `{"kind":"step","by":"-150ms"}`},
	{Kind: KindFreeze, Scope: ScopeClock, Where: InBoth,
		Effect:  "the wall clock stands still (the monotonic clock runs on)",
		Params:  []Param{{Name: "for", Type: ParamDuration, Where: InBoth, Max: MaxSpan, Meaning: "how long; 0 or absent: until released (admin) or reverted"}},
		Example: `{"kind":"freeze","for":"2s"}`},
	{Kind: KindRelease, Scope: ScopeClock, Where: InAdmin,
		Effect: "ends a freeze or pause in progress, now", Example: `{"kind":"release"}`},
	{Kind: KindLeap, Scope: ScopeClock, Where: InBoth,
		Effect: "a leap second is inserted: when the wall reaches the instant it steps back 1s (in a scenario, the instant is the fault's `at`)",
		Params: []Param{
			{Name: "at", Type: ParamTime, Where: InAdmin, Max: MaxOffset, Meaning: "the instant (RFC 3339, normally a UTC midnight); in the past: at once"},
			{Name: "in", Type: ParamDuration, Where: InAdmin, Max: MaxOffset, Meaning: "the instant as a delay from the clock's now"},
		},
		OneOf: []string{"at", "in"}, Example: `{"kind":"leap","in":"30s"}`},
	{Kind: KindSmear, Scope: ScopeClock, Where: InBoth, Forward: true,
		Effect: "the wall clock moves by `by` linearly over `window`, as a leap smear",
		Params: []Param{
			shift("how far in all; negative: back (never faster than the clock runs)"),
			{Name: "window", Type: ParamDuration, Required: true, Where: InBoth, Min: 1, Max: MaxSpan, Meaning: "over how long"},
		},
		Example: `{"kind":"smear","by":"-1s","window":"24h"}`},
	{Kind: KindSlew, Scope: ScopeClock, Where: InBoth, Forward: true,
		Effect: "the wall clock moves by `by` at a bounded rate, as adjtime",
		Params: []Param{
			shift("how far in all; negative: back"),
			{Name: "ppm", Type: ParamPPM, Where: InBoth, MinPPM: 0, MaxPPM: MaxPPM, Meaning: "the rate; 0 or absent: 500 (the kernel's adjtime limit)"},
		},
		Example: `{"kind":"slew","by":"-200ms","ppm":500}`},
	{Kind: KindDrift, Scope: ScopeClock, Where: InBoth, Forward: true,
		Effect:  "the wall clock runs fast (or slow) by a constant rate, without end",
		Params:  []Param{{Name: "ppm", Type: ParamPPM, Required: true, NonZero: true, Where: InBoth, MinPPM: -MaxPPM, MaxPPM: MaxPPM, Meaning: "the rate error; negative: slow"}},
		Example: `{"kind":"drift","ppm":-50}`},
	{Kind: KindPause, Scope: ScopeClock, Where: InBoth,
		Effect:  "a VM pause: wall and monotonic clocks stand still, then the wall jumps to the base time",
		Params:  []Param{{Name: "for", Type: ParamDuration, Required: true, Where: InBoth, Min: 1, Max: MaxSpan, Meaning: "how long"}},
		Example: `{"kind":"pause","for":"3s"}`},
	{Kind: KindJitter, Scope: ScopeClock, Where: InAdmin, Forward: true,
		Effect: "every wall reading gets independent noise in [0, max]",
		Params: []Param{
			{Name: "max", Type: ParamDuration, Required: true, Where: InAdmin, Min: 0, Max: MaxJitter, Meaning: "the noise bound; 0 removes the jitter"},
			{Name: "seed", Type: ParamSeed, Where: InAdmin, Meaning: "the noise's random seed (absent: 0)"},
		},
		Example: `{"kind":"jitter","max":"2ms","seed":42}`},
	{Kind: KindRevert, Scope: ScopeClock, Where: InScenario,
		Effect: "every clock fault is removed (the admin API: DELETE /admin/v1/faults)"},
	{Kind: KindRestart, Scope: ScopeNode, Where: InScenario,
		Effect: "the node loses its memory (a crash, or kill -9) and comes back on the same host",
		Params: []Param{
			{Name: "for", Type: ParamDuration, Where: InScenario, Max: MaxSpan, Meaning: "how long it stays down; 0 or absent: back at once"},
			{Name: "keep_checkpoint", Type: ParamBool, Where: InScenario, Meaning: "the host's disk keeps the mark (absent: on)"},
			{Name: "offset_while_down", Type: ParamDuration, Where: InScenario, Min: -MaxOffset, Max: MaxOffset, Meaning: "the host's clock is stepped by this much while the node is down"},
			{Name: "graceful", Type: ParamBool, Where: InScenario, Meaning: "a planned stop instead of a crash: the generator closes, persisting the last issued tick as its mark"},
			{Name: "point", Type: ParamChoice, Where: InScenario, Choices: CrashPoints(),
				Meaning: "where the crash strikes inside a call, at or after `at` (absent: between calls): " + crashPointsMeaning},
		}},
	{Kind: KindClone, Scope: ScopeNode, Where: InScenario,
		Effect: "a second node with the same configuration (worker ID) starts on another host",
		Params: []Param{
			{Name: "for", Type: ParamDuration, Where: InScenario, Max: MaxSpan, Meaning: "how long the clone runs; 0 or absent: to the end"},
			{Name: "same_holder", Type: ParamBool, Where: InScenario, Meaning: "the clone has the original's lease holder identity (a copied pod name)"},
		}},
	{Kind: KindHandoff, Scope: ScopeNode, Where: InScenario,
		Effect: "the node's worker ID moves to a new host whose clock is behind",
		Params: []Param{
			{Name: "behind", Type: ParamDuration, Where: InScenario, Max: MaxOffset, Meaning: "how far the new host's clock is behind"},
			{Name: "gap", Type: ParamDuration, Where: InScenario, Max: MaxSpan, Meaning: "how long no host runs the node"},
			{Name: "crash", Type: ParamBool, Where: InScenario, Meaning: "the old host is killed (no final mark, the lease left to expire) instead of stopping gracefully"},
		}},
	{Kind: KindStoreOutage, Scope: ScopeStore, Where: InScenario,
		Effect: "the lease store is unreachable: for every node, or (with nodes) for those nodes' hosts only, a partition",
		Params: []Param{
			{Name: "for", Type: ParamDuration, Required: true, Where: InScenario, Min: 1, Max: MaxSpan, Meaning: "how long"},
			{Name: "direction", Type: ParamChoice, Where: InScenario, Choices: []string{"both", "outbound", "inbound"},
				Meaning: "a partition's direction, seen from its nodes: both (default), outbound (what they send the store is lost) or inbound (what the store sends them is lost: their requests take effect, the answers never arrive)"},
			{Name: "hang", Type: ParamBool, Where: InScenario, Meaning: "calls get no answer until the caller's timeout (packets dropped silently) instead of failing at once (absent: off)"},
		}},
	{Kind: KindStoreStep, Scope: ScopeStore, Where: InScenario,
		Effect: "the lease store's clock, which decides lease expiry, moves by `by` at once",
		Params: []Param{shift("how far; positive: leases expire early")}},
	{Kind: KindStoreDrift, Scope: ScopeStore, Where: InScenario,
		Effect: "the lease store's clock runs fast (or slow) by a constant rate, without end: leases expire early (or late) by the nodes' clocks",
		Params: []Param{{Name: "ppm", Type: ParamPPM, Required: true, NonZero: true, Where: InScenario, MinPPM: -MaxPPM, MaxPPM: MaxPPM, Meaning: "the rate error; negative: slow"}}},
	{Kind: KindStorePause, Scope: ScopeStore, Where: InScenario,
		Effect: "a VM pause of the lease store: its clock stands still and calls hang until the caller's timeout, then its clock jumps to the base time",
		Params: []Param{{Name: "for", Type: ParamDuration, Required: true, Where: InScenario, Min: 1, Max: MaxSpan, Meaning: "how long"}}},
}

// Crash points: where a restart's crash strikes inside a call (its point
// parameter). Each names a moment of the checkpoint's write of a new
// mark; what the host's disk keeps is what was synced.
const (
	// PointBeforeWrite: the new mark is not yet written; the disk keeps
	// the previous one.
	PointBeforeWrite = "before_write"
	// PointBeforeSync: the new mark is written but not synced; the crash
	// loses the write, the disk keeps the previous mark.
	PointBeforeSync = "before_sync"
	// PointAfterSync: the new mark is durable; the call that reserved it
	// has not issued (between reserving and issuing).
	PointAfterSync = "after_sync"
	// PointMidBatch: before the write of a mark that a batch call needs
	// after it has already taken some IDs in earlier ticks.
	PointMidBatch = "mid_batch"
	// PointNewTick: a call has taken IDs in a tick later than the last
	// one issued before it, and has not answered: what the requests in
	// flight take in that tick must already be covered by the mark.
	PointNewTick = "new_tick"
)

const crashPointsMeaning = "before_write (the new mark not written), before_sync (written, not synced: lost), " +
	"after_sync (durable, the IDs not yet issued), mid_batch (before the write a batch needs after its first IDs) " +
	"or new_tick (a call has taken IDs in a new tick, not yet answered); " +
	"requests in flight at that moment are served first, without waiting, and what they got was issued; " +
	"the call that reached the point never answers"

// CrashPoints returns the crash points, in the order of a call.
func CrashPoints() []string {
	return []string{PointBeforeWrite, PointBeforeSync, PointAfterSync, PointMidBatch, PointNewTick}
}

// Specs returns the fault vocabulary, in document order. The slices are
// copies.
func Specs() []Spec {
	out := slices.Clone(specs)
	for i := range out {
		out[i].Params = slices.Clone(out[i].Params)
		out[i].OneOf = slices.Clone(out[i].OneOf)
		for j := range out[i].Params {
			out[i].Params[j].Choices = slices.Clone(out[i].Params[j].Choices)
		}
	}
	return out
}

// Lookup returns the spec of kind k.
func Lookup(k Kind) (Spec, bool) {
	for _, s := range specs {
		if s.Kind == k {
			return s, true
		}
	}
	return Spec{}, false
}

// Kinds returns the kinds interface w takes, in document order.
func Kinds(w Where) []Kind {
	var out []Kind
	for _, s := range specs {
		if s.In(w) {
			out = append(out, s.Kind)
		}
	}
	return out
}

// KindsOf returns the kinds of scope s that interface w takes, in
// document order: the capability list. KindsOf(ScopeClock, InScenario) are
// the clock faults a scenario aims at a node, which a target that controls
// a node's clock takes; KindsOf(ScopeStore, InScenario) act on the lease
// store.
func KindsOf(s Scope, w Where) []Kind {
	var out []Kind
	for _, sp := range specs {
		if sp.Scope == s && sp.In(w) {
			out = append(out, sp.Kind)
		}
	}
	return out
}

// KindNames joins the kinds interface w takes: "step, freeze, ... or x".
func KindNames(w Where) string {
	var names []string
	for _, k := range Kinds(w) {
		names = append(names, string(k))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// StoreClock returns the clock fault a store clock fault applies to the
// lease store's clock (store_step: step, store_drift: drift, store_pause:
// pause); false for every other kind.
func (k Kind) StoreClock() (Kind, bool) {
	switch k {
	case KindStoreStep:
		return KindStep, true
	case KindStoreDrift:
		return KindDrift, true
	case KindStorePause:
		return KindPause, true
	}
	return "", false
}

// Clock reports whether the kind acts on a node's clock.
func (k Kind) Clock() bool {
	s, ok := Lookup(k)
	return ok && s.Scope == ScopeClock
}
