package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fault is one fault and its parameters: the one shape of a fault's
// parameters. A scenario's fault carries it (harness/scenario embeds it),
// the admin API's request body is its JSON form (MarshalJSON), and every
// target and shadow clock applies it (ApplyTo). Each field holds the
// parameter of Specs named beside it; a kind uses the fields its spec
// lists and leaves the others zero. The zero value of every field is what
// its parameter means when absent.
type Fault struct {
	// Kind is the fault's kind.
	Kind Kind
	// By ("by") is how far a step, smear, slew or store_step moves the
	// wall clock.
	By time.Duration
	// For ("for") is how long a freeze or pause lasts (zero: until
	// released), how long a restart keeps its node down, a clone runs
	// (zero: to the end), or a store outage or store pause lasts.
	For time.Duration
	// Window ("window") is a smear's window.
	Window time.Duration
	// PPM ("ppm") is a slew's, drift's or store_drift's rate in parts per
	// million.
	PPM float64
	// At ("at") is a leap second's wall instant; zero: In from now.
	At time.Time
	// In ("in") is a leap second's instant as a delay from the clock's
	// now, when At is zero.
	In time.Duration
	// Max ("max") and Seed ("seed") are a jitter's bound and random seed.
	Max  time.Duration
	Seed uint64
	// WipeCheckpoint (keep_checkpoint: off) makes a restart's host lose
	// the node's mark.
	WipeCheckpoint bool
	// OffsetWhileDown ("offset_while_down") steps the restarted host's
	// clock while its node is down.
	OffsetWhileDown time.Duration
	// Graceful ("graceful") makes a restart a planned stop: the generator
	// closes, persisting the last issued tick as its mark.
	Graceful bool
	// Point ("point"), when set, places a restart's crash inside a call
	// (one of CrashPoints).
	Point string
	// SameHolder ("same_holder") makes a clone claim its lease with the
	// original's holder identity.
	SameHolder bool
	// Behind ("behind") is how far a handoff's new host's clock is behind;
	// Gap ("gap") how long no host runs the node.
	Behind, Gap time.Duration
	// Crash ("crash") makes a handoff start with a kill -9 of the old host.
	Crash bool
	// Direction ("direction") is a partition's direction: "both" (or
	// empty), "outbound" or "inbound".
	Direction string
	// Hang ("hang") makes a store outage's calls hang until the caller's
	// timeout instead of failing at once.
	Hang bool
}

// field ties a parameter's name to the Fault field that holds it.
type field struct {
	get func(*Fault) any
	set func(*Fault, any)
}

// bind is the field *p(f) of type T.
func bind[T any](p func(*Fault) *T) field {
	return field{get: func(f *Fault) any { return *p(f) }, set: func(f *Fault, v any) { *p(f) = v.(T) }}
}

// fields maps every parameter name of Specs to its field: the one place
// a name meets a Go field.
var fields = map[string]field{
	"by":     bind(func(f *Fault) *time.Duration { return &f.By }),
	"for":    bind(func(f *Fault) *time.Duration { return &f.For }),
	"window": bind(func(f *Fault) *time.Duration { return &f.Window }),
	"ppm":    bind(func(f *Fault) *float64 { return &f.PPM }),
	"at":     bind(func(f *Fault) *time.Time { return &f.At }),
	"in":     bind(func(f *Fault) *time.Duration { return &f.In }),
	"max":    bind(func(f *Fault) *time.Duration { return &f.Max }),
	"seed":   bind(func(f *Fault) *uint64 { return &f.Seed }),
	"keep_checkpoint": {
		get: func(f *Fault) any { return !f.WipeCheckpoint },
		set: func(f *Fault, v any) { f.WipeCheckpoint = !v.(bool) },
	},
	"offset_while_down": bind(func(f *Fault) *time.Duration { return &f.OffsetWhileDown }),
	"graceful":          bind(func(f *Fault) *bool { return &f.Graceful }),
	"point":             bind(func(f *Fault) *string { return &f.Point }),
	"same_holder":       bind(func(f *Fault) *bool { return &f.SameHolder }),
	"behind":            bind(func(f *Fault) *time.Duration { return &f.Behind }),
	"gap":               bind(func(f *Fault) *time.Duration { return &f.Gap }),
	"crash":             bind(func(f *Fault) *bool { return &f.Crash }),
	"direction":         bind(func(f *Fault) *string { return &f.Direction }),
	"hang":              bind(func(f *Fault) *bool { return &f.Hang }),
}

