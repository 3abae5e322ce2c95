package generator

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"
)

// refParseID is the dumb reference for ParseID: strconv with the strict
// rules layered on top.
func refParseID(s string) (ID, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return ID(v), true
}

var parseSeeds = []string{
	"", "0", "1", "-1", "+1", " 1", "1 ", "01", "abc", "1e3", "0x1f",
	"9223372036854775807", "9223372036854775808", "18446744073709551615",
	"99999999999999999999", "15099523774416", "\x00", "١٢٣",
}

func FuzzParseID(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		want, ok := refParseID(s)
		if ok != (err == nil) || id != want {
			t.Fatalf("ParseID(%q) = %d, %v; reference %d, %v", s, id, err, want, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("ParseID(%q): %v does not wrap ErrInvalidID", s, err)
			}
			return
		}
		if id < 0 || id.String() != s {
			t.Fatalf("ParseID(%q) = %d, String %q", s, id, id.String())
		}
	})
}

func FuzzIDUnmarshalJSON(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(strconv.Quote(s)))
		f.Add([]byte(s))
	}
	for _, s := range []string{`null`, `true`, `{}`, `[]`, `"\u0031"`, `1.0`, `-0`, `"1`, `1"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var id ID
		err := id.UnmarshalJSON(b)
		// Reference: a JSON string whose content parses, or a bare number
		// that parses.
		var want ID
		ok := false
		if string(b) == "null" {
			ok = true
		} else if len(b) > 0 && b[0] == '"' {
			var s string
			if json.Unmarshal(b, &s) == nil {
				want, ok = refParseID(s)
			}
		} else {
			want, ok = refParseID(string(b))
		}
		if ok != (err == nil) || id != want {
			t.Fatalf("UnmarshalJSON(%q) = %d, %v; reference %d, %v", b, id, err, want, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("UnmarshalJSON(%q): %v does not wrap ErrInvalidID", b, err)
			}
			return
		}
		out, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		var back ID
		if err := json.Unmarshal(out, &back); err != nil || back != id {
			t.Fatalf("round trip of %d via %s: %d, %v", id, out, back, err)
		}
	})
}

// FuzzDecodeCompose: any ID decodes under any valid layout and composes
// back to itself.
func FuzzDecodeCompose(f *testing.F) {
	f.Add(int64(0), uint8(0))
	f.Add(int64(1)<<62+12345, uint8(3))
	f.Add(int64(-1), uint8(5))
	f.Fuzz(func(t *testing.T, v int64, preset uint8) {
		ps := Presets()
		l := ps[int(preset)%len(ps)]
		id := ID(v & math.MaxInt64)
		p := l.Decode(ID(v))
		back, err := l.Compose(p.Tick, p.Node, p.Seq)
		if err != nil || back != id {
			t.Fatalf("%s: Compose(Decode(%d)) = %d, %v", l.Name, v, back, err)
		}
	})
}
