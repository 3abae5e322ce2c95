package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

// ErrFaultConflict reports a valid fault the clock's current state
// refuses: too many faults listed, or an offset beyond faults.MaxOffset.
// Its text never changes once published.
var ErrFaultConflict = errors.New("server: fault refused in the clock's current state")

// ParseFault reads the body of POST /admin/v1/faults: exactly one JSON
// object in the fault's JSON form (faults.Fault.UnmarshalJSON: the kind,
// exactly its parameters, each within its bounds, no key twice at any
// depth), nothing after it. The error says what is wrong and names the
// key. It does not read a clock: CheckAgainst does.
func ParseFault(body []byte) (faults.Fault, error) {
	var f faults.Fault
	if len(bytes.TrimSpace(body)) == 0 {
		return f, errors.New("empty body (want a JSON fault)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return f, fmt.Errorf("decoding fault: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return f, errors.New("trailing data after the JSON fault")
	}
	err := f.UnmarshalJSON(raw)
	return f, err
}

// CheckAgainst checks a valid fault against the clock's state now, given
// its wall reading (Unix ns), its offset (faults.Clock.Offset) and how many
// faults it lists (len(faults.Clock.Active())): a leap's instant within
// faults.MaxOffset of now, the offset a step, smear or slew leaves within
// ±faults.MaxOffset, and room for another leap or smear. The error wraps
// ErrFaultConflict, except for a leap instant out of range (a bad value).
func CheckAgainst(f faults.Fault, wall int64, offset time.Duration, listed int) error {
	switch f.Kind {
	case faults.KindLeap, faults.KindSmear:
		if listed >= faults.MaxListed {
			return fmt.Errorf("%w: %d faults are listed, the most allowed (DELETE /admin/v1/faults first)", ErrFaultConflict, listed)
		}
	}
	if f.Kind == faults.KindLeap && !f.At.IsZero() {
		now := time.Unix(0, wall)
		if d := f.At.Sub(now); d > faults.MaxOffset || d < -faults.MaxOffset {
			return fmt.Errorf("%s \"at\" %s is out of range: want within %v of the clock's now %s",
				f.Kind, f.At.Format(time.RFC3339Nano), faults.MaxOffset, now.UTC().Format(time.RFC3339))
		}
	}
	switch f.Kind {
	case faults.KindStep, faults.KindSmear, faults.KindSlew:
		if after := satAddDur(offset, f.By); after > faults.MaxOffset || after < -faults.MaxOffset {
			return fmt.Errorf("%w: %s \"by\" %v would take the clock's offset from %v to %v, beyond ±%v (DELETE /admin/v1/faults first)",
				ErrFaultConflict, f.Kind, f.By, offset, after, faults.MaxOffset)
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