// Param returns the value f holds for the parameter called name, of its
// type's Go type (ParamType.Go); nil for a name no kind takes.
func (f Fault) Param(name string) any {
	fl, ok := fields[name]
	if !ok {
		return nil
	}
	return fl.get(&f)
}

// ParamError is a problem with one parameter of a fault, or (Param "")
// with the fault as a whole. Msg reads after the parameter's key, as in
// `faults[0].by: missing: a step fault needs by`.
type ParamError struct {
	Param string
	Msg   string
}

// Error returns `"param": msg`, or msg for the fault as a whole.
func (e *ParamError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return strconv.Quote(e.Param) + ": " + e.Msg
}

// Build returns the fault of kind k with the parameters given by name,
// as interface w takes them: the one set of rules a scenario file and an
// admin request obey. A value has its parameter type's Go type
// (ParamType.Go); nil stands for a value the caller could not read and has
// reported, so its parameter counts as given and nothing more is said of
// it. Build reports, one error per parameter: a kind w does not take, a
// parameter the kind does not take in w, a required one missing, a value
// outside its bounds (Param.Check), a one-of group not given exactly once,
// and combinations the kind refuses. The fault holds every valid value.
func Build(k Kind, params map[string]any, w Where) (Fault, []*ParamError) {
	f := Fault{Kind: k}
	spec, ok := Lookup(k)
	if !ok || !spec.In(w) {
		return f, []*ParamError{{"kind", fmt.Sprintf("unknown fault kind %q (known: %s)", k, KindNames(w))}}
	}
	var errs []*ParamError
	takes := spec.ParamsIn(w)
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if _, ok := spec.Param(name, w); !ok {
			errs = append(errs, &ParamError{name, fmt.Sprintf("a %s fault takes %s", k, paramNames(takes))})
		}
	}
	var oneOf []string // the one-of group's members given
	for _, p := range takes {
		v, given := params[p.Name]
		if given && slices.Contains(spec.OneOf, p.Name) {
			oneOf = append(oneOf, p.Name)
		}
		switch {
		case !given && p.Required:
			errs = append(errs, &ParamError{p.Name, fmt.Sprintf("missing: a %s fault needs %s", k, p.Name)})
		case given && v != nil:
			if err := p.Check(v); err != nil {
				errs = append(errs, &ParamError{p.Name, fmt.Sprintf("a %s fault's %v", k, err)})
				continue
			}
			fields[p.Name].set(&f, v)
		}
	}
	if len(oneOf) != 1 && slices.ContainsFunc(takes, func(p Param) bool { return slices.Contains(spec.OneOf, p.Name) }) {
		errs = append(errs, &ParamError{"", fmt.Sprintf("a %s fault needs exactly one of %s", k, strings.Join(spec.OneOf, ", "))})
	}
	if k == KindRestart && f.Point != "" {
		if f.Graceful {
			errs = append(errs, &ParamError{"point", "a graceful restart does not crash: give point or graceful, not both"})
		}
		if f.WipeCheckpoint {
			errs = append(errs, &ParamError{"point", "a crash point is a moment of the checkpoint's write: it needs keep_checkpoint on"})
		}
	}
	return f, errs
}

