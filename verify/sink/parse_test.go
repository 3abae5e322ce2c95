package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/snowchaos/snowchaos/verify"
)

// texts returns the IDs as their canonical texts.
func texts(k verify.Kind, ids *IDs) []string {
	var out []string
	for _, id := range ids.Snowflakes {
		out = append(out, id.String())
	}
	for _, x := range ids.Wide {
		out = append(out, verify.Value{Kind: k, Bits: x}.String())
	}
	return append(out, ids.Strings...)
}

func TestParserForms(t *testing.T) {
	const u7 = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"
	cases := []struct {
		kind verify.Kind
		line string
		want []string
	}{
		{verify.KindSnowflake, "42", []string{"42"}},
		{verify.KindSnowflake, "  42\r", []string{"42"}},
		{verify.KindSnowflake, `"42"`, []string{"42"}},
		{verify.KindSnowflake, `["1", "2" ,"3"]`, []string{"1", "2", "3"}},
		{verify.KindSnowflake, `[1,2]`, []string{"1", "2"}},
		{verify.KindSnowflake, `{"id":"7"}`, []string{"7"}},
		{verify.KindSnowflake, `{ "ids" : ["7","8"] }`, []string{"7", "8"}},
		{verify.KindSnowflake, `[]`, nil},
		{verify.KindSnowflake, "", nil},
		{verify.KindSnowflake, " \t", nil},
		{verify.KindUUIDv7, u7, []string{u7}},
		{verify.KindUUIDv7, strings.ToUpper(u7), []string{u7}},
		{verify.KindUUIDv7, strings.ReplaceAll(u7, "-", ""), []string{u7}},
		{verify.KindUUIDv7, `{"id":"` + u7 + `"}`, []string{u7}},
		{verify.KindULID, `["01ARZ3NDEKTSV4RRFFQ69G5FAV","01arz3ndektsv4rrffq69g5faw"]`, []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFFQ69G5FAW"}},
		{verify.KindString, "order 17", []string{"order 17"}},
		{verify.KindString, `"[not an array]"`, []string{"[not an array]"}},
		{verify.KindString, `"tab\tescaped\u00e9"`, nil}, // a control character: invalid as an ID
		{verify.KindString, `["a\"b","\u00e9"]`, []string{`a"b`, "é"}},
	}
	for _, c := range cases {
		var ids IDs
		err := NewParser(c.kind).Line([]byte(c.line), 3, &ids)
		if c.want == nil && c.line == `"tab\tescaped\u00e9"` {
			if err == nil || !errors.Is(err, verify.ErrInvalidID) {
				t.Errorf("%s %q: %v, want an invalid ID", c.kind, c.line, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v", c.kind, c.line, err)
			continue
		}
		if got := texts(c.kind, &ids); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s %q: %q, want %q", c.kind, c.line, got, c.want)
		}
	}
}

func TestParserErrors(t *testing.T) {
	cases := []struct {
		kind       verify.Kind
		line, want string
	}{
		{verify.KindSnowflake, "4x2", "not a decimal"},
		{verify.KindSnowflake, "-1", "not a decimal"},
		{verify.KindSnowflake, "1.5", "not a decimal"},
		{verify.KindSnowflake, "[1.5]", "byte 2 is '.': a Snowflake must be a JSON integer"},
		{verify.KindSnowflake, "[1e3]", "byte 2 is 'e': a Snowflake must be a JSON integer"},
		{verify.KindSnowflake, `["1",]`, `want an ID as a JSON string`},
		{verify.KindSnowflake, `["1" "2"]`, "want ',' or ']'"},
		{verify.KindSnowflake, `["1"`, "the JSON array at byte 0 is not closed"},
		{verify.KindSnowflake, `"1`, "the JSON string at byte 0 is not closed"},
		{verify.KindSnowflake, `"1" x`, "text after the JSON value"},
		{verify.KindSnowflake, `[["1"]]`, "want an ID as a JSON string"},
		{verify.KindSnowflake, `{"idz":"1"}`, `unknown key "idz"`},
		{verify.KindSnowflake, `{"id":"1","ids":[]}`, "one key per object"},
		{verify.KindSnowflake, `{"ids":"1"}`, `"ids" must be an array`},
		{verify.KindSnowflake, `{"id" "1"}`, "want ':'"},
		{verify.KindSnowflake, `{}`, `want a key "id" or "ids"`},
		{verify.KindSnowflake, `{"id":null}`, "want an ID as a JSON string"},
		{verify.KindSnowflake, `"\x"`, "byte 2 is 'x': not a JSON escape"},
		{verify.KindSnowflake, "\"a\x01\"", "control character"},
		{verify.KindSnowflake, "99999999999999999999", "exceeds 2^63-1"},
		{verify.KindUUIDv7, "017f22e2-79b0-4cc3-98c4-dc0c0c07398f", "version 4, want 7"},
		{verify.KindUUIDv7, "[42]", "want an ID as a JSON string"},
		{verify.KindUUIDv4, "not-a-uuid", "want 36"},
		{verify.KindULID, "01ARZ3NDEKTSV4RRFFQ69G5FAI", "not Crockford"},
	}
	for _, c := range cases {
		var ids IDs
		err := NewParser(c.kind).Line([]byte(c.line), 9, &ids)
		var le *LineError
		if !errors.As(err, &le) || !errors.Is(err, ErrLine) || le.Line != 9 || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "line 9") || le.Value == "" {
			t.Errorf("%s %q: %v (%+v), want line 9 and %q", c.kind, c.line, err, le, c.want)
		}
	}
}

// asciiOnly reports whether s holds no multibyte UTF-8 character (bytes
// 0x80 and above that form none may be present).
func asciiOnly(s string) bool {
	for _, r := range s {
		if r >= utf8.RuneSelf && r != utf8.RuneError {
			return false
		}
	}
	return !strings.Contains(s, "\ufffd")
}

// refLine is the dumb reference for JSON lines: encoding/json decodes the
// same shapes, and the texts must agree.
func refLine(kind verify.Kind, line []byte) ([]string, bool) {
	line = bytes.TrimSpace(line)
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return nil, false
	}
	var raw []any
	switch x := v.(type) {
	case string, json.Number:
		raw = []any{x}
	case []any:
		raw = x
	case map[string]any:
		if len(x) != 1 {
			return nil, false
		}
		switch {
		case x["id"] != nil:
			raw = []any{x["id"]}
		case x["ids"] != nil:
			a, ok := x["ids"].([]any)
			if !ok {
				return nil, false
			}
			raw = a
		default:
			return nil, false
		}
	default:
		return nil, false
	}
	var out []string
	for _, e := range raw {
		var s string
		switch y := e.(type) {
		case string:
			s = y
		case json.Number:
			if kind != verify.KindSnowflake {
				return nil, false
			}
			s = string(y)
		default:
			return nil, false
		}
		var ids IDs
		if NewParser(kind).text([]byte(s), &ids) != nil {
			return nil, false
		}
		out = append(out, texts(kind, &ids)...)
	}
	return out, true
}

