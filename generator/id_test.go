package generator

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseIDBad(t *testing.T) {
	for _, s := range []string{
		"", "-1", "abc", "18446744073709551615", "9223372036854775808", "+1", " 1", "1 ", "01", "00",
		"1e3", "1.0", "0x10", "１", "99999999999999999999999999999",
	} {
		id, err := ParseID(s)
		if err == nil {
			t.Errorf("ParseID(%q) = %d, want an error", s, id)
			continue
		}
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q): %v does not wrap ErrInvalidID", s, err)
		}
		want := strconv.Quote(s)
		if s == "" {
			want = "empty"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ParseID(%q): %q does not name the value", s, err)
		}
	}
}

func TestParseIDGood(t *testing.T) {
	for _, tc := range []struct {
		s  string
		id ID
	}{{"0", 0}, {"1", 1}, {"9223372036854775807", math.MaxInt64}, {"15099523774416", 15099523774416}} {
		id, err := ParseID(tc.s)
		if err != nil || id != tc.id {
			t.Errorf("ParseID(%q) = %d, %v", tc.s, id, err)
		}
		if id.String() != tc.s {
			t.Errorf("String() = %q, want %q", id.String(), tc.s)
		}
	}
	if a := testing.AllocsPerRun(100, func() { ParseID("9223372036854775807") }); a != 0 {
		t.Errorf("ParseID allocates %v", a)
	}
}

func TestParseIDLongInputTruncated(t *testing.T) {
	_, err := ParseID(strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error for a long input: %d bytes", len(err.Error()))
	}
}

func TestIDJSON(t *testing.T) {
	type doc struct {
		ID  ID   `json:"id"`
		Ptr *ID  `json:"ptr,omitempty"`
		IDs []ID `json:"ids"`
	}
	in := doc{ID: math.MaxInt64, IDs: []ID{0, 1 << 53, 1<<53 + 1}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"9223372036854775807","ids":["0","9007199254740992","9007199254740993"]}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil || out.ID != in.ID || len(out.IDs) != 3 || out.IDs[2] != 1<<53+1 {
		t.Errorf("round trip: %+v, %v", out, err)
	}
	// Bare numbers are accepted for compatibility.
	if err := json.Unmarshal([]byte(`{"id":9223372036854775807,"ids":[5]}`), &out); err != nil || out.ID != math.MaxInt64 || out.IDs[0] != 5 {
		t.Errorf("bare number: %+v, %v", out, err)
	}
	// Escaped digits in a string are still digits.
	var id ID
	if err := json.Unmarshal([]byte(`"\u0031\u0032"`), &id); err != nil || id != 12 {
		t.Errorf("escaped string: %d, %v", id, err)
	}
	// null leaves the value unchanged.
	id = 7
	if err := json.Unmarshal([]byte(`null`), &id); err != nil || id != 7 {
		t.Errorf("null: %d, %v", id, err)
	}
	for _, bad := range []string{`-1`, `"-1"`, `1.5`, `1e3`, `"abc"`, `""`, `" 1"`, `"+1"`, `true`, `{}`, `[1]`,
		`"9223372036854775808"`, `18446744073709551615`} {
		var id ID
		err := json.Unmarshal([]byte(bad), &id)
		if err == nil {
			t.Errorf("Unmarshal(%s) = %d, want an error", bad, id)
			continue
		}
		if !errors.Is(err, ErrInvalidID) && !strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("Unmarshal(%s): %v", bad, err)
		}
	}
	// Called directly, the error names the value.
	err = id.UnmarshalJSON([]byte(`1.5`))
	if !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), `"1.5"`) {
		t.Errorf("UnmarshalJSON(1.5) = %v", err)
	}
}

func TestIDText(t *testing.T) {
	m := map[ID]string{42: "x"}
	b, err := json.Marshal(m)
	if err != nil || string(b) != `{"42":"x"}` {
		t.Errorf("map key: %s, %v", b, err)
	}
	var back map[ID]string
	if err := json.Unmarshal(b, &back); err != nil || back[42] != "x" {
		t.Errorf("map key back: %v, %v", back, err)
	}
	var id ID
	if err := id.UnmarshalText([]byte("-5")); !errors.Is(err, ErrInvalidID) {
		t.Errorf("UnmarshalText(-5) = %v", err)
	}
	if b, _ := ID(99).MarshalText(); string(b) != "99" {
		t.Errorf("MarshalText = %s", b)
	}
}