// paramNames says which parameters a kind takes: "only by, window" or
// "no parameters".
func paramNames(ps []Param) string {
	if len(ps) == 0 {
		return "no parameters"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return "only " + strings.Join(names, ", ")
}

// absent reports whether f holds, for parameter name, what the parameter
// means when absent (the zero Fault's value).
func (f Fault) absent(name string) bool {
	return reflect.DeepEqual(f.Param(name), Fault{}.Param(name))
}

// MarshalJSON writes f in the admin API's form (POST /admin/v1/faults):
// "kind" and the kind's admin parameters in table order, durations as Go
// duration strings, an instant in RFC 3339 with nanoseconds. It writes
// each required parameter, each other one whose value is not zero, and of
// a one-of group none of whose members is set, the last member (a leap
// "in" 0: now). A kind the admin API does not take is an error.
func (f Fault) MarshalJSON() ([]byte, error) {
	spec, ok := Lookup(f.Kind)
	if !ok || !spec.In(InAdmin) {
		return nil, fmt.Errorf("faults: a %q fault has no JSON form: the admin API does not take it", f.Kind)
	}
	fallback := ""
	if len(spec.OneOf) > 0 && !slices.ContainsFunc(spec.OneOf, func(n string) bool { return !f.absent(n) }) {
		fallback = spec.OneOf[len(spec.OneOf)-1]
	}
	b := []byte(`{"kind":`)
	b = strconv.AppendQuote(b, string(f.Kind))
	for _, p := range spec.ParamsIn(InAdmin) {
		if !p.Required && f.absent(p.Name) && p.Name != fallback {
			continue
		}
		b = append(strconv.AppendQuote(append(b, ','), p.Name), ':')
		switch v := f.Param(p.Name).(type) {
		case time.Duration:
			b = strconv.AppendQuote(b, v.String())
		case time.Time:
			b = strconv.AppendQuote(b, v.UTC().Format(time.RFC3339Nano))
		default:
			enc, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("faults: %s %q: %w", f.Kind, p.Name, err)
			}
			b = append(b, enc...)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the admin API's form of a fault strictly: one JSON
// object with "kind" and exactly the parameters the kind takes in the
// admin API, no key given twice at any depth, each value of its
// parameter's type and within its bounds (Build, for InAdmin). The error
// names the key. The limits that depend on a clock's state (a leap's
// instant, the offset a step leaves) are the caller's to check.
func (f *Fault) UnmarshalJSON(data []byte) error {
	if err := noRepeatedKeys(data); err != nil {
		return err
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("decoding fault: want a JSON object such as %s, found %s", specs[0].Example, short(string(t)))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("decoding fault: %w", err)
	}
	raw, ok := obj["kind"]
	if !ok {
		return &ParamError{"kind", "missing: the fault's kind, one of " + KindNames(InAdmin)}
	}
	var kind string
	if err := json.Unmarshal(raw, &kind); err != nil || raw[0] != '"' {
		return &ParamError{"kind", "want a string, found " + short(string(raw))}
	}
	spec, ok := Lookup(Kind(kind))
	if !ok || !spec.In(InAdmin) {
		return &ParamError{"kind", fmt.Sprintf("unknown kind %s (want %s)", short(kind), KindNames(InAdmin))}
	}
	params := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if name == "kind" {
			continue
		}
		p, ok := spec.Param(name, InAdmin)
		if !ok {
			params[name] = nil // Build says the kind does not take it
			continue
		}
		v, err := jsonValue(p.Type, obj[name])
		if err != nil {
			return &ParamError{name, err.Error()}
		}
		params[name] = v
	}
	out, errs := Build(Kind(kind), params, InAdmin)
	if len(errs) > 0 {
		return errs[0]
	}
	*f = out
	return nil
}

// jsonValue reads a JSON value of parameter type t as its Go type.
func jsonValue(t ParamType, raw json.RawMessage) (any, error) {
	switch t {
	case ParamDuration:
		var d Duration
		err := d.UnmarshalJSON(raw)
		return time.Duration(d), err
	case ParamTime:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || raw[0] != '"' {
			return nil, fmt.Errorf("want an RFC 3339 time, found %s", short(string(raw)))
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("%s is not an RFC 3339 time", short(s))
		}
		return at, nil
	}
	v := reflect.New(t.Go())
	if string(raw) == "null" || json.Unmarshal(raw, v.Interface()) != nil {
		want := map[ParamType]string{ParamPPM: "a number of parts per million", ParamSeed: "an integer in [0, 2^64-1]", ParamBool: "true or false"}[t]
		if want == "" {
			want = "a string"
		}
		return nil, fmt.Errorf("want %s, found %s", want, short(string(raw)))
	}
	return v.Elem().Interface(), nil
}

// noRepeatedKeys reports the first key that appears twice in one JSON
// object of data, at any depth, by its path (`"by"."a"`, `"x"[1]."y"`):
// encoding/json would keep the last of them silently. Malformed JSON is
// left to the decoder proper (the scanner bounds its depth).
func noRepeatedKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	malformed := errors.New("malformed")
	var value func(path string) error
	value = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return malformed
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return malformed
				}
				k, _ := tok.(string)
				kp := strings.TrimPrefix(path+"."+strconv.Quote(k), ".")
				if seen[k] {
					return fmt.Errorf("decoding fault: key %s repeated (give each key once)", kp)
				}
				seen[k] = true
				if err := value(kp); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := value(path + "[" + strconv.Itoa(i) + "]"); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if err := value(""); err != nil && err != malformed {
		return err
	}
	return nil
}

