package generator

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ID is a Snowflake ID: time, node and sequence fields packed into the low
// 63 bits of an int64 (the sign bit is always 0), so IDs from one generator
// sort by issue order. Its layout is not stored in it; decode with the
// Layout that made it.
//
// ID marshals to JSON as a decimal string, because JavaScript numbers lose
// precision above 2^53; it unmarshals from a string or, for compatibility,
// a bare number. It marshals to text as a decimal.
type ID int64

// String returns the ID in decimal. It allocates the string.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// maxQuoted caps how much of a bad input an error message repeats.
const maxQuoted = 64

// quoteInput quotes s for an error message, truncated to maxQuoted bytes.
func quoteInput(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// quoteByte quotes one byte of input for an error message: as Go quotes
// an ASCII character ('x', '\t', '\x00'), and a byte above 0x7f, which is
// no character by itself, as '\xbe'.
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`'\x%02x'`, c)
}

// ParseID parses a strict decimal ID: one or more ASCII digits, no sign, no
// spaces, no leading zeros (except "0" itself), at most 2^63-1. It is the
// inverse of String. Errors name the value and wrap ErrInvalidID. It does
// not allocate on success.
func ParseID(s string) (ID, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty string", ErrInvalidID)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: %s has a leading zero", ErrInvalidID, quoteInput(s))
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %s is not a decimal number (byte %d is %s)", ErrInvalidID, quoteInput(s), i, quoteByte(c))
		}
		if v > (1<<63-1)/10 {
			return 0, fmt.Errorf("%w: %s exceeds 2^63-1", ErrInvalidID, quoteInput(s))
		}
		v = v*10 + uint64(c-'0')
		if v > 1<<63-1 {
			return 0, fmt.Errorf("%w: %s exceeds 2^63-1", ErrInvalidID, quoteInput(s))
		}
	}
	return ID(v), nil
}

// MarshalJSON encodes the ID as a JSON string of decimal digits.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 21)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string holding a strict decimal ID (as
// ParseID) or a bare JSON number of digits only (no sign, fraction or
// exponent). null leaves the ID unchanged, as encoding/json expects.
// Errors name the value and wrap ErrInvalidID.
func (id *ID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%w: JSON %s is not a string: %v", ErrInvalidID, quoteInput(string(b)), err)
		}
		v, err := ParseID(s)
		if err != nil {
			return err
		}
		*id = v
		return nil
	}
	v, err := ParseID(string(b))
	if err != nil {
		return fmt.Errorf("%w: JSON %s is neither a string nor a non-negative integer", ErrInvalidID, quoteInput(string(b)))
	}
	*id = v
	return nil
}

// MarshalText encodes the ID in decimal.
func (id ID) MarshalText() ([]byte, error) { return strconv.AppendInt(nil, int64(id), 10), nil }

// UnmarshalText parses a strict decimal ID, as ParseID.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Compile-time checks.
var (
	_ json.Marshaler   = ID(0)
	_ json.Unmarshaler = (*ID)(nil)
	_ fmt.Stringer     = ID(0)
)
