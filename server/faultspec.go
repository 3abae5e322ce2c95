package server

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// Bounds of the admin API's fault parameters. The fault clock accepts any
// value (it saturates); these keep an injected fault within what a test
// means and a node can recover from.
const (
	// MaxFaultOffset bounds every wall-clock shift a fault asks for (a
	// step's, smear's or slew's by; a leap's distance from now) and the
	// clock's offset a step, smear or slew may leave it at: a year.
	MaxFaultOffset = 366 * 24 * time.Hour
	// MaxFaultSpan bounds how long a freeze, pause or smear lasts: a year.
	MaxFaultSpan = 366 * 24 * time.Hour
	// MaxJitter bounds a jitter's max: an hour.
	MaxJitter = time.Hour
	// MaxPPM bounds a slew's or drift's rate: 1e6 ppm (the wall runs at
	// twice, or stops at zero times, the base rate).
	MaxPPM = 1e6
	// MaxListedFaults bounds how many leaps and smears may be in force at
	// once (each is listed in FaultState.Active until a revert).
	MaxListedFaults = 256
)

// ParamType is the JSON type of a fault parameter.
type ParamType string

// Parameter types.
const (
	// ParamDuration is a Go duration string ("-150ms") or integer
	// nanoseconds.
	ParamDuration ParamType = "duration"
	// ParamPPM is a JSON number, parts per million.
	ParamPPM ParamType = "ppm"
	// ParamTime is an RFC 3339 time string.
	ParamTime ParamType = "time"
	// ParamSeed is a JSON integer in [0, 2^64-1].
	ParamSeed ParamType = "seed"
)

// FaultParam describes one parameter of a fault kind and its bounds.
type FaultParam struct {
	// Name is the JSON key.
	Name string
	// Type is the JSON type.
	Type ParamType
	// Required: the kind needs it.
	Required bool
	// Min and Max bound a ParamDuration, inclusive; for a ParamTime, Max
	// bounds its distance from the clock's wall now (either side).
	Min, Max time.Duration
	// MinPPM and MaxPPM bound a ParamPPM, inclusive.
	MinPPM, MaxPPM float64
	// Meaning says what the value does, and what a special value means.
	Meaning string
}

// Bounds describes the parameter's accepted range in words.
func (p FaultParam) Bounds() string {
	switch p.Type {
	case ParamDuration:
		return "[" + p.Min.String() + ", " + p.Max.String() + "]"
	case ParamPPM:
		return "[" + fmtFloat(p.MinPPM) + ", " + fmtFloat(p.MaxPPM) + "]"
	case ParamTime:
		return "within " + p.Max.String() + " of the clock's now"
	}
	return "any"
}

// FaultKind describes one kind of fault the admin API injects.
type FaultKind struct {
	// Kind is the "kind" value.
	Kind string
	// Effect says what the fault does to the node's clock.
	Effect string
	// Params are the parameters it takes; no other is allowed.
	Params []FaultParam
	// OneOf, when set, names parameters of which exactly one is given.
	OneOf []string
	// Forward: the fault can move the wall clock ahead, so with a
	// checkpoint it moves the persisted mark (see FaultState.Warnings).
	Forward bool
	// Example is a request body Validate accepts.
	Example string
}

// shift is a wall-clock shift parameter ("by").
func shift(required bool, meaning string) FaultParam {
	return FaultParam{Name: "by", Type: ParamDuration, Required: required, Min: -MaxFaultOffset, Max: MaxFaultOffset, Meaning: meaning}
}