// short quotes s for a message, cut to 64 bytes.
func short(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// Duration is a time.Duration whose JSON form is a Go duration string
// ("-150ms"); it also reads an integer of nanoseconds. Every duration the
// admin API reads or writes has this form.
type Duration time.Duration

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON accepts "1.5s", "-150ms" or an integer of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %s: %v", short(s), err)
		}
		*d = Duration(v)
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s is neither a duration string nor integer nanoseconds", short(string(b)))
	}
	*d = Duration(v)
	return nil
}

// ApplyTo injects f into c: the one mapping from a fault to the fault
// clock (a leap given as In is placed from c's now), shared by every target that runs on a Clock and by the harness's
// shadow clocks. A kind that is not a clock fault is an error.
func (f Fault) ApplyTo(c *Clock) error {
	switch f.Kind {
	case KindStep:
		c.Step(f.By)
	case KindFreeze:
		c.Freeze(f.For)
	case KindRelease:
		c.Release()
	case KindLeap:
		at := f.At
		if at.IsZero() {
			wall, _ := c.Now()
			at = time.Unix(0, wall).Add(f.In)
		}
		c.Leap(at)
	case KindSmear:
		c.Smear(f.By, f.Window)
	case KindSlew:
		c.Slew(f.By, f.PPM)
	case KindDrift:
		c.Drift(f.PPM)
	case KindPause:
		c.Pause(f.For)
	case KindJitter:
		var rng *rand.Rand
		if f.Max > 0 {
			rng = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
		}
		c.Jitter(f.Max, rng)
	case KindRevert:
		c.Revert()
	default:
		return fmt.Errorf("faults: %q is not a clock fault", f.Kind)
	}
	return nil
}

// PauseEnd says how f changes a host's pause: for a pause it returns the
// monotonic reading (ns) at which the pause ends, given the host's base
// reading now (math.MaxInt64 for a pause until released); for a revert or
// release it returns 0 (no pause). ok is false for every other kind, which
// leaves the pause as it is. Targets that stop work on a paused host (as a
// paused VM runs no goroutine) keep this value.
func (f Fault) PauseEnd(mono int64) (until int64, ok bool) {
	switch f.Kind {
	case KindPause:
		if f.For > 0 {
			return mono + int64(f.For), true
		}
		return math.MaxInt64, true
	case KindRevert, KindRelease:
		return 0, true
	}
	return 0, false
}
