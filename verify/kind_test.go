package verify

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/snowchaos/snowchaos/generator"
)

func TestKindNames(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k, got, err)
		}
	}
	if _, err := ParseKind("uuid7"); err == nil || !strings.Contains(err.Error(), "uuidv7") {
		t.Fatalf("unknown kind: %v", err)
	}
	if Kind(200).String() != "kind(200)" {
		t.Fatal(Kind(200).String())
	}
	for k, want := range map[Kind][2]bool{KindSnowflake: {true, true}, KindUUIDv7: {true, true}, KindULID: {true, true},
		KindUUIDv4: {false, false}, KindUUID: {false, false}, KindString: {false, false}} {
		if k.Ordered() != want[0] || k.Timed() != want[1] {
			t.Errorf("%s: ordered %v timed %v", k, k.Ordered(), k.Timed())
		}
	}
}

// Known values from the specifications.
func TestKnownIDs(t *testing.T) {
	// RFC 9562 appendix A.6: a UUIDv7 for 2022-02-22T19:22:22Z.
	x, err := ParseUUIDVersion("017F22E2-79B0-7CC3-98C4-DC0C0C07398F", 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.UnixMilli(x.UnixMilli()).UTC(); !got.Equal(time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC)) {
		t.Fatalf("UUIDv7 time %v", got)
	}
	if x.UUID() != "017f22e2-79b0-7cc3-98c4-dc0c0c07398f" || x.Version() != 7 {
		t.Fatalf("UUID text %s version %d", x.UUID(), x.Version())
	}
	// The ULID specification's example.
	u, err := ParseULID("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if err != nil {
		t.Fatal(err)
	}
	if u.UnixMilli() != 1469922850259 || u.ULID() != "01ARZ3NDEKTSV4RRFFQ69G5FAV" {
		t.Fatalf("ULID ms %d text %s", u.UnixMilli(), u.ULID())
	}
	if l, _ := ParseULID("01arz3ndektsv4rrffq69g5fav"); l != u {
		t.Fatal("lower-case ULID differs")
	}
	// A Discord ID (42-bit ms since 2015, 5+5-bit worker and process, 12-bit
	// increment): until 2084 its top bit is 0, so the 63-bit layout
	// 41/5+5/12 with Discord's epoch decodes it exactly.
	discord := generator.Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, DatacenterBits: 5, Epoch: time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)}
	id, err := ParseSnowflake("175928847299117063")
	if err != nil {
		t.Fatal(err)
	}
	p := discord.Decode(id)
	if !p.Time.Equal(time.Date(2016, 4, 30, 11, 18, 25, 796e6, time.UTC)) || p.Datacenter != 1 || p.Worker != 0 || p.Seq != 7 {
		t.Fatalf("Discord decode %+v", p)
	}
}

func TestParseErrorsNameTheValue(t *testing.T) {
	cases := []struct {
		parse func(string) error
		in    string
		want  string
	}{
		{func(s string) error { _, err := ParseUUID(s); return err }, "017f22e2-79b0-7cc3-98c4-dc0c0c07398", "35 bytes"},
		{func(s string) error { _, err := ParseUUID(s); return err }, "017f22e2_79b0-7cc3-98c4-dc0c0c07398f", "byte 8 is '_'"},
		{func(s string) error { _, err := ParseUUID(s); return err }, "017f22e2-79b0-7cc3-98c4-dc0c0c07398g", "byte 35 is 'g'"},
		{func(s string) error { _, err := ParseUUID(s); return err }, "{017f22e2-79b0-7cc3-98c4-dc0c0c0739}", "byte 0 is '{'"},
		{func(s string) error { _, err := ParseUUID(s); return err }, " 017f22e279b07cc398c4dc0c0c07398", "byte 0 is ' '"},
		{func(s string) error { _, err := ParseUUIDVersion(s, 7); return err }, "017f22e2-79b0-4cc3-98c4-dc0c0c07398f", "version 4, want 7"},
		{func(s string) error { _, err := ParseUUIDVersion(s, 4); return err }, "017f22e2-79b0-4cc3-c8c4-dc0c0c07398f", "variant bits 11"},
		{func(s string) error { _, err := ParseULID(s); return err }, "01ARZ3NDEKTSV4RRFFQ69G5FA", "25 bytes"},
		{func(s string) error { _, err := ParseULID(s); return err }, "01ARZ3NDEKTSV4RRFFQ69G5FAU", "byte 25 is 'U'"},
		{func(s string) error { _, err := ParseULID(s); return err }, "01ARZ3NDEKTSV4RRFFQ69G5FAI", "not Crockford"},
		{func(s string) error { _, err := ParseULID(s); return err }, "81ARZ3NDEKTSV4RRFFQ69G5FAV", "exceeds '7'"},
		{func(s string) error { _, err := ParseSnowflake(s); return err }, "9223372036854775808", "exceeds 2^63-1"},
		{func(s string) error { _, err := ParseSnowflake(s); return err }, "-1", "not a decimal"},
		{func(s string) error { _, err := ParseSnowflake(s); return err }, "0123", "leading zero"},
		{ParseString, "", "empty"},
		{ParseString, "a\tb", "control character"},
		{ParseString, "a\xffb", "invalid UTF-8"},
		{ParseString, strings.Repeat("x", MaxStringLen+1), "257 bytes"},
	}
	for _, c := range cases {
		err := c.parse(c.in)
		if err == nil || !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want ErrInvalidID mentioning %q", c.in, err, c.want)
			continue
		}
		if c.in != "" && !strings.Contains(err.Error(), quote(c.in)) {
			t.Errorf("%q: error %v does not name the value", c.in, err)
		}
	}
	if err := ParseString("order-42 ✓ \ufffd"); err != nil {
		t.Errorf("valid string: %v", err)
	}
}

