package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

// ErrLine is wrapped by every LineError.
var ErrLine = errors.New("sink: bad line")

// LineError is a line that is not what the protocol allows: it names the
// line (counted from 1 in its body, or in the whole stream for standard
// input) and quotes the value.
type LineError struct {
	// Batch is the request (or standard-input batch) the line came in,
	// counted from 1; Line its line number within the request body, or
	// within the whole input for standard input.
	Batch, Line int
	// Value is the offending value (or the whole line), truncated.
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

func clip(b []byte) string {
	if len(b) > maxValue {
		return string(b[:maxValue]) + "..."
	}
	return string(b)
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
// with spaces at either end, as a JSON string. Everything else is an
// error naming the value: a JSON value of another shape, an unknown key,
// trailing text, a value that is not an ID of the kind.
type Parser struct {
	kind verify.Kind
}

// NewParser returns a Parser for kind.
func NewParser(kind verify.Kind) *Parser { return &Parser{kind: kind} }

// Line parses one line (without its newline), appending its IDs to dst;
// a bad line appends none. The error, if any, is a *LineError with Line
// set to line.
func (p *Parser) Line(b []byte, line int, dst *IDs) error {
	b = trim(b)
	if len(b) == 0 {
		return nil
	}
	n0, n1, n2 := len(dst.Snowflakes), len(dst.Wide), len(dst.Strings)
	var err error
	switch b[0] {
	case '"', '[', '{':
		err = p.json(b, dst)
	default:
		err = p.text(b, dst)
	}
	if err != nil {
		dst.Snowflakes, dst.Wide, dst.Strings = dst.Snowflakes[:n0], dst.Wide[:n1], dst.Strings[:n2]
		var le *LineError
		if errors.As(err, &le) {
			le.Line = line
			return le
		}
		return &LineError{Line: line, Value: clip(b), Err: err}
	}
	return nil
}

// trim drops spaces, tabs and carriage returns at both ends.
func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
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

// json parses a line that starts with '"', '[' or '{'.
func (p *Parser) json(b []byte, dst *IDs) error {
	var err error
	i := 0
	switch b[0] {
	case '"':
		i, err = p.value(b, 0, dst)
	case '[':
		i, err = p.array(b, 0, dst)
	case '{':
		i, err = p.object(b, dst)
	}
	if err != nil {
		return err
	}
	if i = skipSpace(b, i); i != len(b) {
		return &LineError{Value: clip(b[i:]), Err: fmt.Errorf("text after the JSON value at byte %d", i)}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// value parses a JSON string or (for Snowflakes) number at b[i], appending
// the ID, and returns the index after it.
func (p *Parser) value(b []byte, i int, dst *IDs) (int, error) {
	if i >= len(b) {
		return i, &LineError{Value: clip(b), Err: errors.New("line ends where an ID was expected")}
	}
	switch c := b[i]; {
	case c == '"':
		s, n, err := jsonString(b[i:])
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
			return i, &LineError{Value: clip(b[i:]), Err: errors.New("a Snowflake must be an integer")}
		}
		return j, p.text(b[i:j], dst)
	default:
		return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %q: want an ID as a JSON string", i, c)}
	}
}

// array parses a JSON array of IDs at b[i].
func (p *Parser) array(b []byte, i int, dst *IDs) (int, error) {
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
			return i, &LineError{Value: clip(b), Err: errors.New("unterminated JSON array")}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("byte %d is %q: want ',' or ']'", i, b[i])}
		}
	}
}

// object parses {"id": ID} or {"ids": [ID, ...]}.
func (p *Parser) object(b []byte, dst *IDs) (int, error) {
	i := skipSpace(b, 1)
	key, n, err := jsonString(b[i:])
	if err != nil {
		return i, &LineError{Value: clip(b[i:]), Err: fmt.Errorf("want a key \"id\" or \"ids\": %w", err)}
	}
	i = skipSpace(b, i+n)
	if i >= len(b) || b[i] != ':' {
		return i, &LineError{Value: clip(b), Err: errors.New("want ':' after the key")}
	}
	i = skipSpace(b, i+1)
	switch string(key) {
	case "id":
		i, err = p.value(b, i, dst)
	case "ids":
		if i >= len(b) || b[i] != '[' {
			return i, &LineError{Value: clip(b[i:]), Err: errors.New(`"ids" must be an array`)}
		}
		i, err = p.array(b, i, dst)
	default:
		return i, &LineError{Value: clip(key), Err: fmt.Errorf("unknown key %q (want \"id\" or \"ids\")", key)}
	}
	if err != nil {
		return i, err
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '}' {
		return i, &LineError{Value: clip(b[min(i, len(b)):]), Err: errors.New("want '}' after the value (one key per object)")}
	}
	return i + 1, nil
}

// jsonString decodes the JSON string at the start of b and returns its
// content and length in b. Without escapes the content aliases b;
// escapes are decoded by encoding/json, so the rules are JSON's exactly.
func jsonString(b []byte) ([]byte, int, error) {
	if len(b) == 0 || b[0] != '"' {
		return nil, 0, errors.New("want a JSON string")
	}
	esc := false
	for j := 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			esc = true
			j++
		case c == '"':
			if !esc {
				return b[1:j], j + 1, nil
			}
			var s string
			if err := json.Unmarshal(b[:j+1], &s); err != nil {
				return nil, 0, fmt.Errorf("bad JSON string: %w", err)
			}
			return []byte(s), j + 1, nil
		case c < 0x20:
			return nil, 0, fmt.Errorf("control character %s in a JSON string", strconv.QuoteRune(rune(c)))
		}
	}
	return nil, 0, errors.New("unterminated JSON string")
}
