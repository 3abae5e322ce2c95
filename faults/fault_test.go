package faults

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFieldsCoverSpecs: every parameter of the table has a field of its
// type's Go type, and every field belongs to a parameter.
func TestFieldsCoverSpecs(t *testing.T) {
	used := map[string]bool{}
	for _, s := range Specs() {
		for _, p := range s.Params {
			fl, ok := fields[p.Name]
			if !ok {
				t.Errorf("%s: parameter %q has no field", s.Kind, p.Name)
				continue
			}
			if got := reflect.TypeOf(fl.get(&Fault{})); got != p.Type.Go() {
				t.Errorf("%s %q: field of type %v, want %v", s.Kind, p.Name, got, p.Type.Go())
			}
			used[p.Name] = true
		}
	}
	for name := range fields {
		if !used[name] {
			t.Errorf("field %q belongs to no parameter", name)
		}
	}
	// Every field of Fault but Kind is reached by one name.
	if n := reflect.TypeFor[Fault]().NumField() - 1; n != len(fields) {
		t.Errorf("Fault has %d parameter fields, the names bind %d", n, len(fields))
	}
}

// TestKindsOf: the capability list is the table's scopes.
func TestKindsOf(t *testing.T) {
	clock := KindsOf(ScopeClock, InScenario)
	want := []Kind{KindStep, KindFreeze, KindLeap, KindSmear, KindSlew, KindDrift, KindPause, KindRevert}
	if !slices.Equal(clock, want) {
		t.Errorf("clock faults a scenario aims at nodes: %v, want %v", clock, want)
	}
	for _, k := range Kinds(InScenario) {
		if k.Clock() != slices.Contains(clock, k) {
			t.Errorf("%s: Clock() %v, in KindsOf(ScopeClock) %v", k, k.Clock(), slices.Contains(clock, k))
		}
		_, sc := k.StoreClock()
		if sc && !slices.Contains(KindsOf(ScopeStore, InScenario), k) {
			t.Errorf("%s acts on the store's clock but is not a store fault", k)
		}
	}
}

func TestBuild(t *testing.T) {
	f, errs := Build(KindRestart, map[string]any{"for": time.Second, "keep_checkpoint": false, "offset_while_down": -time.Millisecond}, InScenario)
	if len(errs) != 0 || f.For != time.Second || !f.WipeCheckpoint || f.OffsetWhileDown != -time.Millisecond {
		t.Fatalf("restart: %+v %v", f, errs)
	}
	if f, _ := Build(KindRestart, nil, InScenario); f.WipeCheckpoint {
		t.Fatal("a restart without keep_checkpoint wipes the disk; absent means on")
	}
	for _, tc := range []struct {
		kind   Kind
		params map[string]any
		w      Where
		want   []string
	}{
		{KindStep, nil, InScenario, []string{`"by": missing: a step fault needs by`}},
		{KindStep, map[string]any{"by": time.Second, "ppm": 5.0}, InScenario, []string{`"ppm": a step fault takes only by`}},
		{KindRevert, map[string]any{"by": time.Second}, InScenario, []string{`"by": a revert fault takes no parameters`}},
		{KindStep, map[string]any{"by": time.Duration(0)}, InBoth, []string{`"by": a step fault's "by" 0s is out of range`}},
		{KindStep, map[string]any{"by": nil}, InAdmin, nil}, // unreadable, reported by the caller: nothing more
		{KindStep, map[string]any{"by": 5.0}, InAdmin, []string{`"by" takes a duration, not float64`}},
		{KindDrift, map[string]any{"ppm": 1e-300}, InAdmin, []string{`"ppm": a drift fault's "ppm" 1e-300 is below the fault clock's resolution of 0.001 ppm`}},
		{KindStoreDrift, map[string]any{"ppm": -0.0009}, InScenario, []string{`below the fault clock's resolution`}},
		{KindSlew, map[string]any{"by": time.Second, "ppm": 1e-300}, InAdmin, []string{`"ppm": a slew fault's "ppm" 1e-300 is below`}},
		{KindLeap, nil, InAdmin, []string{"a leap fault needs exactly one of at, in"}},
		{KindLeap, map[string]any{"at": time.Now(), "in": time.Second}, InAdmin, []string{"exactly one of at, in"}},
		{KindLeap, nil, InScenario, nil}, // a scenario's leap is at its own instant
		{KindRelease, nil, InScenario, []string{`"kind": unknown fault kind "release"`}},
		{KindRestart, map[string]any{"point": "after_sync", "graceful": true, "keep_checkpoint": false}, InScenario,
			[]string{`"point": a graceful restart does not crash`, `"point": a crash point is a moment of the checkpoint's write: it needs keep_checkpoint on`}},
		{KindRestart, map[string]any{"point": "soon"}, InScenario, []string{`"point": a restart fault's "point" "soon" is not one of before_write`}},
		{KindStoreOutage, map[string]any{"for": time.Second, "direction": "sideways"}, InScenario, []string{`is not one of both, outbound, inbound`}},
	} {
		_, errs := Build(tc.kind, tc.params, tc.w)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: errors %q, want %d", tc.kind, tc.params, got, len(tc.want))
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], tc.want[i]) {
				t.Errorf("%s %v: error %q, want %q", tc.kind, tc.params, got[i], tc.want[i])
			}
		}
	}
}