func TestValueString(t *testing.T) {
	x := ID128{Hi: 0x017f22e279b07cc3, Lo: 0x98c4dc0c0c07398f}
	for _, c := range []struct {
		v    Value
		want string
	}{
		{SnowflakeValue(42), "42"},
		{Value{Kind: KindUUIDv7, Bits: x}, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"},
		{Value{Kind: KindUUID, Bits: x}, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"},
		{Value{Kind: KindULID, Bits: ID128{Hi: 0x01563e3ab5d3d676, Lo: 0x4c61efb99302bd5b}}, "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{Value{Kind: KindString, Text: "abc"}, "abc"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
	if !(Value{}).IsZero() || SnowflakeValue(1).Snowflake() != 1 {
		t.Fatal("zero or Snowflake")
	}
	if ID128FromBytes(x.Bytes()) != x || x.Compare(x) != 0 || x.Compare(ID128{Hi: x.Hi, Lo: x.Lo + 1}) != -1 || (ID128{Hi: x.Hi + 1}).Compare(x) != 1 {
		t.Fatal("bytes or compare")
	}
}

// ulidRef decodes a ULID with math/big: the dumb reference.
func ulidRef(s string) (ID128, bool) {
	if len(s) != 26 {
		return ID128{}, false
	}
	v := new(big.Int)
	for _, c := range strings.ToUpper(s) {
		i := strings.IndexRune(crockford, c)
		if i < 0 {
			return ID128{}, false
		}
		v.Lsh(v, 5).Or(v, big.NewInt(int64(i)))
	}
	if v.BitLen() > 128 {
		return ID128{}, false
	}
	lo := new(big.Int).And(v, new(big.Int).SetUint64(^uint64(0))).Uint64()
	return ID128{Hi: new(big.Int).Rsh(v, 64).Uint64(), Lo: lo}, true
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"017f22e2-79b0-7cc3-98c4-dc0c0c07398f", "017F22E279B07CC398C4DC0C0C07398F",
		"00000000-0000-0000-0000-000000000000", "{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}", "urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
		"017f22e2-79b0-7cc3-98c4_dc0c0c07398f", "017f22e2-79b0-7cc3-98c4-dc0c0c07398fff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseUUID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidID", s, err)
			}
			return
		}
		// What the strict parser accepts, the lenient reference accepts
		// with the same bytes, and the canonical text parses back.
		ref, rerr := uuid.Parse(s)
		if rerr != nil || ID128FromBytes(ref) != x {
			t.Fatalf("%q: parsed %s, google/uuid %v %v", s, x.UUID(), ref, rerr)
		}
		if len(s) != 32 && len(s) != 36 {
			t.Fatalf("%q: accepted a %d-byte form", s, len(s))
		}
		if y, err := ParseUUID(x.UUID()); err != nil || y != x || x.UUID() != strings.ToLower(ref.String()) {
			t.Fatalf("%q: round trip %s %v", s, x.UUID(), err)
		}
		for _, v := range []int{4, 7} {
			_, err := ParseUUIDVersion(s, v)
			if ok := ref.Version() == uuid.Version(v) && ref.Variant() == uuid.RFC4122; ok != (err == nil) {
				t.Fatalf("%q: version %d: %v, reference version %d variant %v", s, v, err, ref.Version(), ref.Variant())
			}
		}
	})
}

func FuzzParseULID(f *testing.F) {
	for _, s := range []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "80000000000000000000000000",
		"01arz3ndektsv4rrffq69g5fav", "01ARZ3NDEKTSV4RRFFQ69G5FAI", "01ARZ3NDEKTSV4RRFFQ69G5FA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseULID(s)
		ref, ok := ulidRef(s)
		if ok != (err == nil) || ok && ref != x {
			t.Fatalf("%q: parsed %v %v, reference %v %v", s, x, err, ref, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("%q: %v does not wrap ErrInvalidID", s, err)
			}
			return
		}
		if y, err := ParseULID(x.ULID()); err != nil || y != x || x.ULID() != strings.ToUpper(s) {
			t.Fatalf("%q: round trip %s %v", s, x.ULID(), err)
		}
	})
}

func FuzzParseString(f *testing.F) {
	for _, s := range []string{"a", "order-1", "", "a\x00", "\xff", "✓\ufffd", strings.Repeat("y", MaxStringLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ParseString(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if s == "" || len(s) > MaxStringLen || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }) {
			t.Fatalf("%q accepted", s)
		}
		if strings.ToValidUTF8(s, "!") != s {
			t.Fatalf("%q: invalid UTF-8 accepted", s)
		}
	})
}
