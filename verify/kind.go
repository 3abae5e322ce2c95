package verify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/snowchaos/snowchaos/generator"
)

// ErrInvalidID is wrapped by every error a parser in this package returns
// for text that is not an ID of the expected kind; the message names the
// value.
var ErrInvalidID = errors.New("verify: invalid ID")

// Kind is the kind of ID a Verifier checks, chosen at construction
// (Config.Kind). The zero value is KindSnowflake.
//
//	kind        bits  text form                         embedded time       order checked
//	snowflake    63   decimal                           layout's epoch/tick yes
//	uuidv7      128   8-4-4-4-12 hex, or 32 hex digits  48-bit Unix ms      yes
//	ulid        128   26 Crockford base32 characters    48-bit Unix ms      yes
//	uuidv4      128   as uuidv7                         none                no
//	uuid        128   as uuidv7, any version            none                no
//	string      any   opaque (at most MaxStringLen)     none                no
//
// Order (per stream and across restarts) is checked only where the kind
// defines one that generators promise: a UUIDv4 or an opaque string has no
// meaningful order, so for those kinds the order and restart figures stay
// zero and Result.Ordered is false. Lead and lag are computed only for
// kinds with an embedded time.
type Kind uint8

// The kinds of ID; see Kind.
const (
	// KindSnowflake: 63-bit Snowflake IDs (generator.ID) in an issuer's
	// generator.Layout, with any split, epoch and tick.
	KindSnowflake Kind = iota
	// KindUUIDv7: RFC 9562 version 7 UUIDs, time-ordered.
	KindUUIDv7
	// KindULID: ULIDs (48-bit Unix ms, 80 random bits), time-ordered.
	KindULID
	// KindUUIDv4: RFC 9562 version 4 (random) UUIDs.
	KindUUIDv4
	// KindUUID: RFC 9562 UUIDs of any version and variant, unordered.
	KindUUID
	// KindString: opaque strings, compared byte for byte.
	KindString
	numKinds
)

// MaxStringLen bounds the length in bytes of a KindString ID that
// ParseString accepts.
const MaxStringLen = 256

var kindNames = [numKinds]string{"snowflake", "uuidv7", "ulid", "uuidv4", "uuid", "string"}

// Kinds returns every kind, KindSnowflake first.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// String returns the kind's name: "snowflake", "uuidv7", "ulid", "uuidv4",
// "uuid" or "string".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind returns the kind named s (see Kind.String); an unknown name is
// an error listing the known ones.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("verify: unknown ID kind %q (known: %s)", s, strings.Join(kindNames[:], ", "))
}

// Ordered reports whether the kind's IDs have an order that the Verifier
// checks per stream and across restarts.
func (k Kind) Ordered() bool { return k <= KindULID }

// Timed reports whether the kind's IDs embed their issue time, so that
// lead and lag are computed.
func (k Kind) Timed() bool { return k <= KindULID }

// wide reports whether the kind's IDs are ID128 values.
func (k Kind) wide() bool { return k >= KindUUIDv7 && k <= KindUUID }

// ID128 is a 128-bit ID (a UUID or a ULID) as its two big-endian halves:
// Hi holds bytes 0-7. Comparing (Hi, Lo) orders IDs as their bytes, their
// canonical UUID text and their ULID text do.
type ID128 struct{ Hi, Lo uint64 }

// ID128FromBytes returns the ID whose big-endian bytes are b.
func ID128FromBytes(b [16]byte) ID128 {
	var x ID128
	for i := range 8 {
		x.Hi = x.Hi<<8 | uint64(b[i])
		x.Lo = x.Lo<<8 | uint64(b[8+i])
	}
	return x
}

// Bytes returns the ID's 16 big-endian bytes.
func (x ID128) Bytes() [16]byte {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(x.Hi >> (56 - 8*i))
		b[8+i] = byte(x.Lo >> (56 - 8*i))
	}
	return b
}

// Compare returns -1, 0 or +1 as x is below, equal to or above y.
func (x ID128) Compare(y ID128) int {
	switch {
	case x.Hi < y.Hi:
		return -1
	case x.Hi > y.Hi:
		return 1
	case x.Lo < y.Lo:
		return -1
	case x.Lo > y.Lo:
		return 1
	}
	return 0
}

// less reports x < y.
func (x ID128) less(y ID128) bool { return x.Hi < y.Hi || x.Hi == y.Hi && x.Lo < y.Lo }

// UnixMilli returns the 48-bit Unix millisecond timestamp in the top bits,
// where UUIDv7 and ULID keep it.
func (x ID128) UnixMilli() int64 { return int64(x.Hi >> 16) }