// TestJSONForm: every example of the table decodes and encodes back to
// itself; each admin kind round-trips with zero and with extreme values.
func TestJSONForm(t *testing.T) {
	for _, s := range Specs() {
		if !s.In(InAdmin) {
			if _, err := json.Marshal(Fault{Kind: s.Kind}); err == nil {
				t.Errorf("%s: marshalled, but the admin API does not take it", s.Kind)
			}
			continue
		}
		var f Fault
		if err := json.Unmarshal([]byte(s.Example), &f); err != nil || f.Kind != s.Kind {
			t.Errorf("%s example %s: %v", s.Kind, s.Example, err)
			continue
		}
		b, err := json.Marshal(f)
		var back Fault
		if err != nil || json.Unmarshal(b, &back) != nil || back != f {
			t.Errorf("%s: %s encodes as %s (%v), which reads back as %+v", s.Kind, s.Example, b, err, back)
		}
	}
	at := time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", 3600))
	for _, f := range []Fault{
		{Kind: KindFreeze}, {Kind: KindLeap}, {Kind: KindLeap, At: at}, {Kind: KindLeap, In: time.Hour},
		{Kind: KindJitter}, {Kind: KindJitter, Max: time.Hour, Seed: 1<<64 - 1}, {Kind: KindSlew, By: -MaxOffset},
		{Kind: KindDrift, PPM: -MaxPPM}, {Kind: KindDrift, PPM: PPMResolution}, {Kind: KindRelease},
	} {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		var back Fault
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("%+v as %s: %v", f, b, err)
			continue
		}
		if !back.At.Equal(f.At) || back.Kind != f.Kind || back.In != f.In || back.Max != f.Max || back.Seed != f.Seed || back.By != f.By || back.PPM != f.PPM {
			t.Errorf("%+v as %s reads back as %+v", f, b, back)
		}
	}
	if b, _ := json.Marshal(Fault{Kind: KindLeap}); string(b) != `{"kind":"leap","in":"0s"}` {
		t.Errorf("a leap with neither at nor in: %s, want in 0 (now)", b)
	}
}

func TestJSONErrors(t *testing.T) {
	for body, want := range map[string]string{
		`{"kind":"step","by":"-1s","by":"-2s"}`:            `decoding fault: key "by" repeated`,
		`{"kind":"step","by":{"a":1,"b":[{"c":1,"c":2}]}}`: `key "by"."b"[0]."c" repeated`,
		`[{"a":1},{"a":1}]`:                                `want a JSON object`,
		`{"kind":"step","by":"1s","kind":"step"}`:          `key "kind" repeated`,
		`{"by":"1s"}`:                                             `"kind": missing`,
		`{"kind":5}`:                                              `"kind": want a string, found "5"`,
		`{"kind":"restart"}`:                                      `"kind": unknown kind "restart" (want step, freeze`,
		`{"kind":"step","by":null}`:                               `"by": duration "null" is neither`,
		`{"kind":"drift","ppm":"5"}`:                              `"ppm": want a number of parts per million, found "\"5\""`,
		`{"kind":"drift","ppm":null}`:                             `"ppm": want a number`,
		`{"kind":"drift","ppm":1e400}`:                            `"ppm": want a number`,
		`{"kind":"drift","ppm":1e-300}`:                           `"ppm": a drift fault's "ppm" 1e-300 is below`,
		`{"kind":"jitter","max":"1ms","seed":-1}`:                 `"seed": want an integer in [0, 2^64-1], found "-1"`,
		`{"kind":"leap","at":"tomorrow"}`:                         `"at": "tomorrow" is not an RFC 3339 time`,
		`{"kind":"leap","at":5}`:                                  `"at": want an RFC 3339 time`,
		`{"kind":"step","by":"1s","keep_checkpoint":true}`:        `"keep_checkpoint": a step fault takes only by`,
		`{"kind":"freeze","for":"1s","window":"1s","bogus":true}`: `"bogus": a freeze fault takes only for`,
	} {
		var f Fault
		err := json.Unmarshal([]byte(body), &f)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// tokens counts the JSON tokens of data (-1 when it is not JSON).
func tokens(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n := 0
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() == "EOF" {
				return n
			}
			return -1
		}
		n++
	}
}

// FuzzFaultJSON checks the admin form's decoder: it never panics; a fault
// it accepts encodes to a form that reads back as the same fault; and its
// repeated-key check agrees with a dumb reference (decoding into maps keeps
// one member per key, so the re-encoded document has fewer tokens exactly
// when a key was repeated).
func FuzzFaultJSON(f *testing.F) {
	for _, s := range Specs() {
		if s.Example != "" {
			f.Add([]byte(s.Example))
		}
	}
	for _, s := range []string{`{"kind":"step","by":"-1s","by":"-2s"}`, `{"a":[{"b":1},{"b":1,"b":2}]}`, `[[],[{}],{"":0,"":0}]`,
		`{"kind":"drift","ppm":1e-300}`, `{"kind":"leap","at":"2026-12-31T23:59:60Z"}`, `{"kind":"jitter","max":1,"seed":18446744073709551615}`, `{"kind":"leap","in":0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<12 {
			return
		}
		if json.Valid(data) && tokens(data) >= 0 {
			var v any
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			if dec.Decode(&v) == nil {
				again, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				repeated := tokens(again) < tokens(data)
				if err := noRepeatedKeys(data); (err != nil) != repeated {
					t.Fatalf("%q: repeated-key check %v, reference says repeated=%v", data, err, repeated)
				}
			}
		}
		var fa Fault
		if err := json.Unmarshal(data, &fa); err != nil {
			return
		}
		b, err := json.Marshal(fa)
		if err != nil {
			t.Fatalf("%q accepted as %+v, which does not encode: %v", data, fa, err)
		}
		var back Fault
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q accepted, its encoding %s is not: %v", data, b, err)
		}
		if !back.At.Equal(fa.At) {
			t.Fatalf("%q: at %v reads back as %v", data, fa.At, back.At)
		}
		back.At, fa.At = time.Time{}, time.Time{}
		if back != fa {
			t.Fatalf("%q as %+v encodes as %s, which reads back as %+v", data, fa, b, back)
		}
	})
}