// FuzzParserLine checks the parser against encoding/json on every line it
// accepts, and on every line it refuses that the error is a LineError
// that names bytes exactly: valid UTF-8, and a line without a multibyte
// character or a \u escape gets an ASCII message (a byte 0xbe shown as
// '¾' would break it).
func FuzzParserLine(f *testing.F) {
	for _, s := range []string{"42", `["1","2"]`, `{"id":"3"}`, `{"ids":[4,5]}`, `"6"`, `[]`, `[1.5]`, `{"id":"1","x":2}`,
		`["01ARZ3NDEKTSV4RRFFQ69G5FAV"]`, `"017f22e2-79b0-7cc3-98c4-dc0c0c07398f"`, `"a\u00e9\"b"`, "order 1", `{"ids":["a","b"]}`,
		"\xbe", `{"id":-5}`, "[\"1\",\xbe]", "\"\\\xbe\"", `"\ud800"`, `"\ud83d\ude00"`, "01ARZ3NDEKTSV4RRFFQ69G5FA\xbe", "\"a\x01\""} {
		for k := range verify.Kinds() {
			f.Add(s, uint8(k))
		}
	}
	f.Fuzz(func(t *testing.T, line string, k uint8) {
		kind := verify.Kinds()[int(k)%len(verify.Kinds())]
		if strings.ContainsAny(line, "\n") {
			return // one line at a time
		}
		var ids IDs
		err := NewParser(kind).Line([]byte(line), 1, &ids)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, ErrLine) {
				t.Fatalf("%q: error %v is not a LineError for line 1", line, err)
			}
			if ids.Len() > 0 {
				t.Fatalf("%q: error %v, yet %d IDs kept", line, err, ids.Len())
			}
			msg := err.Error()
			if !utf8.ValidString(msg) || !utf8.ValidString(le.Value) {
				t.Fatalf("%q: error %q or value %q is not valid UTF-8", line, msg, le.Value)
			}
			if asciiOnly(line) && !strings.Contains(line, `\u`) && !asciiOnly(msg+le.Value) {
				t.Fatalf("%q: an ASCII line (its other bytes raw) got a message naming a character it does not hold: %q (value %q)", line, msg, le.Value)
			}
			return
		}
		got := texts(kind, &ids)
		tl := strings.Trim(line, " \t\r")
		if tl == "" {
			if ids.Len() != 0 {
				t.Fatalf("%q: IDs from an empty line", line)
			}
			return
		}
		switch tl[0] {
		case '"', '[', '{':
			want, ok := refLine(kind, []byte(tl))
			if !ok || strings.Join(want, "\x00") != strings.Join(got, "\x00") {
				t.Fatalf("%q (%s): parsed %q, encoding/json reference %q %v", line, kind, got, want, ok)
			}
		default:
			if len(got) != 1 {
				t.Fatalf("%q: a bare line gave %d IDs", line, len(got))
			}
		}
	})
}

