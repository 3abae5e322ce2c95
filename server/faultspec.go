package server

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// FaultKinds returns the admin API's fault kinds with the parameters it
// takes: the kinds of the one fault vocabulary (faults.Specs) that the
// admin API injects, in their order. docs/http-api.md is generated from it.
func FaultKinds() []faults.Spec {
	var out []faults.Spec
	for _, s := range faults.Specs() {
		if s.In(faults.InAdmin) {
			s.Params = s.ParamsIn(faults.InAdmin)
			out = append(out, s)
		}
	}
	return out
}

// lookupKind returns the admin spec of kind.
func lookupKind(kind faults.Kind) (faults.Spec, bool) {
	s, ok := faults.Lookup(kind)
	if !ok || !s.In(faults.InAdmin) {
		return faults.Spec{}, false
	}
	s.Params = s.ParamsIn(faults.InAdmin)
	return s, true
}

// ErrFaultConflict reports a valid fault the clock's current state
// refuses: too many faults listed, or an offset beyond faults.MaxOffset.
// Its text never changes once published.
var ErrFaultConflict = errors.New("server: fault refused in the clock's current state")

// Validate checks the kind, which parameters are given and each value
// against its bounds (FaultKinds); the error names the parameter, its
// value and the bound. It does not read the clock: CheckAgainst does.
func (r FaultRequest) Validate() error {
	spec, ok := lookupKind(r.Kind)
	if !ok {
		return fmt.Errorf("unknown kind %s (want %s)", quote(string(r.Kind)), faults.KindNames(faults.InAdmin))
	}
	set := r.params()
	for _, p := range spec.Params {
		if p.Required && !slices.Contains(set, p.Name) {
			return fmt.Errorf("%s needs parameter %q", r.Kind, p.Name)
		}
	}
	for _, name := range set {
		if !slices.ContainsFunc(spec.Params, func(p faults.Param) bool { return p.Name == name }) {
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
func (r FaultRequest) checkParam(p faults.Param) error {
	switch p.Type {
	case faults.ParamDuration:
		d := r.duration(p.Name)
		if d == nil {
			return nil
		}
		if err := p.CheckDuration(time.Duration(*d)); err != nil {
			return fmt.Errorf("%s %w", r.Kind, err)
		}
	case faults.ParamPPM:
		if r.PPM == nil {
			return nil
		}
		if err := p.CheckPPM(*r.PPM); err != nil {
			return fmt.Errorf("%s %w", r.Kind, err)
		}
	case faults.ParamTime:
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
// faults.MaxOffset of now, the offset a step, smear or slew leaves within
// ±faults.MaxOffset, and room for another leap or smear. The error wraps
// ErrFaultConflict, except for a leap instant out of range (a bad value).
func (r FaultRequest) CheckAgainst(wall int64, offset time.Duration, listed int) error {
	switch r.Kind {
	case faults.KindLeap, faults.KindSmear:
		if listed >= faults.MaxListed {
			return fmt.Errorf("%w: %d faults are listed, the most allowed (DELETE /admin/v1/faults first)", ErrFaultConflict, listed)
		}
	}
	if r.Kind == faults.KindLeap && r.At != nil {
		at, _ := time.Parse(time.RFC3339Nano, *r.At)
		now := time.Unix(0, wall)
		if d := at.Sub(now); d > faults.MaxOffset || d < -faults.MaxOffset {
			return fmt.Errorf("%s \"at\" %s is out of range: want within %v of the clock's now %s",
				r.Kind, quote(*r.At), faults.MaxOffset, now.UTC().Format(time.RFC3339))
		}
	}
	switch r.Kind {
	case faults.KindStep, faults.KindSmear, faults.KindSlew:
		by := time.Duration(*r.By)
		if after := satAddDur(offset, by); after > faults.MaxOffset || after < -faults.MaxOffset {
			return fmt.Errorf("%w: %s \"by\" %v would take the clock's offset from %v to %v, beyond ±%v (DELETE /admin/v1/faults first)",
				ErrFaultConflict, r.Kind, by, offset, after, faults.MaxOffset)
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