// faultKinds is the admin API's fault vocabulary: what Validate accepts,
// FaultKinds returns and docs/http-api.md documents.
var faultKinds = []FaultKind{
	{Kind: faults.KindStep, Effect: "the wall clock moves by `by` at once, as an NTP step",
		Params:  []FaultParam{shift(true, "how far; negative: back")},
		Forward: true, Example: `{"kind":"step","by":"-150ms"}`},
	{Kind: faults.KindFreeze, Effect: "the wall clock stands still (the monotonic clock runs on)",
		Params:  []FaultParam{{Name: "for", Type: ParamDuration, Max: MaxFaultSpan, Meaning: "how long; 0 or absent: until `release`"}},
		Example: `{"kind":"freeze","for":"2s"}`},
	{Kind: KindRelease, Effect: "ends a freeze or pause in progress, now", Example: `{"kind":"release"}`},
	{Kind: faults.KindLeap, Effect: "a leap second is inserted: when the wall reaches the instant it steps back 1s",
		Params: []FaultParam{
			{Name: "at", Type: ParamTime, Max: MaxFaultOffset, Meaning: "the instant (RFC 3339, normally a UTC midnight); in the past: at once"},
			{Name: "in", Type: ParamDuration, Max: MaxFaultOffset, Meaning: "the instant as a delay from the clock's now"},
		},
		OneOf: []string{"at", "in"}, Example: `{"kind":"leap","in":"30s"}`},
	{Kind: faults.KindSmear, Effect: "the wall clock moves by `by` linearly over `window`, as a leap smear",
		Params: []FaultParam{
			shift(true, "how far in all; negative: back (never faster than the clock runs)"),
			{Name: "window", Type: ParamDuration, Required: true, Min: 1, Max: MaxFaultSpan, Meaning: "over how long"},
		},
		Forward: true, Example: `{"kind":"smear","by":"-1s","window":"24h"}`},
	{Kind: faults.KindSlew, Effect: "the wall clock moves by `by` at a bounded rate, as adjtime",
		Params: []FaultParam{
			shift(true, "how far in all; negative: back"),
			{Name: "ppm", Type: ParamPPM, MinPPM: 0, MaxPPM: MaxPPM, Meaning: "the rate; 0 or absent: 500"},
		},
		Forward: true, Example: `{"kind":"slew","by":"-200ms","ppm":500}`},
	{Kind: faults.KindDrift, Effect: "the wall clock runs fast (or slow) by a constant rate, without end",
		Params:  []FaultParam{{Name: "ppm", Type: ParamPPM, Required: true, MinPPM: -MaxPPM, MaxPPM: MaxPPM, Meaning: "the rate error; negative: slow; 0 stops it"}},
		Forward: true, Example: `{"kind":"drift","ppm":-50}`},
	{Kind: faults.KindPause, Effect: "a VM pause: wall and monotonic clocks stand still, then the wall jumps to the base time",
		Params:  []FaultParam{{Name: "for", Type: ParamDuration, Required: true, Min: 1, Max: MaxFaultSpan, Meaning: "how long"}},
		Example: `{"kind":"pause","for":"3s"}`},
	{Kind: faults.KindJitter, Effect: "every wall reading gets independent noise in [0, max]",
		Params: []FaultParam{
			{Name: "max", Type: ParamDuration, Required: true, Min: 0, Max: MaxJitter, Meaning: "the noise bound; 0 removes the jitter"},
			{Name: "seed", Type: ParamSeed, Meaning: "the noise's random seed (absent: 0)"},
		},
		Forward: true, Example: `{"kind":"jitter","max":"2ms","seed":42}`},
}

// FaultKinds returns the admin API's fault kinds, their parameters and
// bounds, in a fixed order (the order of FaultRequest's documentation).
func FaultKinds() []FaultKind {
	out := slices.Clone(faultKinds)
	for i := range out {
		out[i].Params = slices.Clone(out[i].Params)
		out[i].OneOf = slices.Clone(out[i].OneOf)
	}
	return out
}

