package sink

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

// ErrLine is wrapped by every LineError.
var ErrLine = errors.New("sink: bad line")

// LineError is a line that is not what the protocol allows: it names the
// line (counted from 1 in its body, or in the whole stream for standard
// input) and quotes the value. Byte positions in Err count from 0: in the
// line (before trimming) for its JSON syntax, in the quoted value for an
// ID's own errors. A byte that is not printable ASCII is named as Go
// escapes it ('\xbe', '\x01'), never as another character.
type LineError struct {
	// Batch is the request (or standard-input batch) the line came in,
	// counted from 1; Line its line number within the request body, or
	// within the whole input for standard input.
	Batch, Line int
	// Value is the offending value (or the whole line), at most 80 bytes:
	// verbatim when it is printable UTF-8, else quoted as Go quotes a
	// string ("\xbe", "\t"), so that every byte is named.
	Value string
	// Err says what is wrong; it wraps verify.ErrInvalidID when the value
	// is not an ID of the sink's kind.
	Err error
}

func (e *LineError) Error() string {
	if e.Batch > 0 {
		return fmt.Sprintf("sink: batch %d, line %d: %v", e.Batch, e.Line, e.Err)
	}
	return fmt.Sprintf("sink: line %d: %v", e.Line, e.Err)
}

// Unwrap returns ErrLine and the cause.
func (e *LineError) Unwrap() []error { return []error{ErrLine, e.Err} }

// maxValue caps how much of a bad value an error quotes.
const maxValue = 80