// Version returns the UUID version nibble (bits 48-51).
func (x ID128) Version() int { return int(x.Hi>>12) & 0xf }

// rfcVariant reports whether the variant bits are RFC 9562's 10xx.
func (x ID128) rfcVariant() bool { return x.Lo>>62 == 0b10 }

const hexDigits = "0123456789abcdef"

// UUID returns the canonical UUID text: 36 characters, lowercase hex,
// hyphens after 8, 12, 16 and 20 digits.
func (x ID128) UUID() string {
	var b [36]byte
	j := 0
	for i := range 32 {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b[j] = '-'
			j++
		}
		b[j] = hexDigits[x.nibble(i)]
		j++
	}
	return string(b[:])
}

// nibble returns hex digit i (0 = most significant).
func (x ID128) nibble(i int) uint64 {
	if i < 16 {
		return x.Hi >> (60 - 4*i) & 0xf
	}
	return x.Lo >> (60 - 4*(i-16)) & 0xf
}

// crockford is the ULID alphabet: Crockford's base32 without I, L, O, U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ULID returns the canonical ULID text: 26 uppercase Crockford base32
// characters.
func (x ID128) ULID() string {
	var b [26]byte
	hi, lo := x.Hi, x.Lo
	for i := 25; i >= 0; i-- {
		b[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}

// crockVal maps a byte to its base32 value, or 0xff: upper and lower case
// letters are accepted, I, L, O and U are not.
var crockVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(crockford) {
		c := crockford[i]
		t[c] = byte(i)
		if c >= 'A' && c <= 'Z' {
			t[c+'a'-'A'] = byte(i)
		}
	}
	return t
}()

// hexVal maps a byte to its hex value, or 0xff; either case.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 16 {
		t[hexDigits[i]] = byte(i)
		if i >= 10 {
			t[hexDigits[i]-'a'+'A'] = byte(i)
		}
	}
	return t
}()

// maxQuoted caps how much of a bad input an error repeats.
const maxQuoted = 80

// quote quotes s for an error message, truncated to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// QuoteByte quotes one byte of input for an error message: as Go quotes an
// ASCII character ('x', '\t', '\x00'), and a byte above 0x7f, which is no
// character by itself, as '\xbe' (never as the character U+00BE, '¾').
func QuoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`'\x%02x'`, c)
}

// ParseUUID parses a UUID of any version: the canonical 36-character form
// (8-4-4-4-12 hex digits with hyphens) or 32 hex digits without hyphens;
// hex digits in either case; nothing else (no braces, no "urn:uuid:", no
// spaces). Errors wrap ErrInvalidID and name the value and the offending
// position. It does not allocate on success.
func ParseUUID(s string) (ID128, error) {
	var x ID128
	switch len(s) {
	case 36:
		n := 0
		for i := 0; i < 36; i++ {
			c := s[i]
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if c != '-' {
					return ID128{}, fmt.Errorf("%w: UUID %s: byte %d is %s, want '-'", ErrInvalidID, quote(s), i, QuoteByte(c))
				}
				continue
			}
			v := hexVal[c]
			if v == 0xff {
				return ID128{}, fmt.Errorf("%w: UUID %s: byte %d is %s, not a hex digit", ErrInvalidID, quote(s), i, QuoteByte(c))
			}
			x = x.shl4(v)
			n++
		}
	case 32:
		for i := 0; i < 32; i++ {
			v := hexVal[s[i]]
			if v == 0xff {
				return ID128{}, fmt.Errorf("%w: UUID %s: byte %d is %s, not a hex digit", ErrInvalidID, quote(s), i, QuoteByte(s[i]))
			}
			x = x.shl4(v)
		}
	default:
		return ID128{}, fmt.Errorf("%w: UUID %s: %d bytes, want 36 (8-4-4-4-12) or 32 hex digits", ErrInvalidID, quote(s), len(s))
	}
	return x, nil
}

func (x ID128) shl4(v byte) ID128 {
	return ID128{Hi: x.Hi<<4 | x.Lo>>60, Lo: x.Lo<<4 | uint64(v)}
}

// ParseUUIDVersion parses a UUID as ParseUUID does and also requires the
// RFC 9562 variant and the given version; the error names the version
// found.
func ParseUUIDVersion(s string, version int) (ID128, error) {
	x, err := ParseUUID(s)
	if err != nil {
		return x, err
	}
	if !x.rfcVariant() {
		return ID128{}, fmt.Errorf("%w: UUID %s: variant bits %02b, want 10 (RFC 9562)", ErrInvalidID, quote(s), x.Lo>>62)
	}
	if v := x.Version(); v != version {
		return ID128{}, fmt.Errorf("%w: UUID %s: version %d, want %d", ErrInvalidID, quote(s), v, version)
	}
	return x, nil
}