// kindNames lists the kinds for error messages: "step, freeze, ... or jitter".
func kindNames() string {
	var names []string
	for _, k := range faultKinds {
		names = append(names, k.Kind)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// lookupKind returns the spec of kind.
func lookupKind(kind string) (FaultKind, bool) {
	for _, k := range faultKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return FaultKind{}, false
}

// ErrFaultConflict reports a valid fault the clock's current state
// refuses: too many faults listed, or an offset beyond MaxFaultOffset.
// Its text never changes once published.
var ErrFaultConflict = errors.New("server: fault refused in the clock's current state")

// Validate checks the kind, which parameters are given and each value
// against its bounds (FaultKinds); the error names the parameter, its
// value and the bound. It does not read the clock: CheckAgainst does.
func (r FaultRequest) Validate() error {
	spec, ok := lookupKind(r.Kind)
	if !ok {
		return fmt.Errorf("unknown kind %s (want %s)", quote(r.Kind), kindNames())
	}
	set := r.params()
	for _, p := range spec.Params {
		if p.Required && !slices.Contains(set, p.Name) {
			return fmt.Errorf("%s needs parameter %q", r.Kind, p.Name)
		}
	}
	for _, name := range set {
		if !slices.ContainsFunc(spec.Params, func(p FaultParam) bool { return p.Name == name }) {
			return fmt.Errorf("parameter %q does not apply to %s", name, r.Kind)
		}
	}
	if len(spec.OneOf) > 0 {
		n := 0
		for _, name := range spec.OneOf {
			if slices.Contains(set, name) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s needs exactly one of %q", r.Kind, spec.OneOf)
		}
	}
	for _, p := range spec.Params {
		if err := r.checkParam(p); err != nil {
			return err
		}
	}
	return nil
}

// checkParam checks one parameter's value (when given) against its bounds.
func (r FaultRequest) checkParam(p FaultParam) error {
	switch p.Type {
	case ParamDuration:
		d := r.duration(p.Name)
		if d == nil {
			return nil
		}
		if v := time.Duration(*d); v < p.Min || v > p.Max {
			return fmt.Errorf("%s %q %v is out of range %s", r.Kind, p.Name, v, p.Bounds())
		}
	case ParamPPM:
		if r.PPM == nil {
			return nil
		}
		if v := *r.PPM; math.IsNaN(v) || v < p.MinPPM || v > p.MaxPPM {
			return fmt.Errorf("%s %q %v is out of range %s", r.Kind, p.Name, v, p.Bounds())
		}
	case ParamTime:
		if r.At == nil {
			return nil
		}
		if _, err := time.Parse(time.RFC3339Nano, *r.At); err != nil {
			return fmt.Errorf("%s %q %s is not an RFC 3339 time", r.Kind, p.Name, quote(*r.At))
		}
	}
	return nil
}

// duration returns the duration parameter name, or nil when absent.
func (r FaultRequest) duration(name string) *Duration {
	switch name {
	case "by":
		return r.By
	case "for":
		return r.For
	case "window":
		return r.Window
	case "in":
		return r.In
	case "max":
		return r.Max
	}
	return nil
}

// CheckAgainst checks a valid request against the clock's state now, given
// its wall reading (Unix ns), its offset (faults.Clock.Offset) and how many
// faults it lists (len(faults.Clock.Active())): a leap's instant within
// MaxFaultOffset of now, the offset a step, smear or slew leaves within
// ±MaxFaultOffset, and room for another leap or smear. The error wraps
// ErrFaultConflict, except for a leap instant out of range (a bad value).
func (r FaultRequest) CheckAgainst(wall int64, offset time.Duration, listed int) error {
	switch r.Kind {
	case faults.KindLeap, faults.KindSmear:
		if listed >= MaxListedFaults {
			return fmt.Errorf("%w: %d faults are listed, the most allowed (DELETE /admin/v1/faults first)", ErrFaultConflict, listed)
		}
	}
	if r.Kind == faults.KindLeap && r.At != nil {
		at, _ := time.Parse(time.RFC3339Nano, *r.At)
		now := time.Unix(0, wall)
		if d := at.Sub(now); d > MaxFaultOffset || d < -MaxFaultOffset {
			return fmt.Errorf("%s \"at\" %s is out of range: want within %v of the clock's now %s",
				r.Kind, quote(*r.At), MaxFaultOffset, now.UTC().Format(time.RFC3339))
		}
	}
	switch r.Kind {
	case faults.KindStep, faults.KindSmear, faults.KindSlew:
		by := time.Duration(*r.By)
		if after := satAddDur(offset, by); after > MaxFaultOffset || after < -MaxFaultOffset {
			return fmt.Errorf("%w: %s \"by\" %v would take the clock's offset from %v to %v, beyond ±%v (DELETE /admin/v1/faults first)",
				ErrFaultConflict, r.Kind, by, offset, after, MaxFaultOffset)
		}
	}
	return nil
}

// satAddDur returns a+b saturated to the Duration range.
func satAddDur(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// fmtFloat formats a bound without float noise.
func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