// clip renders a bad value for a LineError: at most maxValue bytes (cut
// at a character boundary, "..." marking the cut), verbatim when it is
// printable UTF-8, else quoted as Go quotes strings ("\xbe", "\t"), so
// that every byte is named exactly (JSON would turn an invalid byte into
// U+FFFD, and fmt's %q of a byte would show 0xbe as '¾').
func clip(b []byte) string {
	cut := len(b) > maxValue
	if cut {
		n := maxValue
		for n > maxValue-utf8.UTFMax && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	s := string(b)
	if !printable(s) {
		s = strconv.Quote(s)
	}
	if cut {
		s += "..."
	}
	return s
}

// quoted quotes s as Go does, its first maxValue bytes at most.
func quoted(s string) string {
	if len(s) > maxValue {
		return strconv.Quote(s[:maxValue]) + "..."
	}
	return strconv.Quote(s)
}

// printable reports whether s is valid UTF-8 of printable characters.
func printable(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// IDs are the IDs of one batch, in the field of the sink's kind.
type IDs struct {
	Snowflakes []generator.ID
	Wide       []verify.ID128
	// Strings may point into the batch's buffer: use them before it is
	// reused (the Verifier copies what it keeps).
	Strings []string
}

// Len returns the number of IDs.
func (ids *IDs) Len() int { return len(ids.Snowflakes) + len(ids.Wide) + len(ids.Strings) }

// reset empties ids, keeping their capacity.
func (ids *IDs) reset() {
	clear(ids.Strings) // let the strings' buffers go
	ids.Snowflakes, ids.Wide, ids.Strings = ids.Snowflakes[:0], ids.Wide[:0], ids.Strings[:0]
}

// Parser turns lines into IDs of one kind. A line is one of:
//
//	42                                  a bare ID in its text form
//	"42"                                a JSON string holding one
//	["42","43"]                         a JSON array of them (a /v1/ids JSON body)
//	{"id":"42"}  {"ids":["42","43"]}    a JSON object with one of the keys id, ids
//
// and is trimmed of spaces, tabs and a carriage return first; an empty
// line carries no ID. A Snowflake may also be a bare JSON number (digits
// only: JSON numbers lose precision in JavaScript, so prefer strings). For
// KindString a line that does not start with '"', '[' or '{' is the ID,
// verbatim after trimming; send a string starting with one of those, or
// with spaces at either end, as a JSON string. JSON strings are decoded as
// RFC 8259 says, except that an escaped lone surrogate (\ud800) is an
// error rather than U+FFFD, so that two different inputs never become one
// ID. Everything else is an error naming the value and the byte: a JSON
// value of another shape, an unknown key, trailing text, a value that is
// not an ID of the kind. A Parser is stateless and safe for concurrent use.
type Parser struct {
	kind verify.Kind
}

// NewParser returns a Parser for kind.
func NewParser(kind verify.Kind) *Parser { return &Parser{kind: kind} }

// Line parses one line (without its newline), appending its IDs to dst;
// a bad line appends none. The error, if any, is a *LineError with Line
// set to line.
func (p *Parser) Line(b []byte, line int, dst *IDs) error {
	b = trimRight(b)
	i := 0
	for i < len(b) && isTrimmed(b[i]) {
		i++
	}
	if i == len(b) {
		return nil
	}
	n0, n1, n2 := len(dst.Snowflakes), len(dst.Wide), len(dst.Strings)
	var err error
	switch b[i] {
	case '"', '[', '{':
		err = p.json(b, i, dst)
	default:
		err = p.text(b[i:], dst)
	}
	if err != nil {
		dst.Snowflakes, dst.Wide, dst.Strings = dst.Snowflakes[:n0], dst.Wide[:n1], dst.Strings[:n2]
		var le *LineError
		if errors.As(err, &le) {
			le.Line = line
			return le
		}
		return &LineError{Line: line, Value: clip(b[i:]), Err: err}
	}
	return nil
}

// isTrimmed reports whether c is trimmed from a line's ends.
func isTrimmed(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// trimRight drops spaces, tabs and carriage returns at the end.
func trimRight(b []byte) []byte {
	for len(b) > 0 && isTrimmed(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// text parses one ID in its text form. The string it keeps for KindString
// points into b.
func (p *Parser) text(b []byte, dst *IDs) error {
	s := bytesString(b)
	switch {
	case p.kind == verify.KindSnowflake:
		id, err := verify.ParseSnowflake(s)
		if err != nil {
			return &LineError{Value: clip(b), Err: err}
		}
		dst.Snowflakes = append(dst.Snowflakes, id)
	case p.kind == verify.KindString:
		if err := verify.ParseString(s); err != nil {
			return &LineError{Value: clip(b), Err: err}
		}
		dst.Strings = append(dst.Strings, s)
	default:
		x, err := verify.Parse128(p.kind, s)
		if err != nil {
			return &LineError{Value: clip(b), Err: err}
		}
		dst.Wide = append(dst.Wide, x)
	}
	return nil
}

// json parses the JSON value at b[i], which starts with '"', '[' or '{'.
func (p *Parser) json(b []byte, i int, dst *IDs) error {
	var err error
	switch b[i] {
	case '"':
		i, err = p.value(b, i, dst)
	case '[':
		i, err = p.array(b, i, dst)
	case '{':
		i, err = p.object(b, i, dst)
	}
	if err != nil {
		return err
	}
	if i = skipSpace(b, i); i != len(b) {
		return &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %s: text after the JSON value", i, verify.QuoteByte(b[i]))}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// want says what a JSON value holding an ID may be, for the kind.
func (p *Parser) want() string {
	if p.kind == verify.KindSnowflake {
		return `want an ID as a JSON string ("42") or a JSON integer of digits only (42)`
	}
	return `want an ID as a JSON string`
}

// what names the JSON value (or garbage) that starts with c.
func what(c byte) string {
	switch {
	case c == '-':
		return "a negative number"
	case c >= '0' && c <= '9':
		return "a number"
	case c == '[':
		return "an array"
	case c == '{':
		return "an object"
	case c == 'n' || c == 't' || c == 'f':
		return "not a string (null, true or false?)"
	}
	return "not a JSON value"
}

// value parses a JSON string or (for Snowflakes) number at b[i], appending
// the ID, and returns the index after it.
func (p *Parser) value(b []byte, i int, dst *IDs) (int, error) {
	if i >= len(b) {
		return i, &LineError{Value: clip(b), Err: fmt.Errorf("the line ends at byte %d where an ID was expected: %s", i, p.want())}
	}
	switch c := b[i]; {
	case c == '"':
		s, n, err := jsonString(b, i)
		if err != nil {
			return i, &LineError{Value: clip(b[i:]), Err: err}
		}
		return i + n, p.text(s, dst)
	case c >= '0' && c <= '9' && p.kind == verify.KindSnowflake:
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
			return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %s: a Snowflake must be a JSON integer, without fraction or exponent", j, verify.QuoteByte(b[j]))}
		}
		return j, p.text(b[i:j], dst)
	default:
		return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %s (%s): %s", i, verify.QuoteByte(c), what(c), p.want())}
	}
}

// array parses a JSON array of IDs at b[i].
func (p *Parser) array(b []byte, i int, dst *IDs) (int, error) {
	open := i
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = p.value(b, i, dst); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &LineError{Value: clip(b[open:]), Err: fmt.Errorf("the JSON array at byte %d is not closed: want ',' or ']' at byte %d, where the line ends", open, i)}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %s: want ',' or ']'", i, verify.QuoteByte(b[i]))}
		}
	}
}

// object parses {"id": ID} or {"ids": [ID, ...]} at b[i].
func (p *Parser) object(b []byte, i int, dst *IDs) (int, error) {
	open := i
	i = skipSpace(b, i+1)
	if i >= len(b) || b[i] != '"' {
		return i, &LineError{Value: clip(b[open:]), Err: fmt.Errorf(`%s: want a key "id" or "ids"`, at(b, i))}
	}
	key, n, err := jsonString(b, i)
	if err != nil {
		return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf(`want a key "id" or "ids": %w`, err)}
	}
	i = skipSpace(b, i+n)
	if i >= len(b) || b[i] != ':' {
		return i, &LineError{Value: clip(b[open:]), Err: fmt.Errorf("%s: want ':' after the key", at(b, i))}
	}
	i = skipSpace(b, i+1)
	switch string(key) {
	case "id":
		i, err = p.value(b, i, dst)
	case "ids":
		if i >= len(b) || b[i] != '[' {
			return i, &LineError{Value: clip(b[min(i, len(b)):]), Err: fmt.Errorf(`%s: "ids" must be an array`, at(b, i))}
		}
		i, err = p.array(b, i, dst)
	default:
		return i, &LineError{Value: clip(key), Err: fmt.Errorf("unknown key %s (want \"id\" or \"ids\")", quoted(string(key)))}
	}
	if err != nil {
		return i, err
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '}' {
		return i, &LineError{Value: clip(b[min(i, len(b)):]), Err: fmt.Errorf("%s: want '}' after the value (one key per object)", at(b, i))}
	}
	return i + 1, nil
}

// at names byte i of b, or the end of the line when i is past it.
func at(b []byte, i int) string {
	if i >= len(b) {
		return fmt.Sprintf("the line ends at byte %d", i)
	}
	return fmt.Sprintf("byte %d is %s", i, verify.QuoteByte(b[i]))
}

// jsonString decodes the JSON string at b[i] (a '"') and returns its
// content and its length in b. Without escapes the content aliases b;
// with escapes it is a new slice. Bytes of 0x80 and above pass through
// as they are (the kind's parser judges them); an escaped lone surrogate
// is an error, not U+FFFD. Errors name the byte.
func jsonString(b []byte, i int) ([]byte, int, error) {
	var out []byte // nil until the first escape
	from := i + 1  // the next byte not yet copied to out
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if out == nil {
				return b[i+1 : j], j + 1 - i, nil
			}
			return append(out, b[from:j]...), j + 1 - i, nil
		case c < 0x20:
			return nil, 0, fmt.Errorf("byte %d is %s: a control character inside a JSON string (escape it)", j, verify.QuoteByte(c))
		case c == '\\':
			out = append(out, b[from:j]...)
			r, n, err := unescape(b, j)
			if err != nil {
				return nil, 0, err
			}
			out = utf8.AppendRune(out, r)
			j += n - 1
			from = j + 1
		}
	}
	return nil, 0, fmt.Errorf("the JSON string at byte %d is not closed", i)
}

// unescape decodes the escape at b[j] (a '\'), returning the character
// and the escape's length.
func unescape(b []byte, j int) (rune, int, error) {
	if j+1 >= len(b) {
		return 0, 0, fmt.Errorf("the line ends inside the escape at byte %d", j)
	}
	switch c := b[j+1]; c {
	case '"', '\\', '/':
		return rune(c), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, err := hex4(b, j)
		if err != nil {
			return 0, 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, nil
		}
		if r < 0xdc00 && j+7 < len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
			if lo, err := hex4(b, j+6); err == nil {
				if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
					return dec, 12, nil
				}
			}
		}
		return 0, 0, fmt.Errorf("the escape at byte %d, %s, is a lone UTF-16 surrogate: not a character", j, b[j:j+6])
	default:
		return 0, 0, fmt.Errorf("byte %d is %s: not a JSON escape (want one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", j+1, verify.QuoteByte(c))
	}
}

// hex4 reads the four hex digits of the \u escape at b[j].
func hex4(b []byte, j int) (rune, error) {
	var r rune
	for k := j + 2; k < j+6; k++ {
		if k >= len(b) {
			return 0, fmt.Errorf("the line ends inside the escape at byte %d", j)
		}
		v, ok := hexDigit(b[k])
		if !ok {
			return 0, fmt.Errorf("byte %d is %s: want 4 hex digits after \\u", k, verify.QuoteByte(b[k]))
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