// TestParserNamesBytesExactly: a byte that is not printable ASCII is named
// as '\xbe' (not as the character U+00BE, '¾'), the value quoted so that
// a JSON answer keeps it, and each message says what is wrong and what is
// accepted.
func TestParserNamesBytesExactly(t *testing.T) {
	const sfWant = `want an ID as a JSON string ("42") or a JSON integer of digits only (42)`
	for _, c := range []struct {
		kind             verify.Kind
		line, err, value string
	}{
		{verify.KindSnowflake, "\xbe", `sink: line 4: verify: invalid ID: generator: invalid ID: "\xbe" is not a decimal number (byte 0 is '\xbe')`, `"\xbe"`},
		{verify.KindSnowflake, `{"id":-5}`, `sink: line 4: byte 6 is '-' (a negative number): ` + sfWant, `-5}`},
		{verify.KindSnowflake, "[\"1\",\xbe]", `sink: line 4: byte 5 is '\xbe' (not a JSON value): ` + sfWant, `"\xbe]"`},
		{verify.KindSnowflake, "[\"1\"\xbe]", `sink: line 4: byte 4 is '\xbe': want ',' or ']'`, `"\xbe]"`},
		{verify.KindSnowflake, "\"1\"\xbe", `sink: line 4: byte 3 is '\xbe': text after the JSON value`, `"\xbe"`},
		{verify.KindSnowflake, "{\xbe}", `sink: line 4: byte 1 is '\xbe': want a key "id" or "ids"`, `"{\xbe}"`},
		{verify.KindSnowflake, "\"a\x01\"", `sink: line 4: byte 2 is '\x01': a control character inside a JSON string (escape it)`, `"\"a\x01\""`},
		{verify.KindSnowflake, "\"\\\xbe\"", `sink: line 4: byte 2 is '\xbe': not a JSON escape (want one of \" \\ \/ \b \f \n \r \t \uXXXX)`, `"\"\\\xbe\""`},
		{verify.KindSnowflake, `["1",]`, `sink: line 4: byte 5 is ']' (not a JSON value): ` + sfWant, `]`},
		{verify.KindSnowflake, `  {"id":null}`, `sink: line 4: byte 8 is 'n' (not a string (null, true or false?)): ` + sfWant, `null}`},
		{verify.KindUUIDv7, `[42]`, `sink: line 4: byte 1 is '4' (a number): want an ID as a JSON string`, `42]`},
		{verify.KindUUID, "017f22e2\xbe79b0-7cc3-98c4-dc0c0c07398f", `sink: line 4: verify: invalid ID: UUID "017f22e2\xbe79b0-7cc3-98c4-dc0c0c07398f": byte 8 is '\xbe', want '-'`, `"017f22e2\xbe79b0-7cc3-98c4-dc0c0c07398f"`},
		{verify.KindULID, "01ARZ3NDEKTSV4RRFFQ69G5FA\xbe", `sink: line 4: verify: invalid ID: ULID "01ARZ3NDEKTSV4RRFFQ69G5FA\xbe": byte 25 is '\xbe', not Crockford base32 (0-9, A-Z without I, L, O, U)`, `"01ARZ3NDEKTSV4RRFFQ69G5FA\xbe"`},
		// A raw byte beside an escape is not turned into U+FFFD (as
		// encoding/json would), and an escaped lone surrogate is refused:
		// two different inputs must never become one string ID.
		{verify.KindString, "\"\\u0041\xbe\"", `sink: line 4: verify: invalid ID: string "A\xbe": invalid UTF-8 at byte 1`, `"A\xbe"`},
		{verify.KindString, `"\ud800"`, `sink: line 4: the escape at byte 1, \ud800, is a lone UTF-16 surrogate: not a character`, `"\ud800"`},
	} {
		var ids IDs
		err := NewParser(c.kind).Line([]byte(c.line), 4, &ids)
		var le *LineError
		if !errors.As(err, &le) || err.Error() != c.err || le.Value != c.value {
			t.Errorf("%s %q:\n got  %v (value %q)\n want %s (value %q)", c.kind, c.line, err, valueOf(le), c.err, c.value)
		}
	}
	// Two lone surrogates are two bad lines, not one string ID twice.
	s := newSink(t, Config{Kind: verify.KindString})
	if res, _ := s.Ingest([]byte(`"\ud800"`+"\n"+`"\udc00"`+"\n"), Source{}); res.IDs != 0 || res.BadLines != 2 || res.Duplicates != 0 {
		t.Fatalf("lone surrogates: %+v", res)
	}
}

func valueOf(le *LineError) string {
	if le == nil {
		return ""
	}
	return le.Value
}