// ParseULID parses a ULID: exactly 26 Crockford base32 characters (either
// case; I, L, O and U are rejected), the first at most '7' so that the
// value fits 128 bits. Errors wrap ErrInvalidID and name the value and
// the offending position. It does not allocate on success.
func ParseULID(s string) (ID128, error) {
	if len(s) != 26 {
		return ID128{}, fmt.Errorf("%w: ULID %s: %d bytes, want 26", ErrInvalidID, quote(s), len(s))
	}
	var x ID128
	for i := 0; i < 26; i++ {
		v := crockVal[s[i]]
		if v == 0xff {
			return ID128{}, fmt.Errorf("%w: ULID %s: byte %d is %s, not Crockford base32 (0-9, A-Z without I, L, O, U)", ErrInvalidID, quote(s), i, QuoteByte(s[i]))
		}
		if i == 0 && v > 7 {
			return ID128{}, fmt.Errorf("%w: ULID %s: first character %s exceeds '7' (overflows 128 bits)", ErrInvalidID, quote(s), QuoteByte(s[0]))
		}
		x = ID128{Hi: x.Hi<<5 | x.Lo>>59, Lo: x.Lo<<5 | uint64(v)}
	}
	return x, nil
}

// ParseSnowflake parses a strict decimal Snowflake ID (generator.ParseID):
// digits only, no sign or leading zero, at most 2^63-1. The error wraps
// ErrInvalidID as well as generator.ErrInvalidID.
func ParseSnowflake(s string) (generator.ID, error) {
	id, err := generator.ParseID(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidID, err)
	}
	return id, nil
}

// ParseString checks an opaque string ID: 1 to MaxStringLen bytes of
// printable ASCII or valid UTF-8 without control characters, so that what
// reaches the Verifier is what a report can print. Errors wrap
// ErrInvalidID and name the value.
func ParseString(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty string", ErrInvalidID)
	}
	if len(s) > MaxStringLen {
		return fmt.Errorf("%w: string %s: %d bytes, at most %d", ErrInvalidID, quote(s), len(s), MaxStringLen)
	}
	for i, r := range s {
		if r == 0xfffd && !strings.HasPrefix(s[i:], "\ufffd") {
			return fmt.Errorf("%w: string %s: invalid UTF-8 at byte %d", ErrInvalidID, quote(s), i)
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: string %s: control character %U at byte %d", ErrInvalidID, quote(s), r, i)
		}
	}
	return nil
}

// Parse128 parses the text form of a 128-bit kind (KindUUIDv7, KindULID,
// KindUUIDv4, KindUUID); it panics for other kinds.
func Parse128(k Kind, s string) (ID128, error) {
	switch k {
	case KindUUIDv7:
		return ParseUUIDVersion(s, 7)
	case KindUUIDv4:
		return ParseUUIDVersion(s, 4)
	case KindUUID:
		return ParseUUID(s)
	case KindULID:
		return ParseULID(s)
	}
	panic("verify: Parse128 of kind " + k.String())
}

// Value is one ID of any Kind, as results report it.
type Value struct {
	// Kind says which of the other fields holds the ID.
	Kind Kind
	// Bits holds a 128-bit ID, or a Snowflake in Bits.Lo.
	Bits ID128
	// Text holds a KindString ID.
	Text string
}

// SnowflakeValue returns id as a Value.
func SnowflakeValue(id generator.ID) Value {
	return Value{Kind: KindSnowflake, Bits: ID128{Lo: uint64(id)}}
}

// Snowflake returns the Snowflake a KindSnowflake Value holds.
func (v Value) Snowflake() generator.ID { return generator.ID(v.Bits.Lo) }

// IsZero reports whether v is the zero Value (no ID).
func (v Value) IsZero() bool { return v == Value{} }

// String returns the ID's canonical text: decimal for a Snowflake, the
// canonical UUID or ULID text, or the string itself.
func (v Value) String() string {
	switch {
	case v.Kind == KindSnowflake:
		return strconv.FormatInt(int64(v.Bits.Lo), 10)
	case v.Kind == KindULID:
		return v.Bits.ULID()
	case v.Kind.wide():
		return v.Bits.UUID()
	}
	return v.Text
}
