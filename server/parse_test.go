package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"1", 1}, {"4096", 4096}, {"10", 10}, {"0004", 0}, {"00005", 0}, {"01", 0}, {"0", 0}, {"00", 0}, {"4097", 0}, {"-1", 0}, {"1e9", 0}, {"abc", 0}, {"", 0}, {" 1", 0}, {"1 ", 0}, {"99999999999999999999999999", 0}} {
		got, err := ParseCount(tc.in, 4096)
		if tc.want == 0 {
			if !errors.Is(err, ErrBadCount) || !strings.Contains(err.Error(), "count") {
				t.Errorf("ParseCount(%q) = %d, %v; want ErrBadCount", tc.in, got, err)
			}
			if tc.in != "" && !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
				t.Errorf("ParseCount(%q) error %q does not name the value", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseCount checks ParseCount against strconv.Atoi on every input.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"1", "4096", "0", "-1", "1e9", "abc", "", "+1", "0x10", "٣", "4097", "18446744073709551617", "00005"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseCount(s, 4096)
		digits := s != "" && strings.Trim(s, "0123456789") == "" && s[0] != '0'
		want, aerr := strconv.Atoi(s)
		ok := digits && aerr == nil && want >= 1 && want <= 4096
		if ok != (err == nil) {
			t.Fatalf("ParseCount(%q) = %d, %v; Atoi %d, %v", s, got, err, want, aerr)
		}
		if ok && got != want {
			t.Fatalf("ParseCount(%q) = %d, want %d", s, got, want)
		}
		if err != nil && !errors.Is(err, ErrBadCount) {
			t.Fatalf("error %v does not wrap ErrBadCount", err)
		}
	})
}

// FuzzParseDecodePath checks the decode path parser against
// generator.ParseID and that an accepted ID round-trips.
func FuzzParseDecodePath(f *testing.F) {
	for _, s := range []string{"", "x", "0", "1", "9223372036854775807", "9223372036854775808", "-1", "01", "1/2", "%31", "1%2F2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseDecodePath(decodePrefix + s)
		if err != nil {
			if !errors.Is(err, generator.ErrInvalidID) {
				t.Fatalf("error %v does not wrap ErrInvalidID", err)
			}
			return
		}
		if strings.Contains(s, "/") || id.String() != s || id < 0 {
			t.Fatalf("ParseDecodePath(%q) accepted %d", s, id)
		}
	})
}

// FuzzIDsQuery feeds arbitrary raw queries to /v1/ids: the handler answers
// 200 with exactly count strictly increasing IDs, or 400 with a JSON error;
// it never panics or answers anything else.
func FuzzIDsQuery(f *testing.F) {
	for _, s := range []string{"count=1", "count=0", "count=-1", "count=1e9", "count=abc", "count=", "count=%zz", "a=b&count=2", "count=3&count=3", ";", "count=1;", "&&&count=5&"} {
		f.Add(s)
	}
	n := newNode(f, func(_ *generator.Settings, c *Config) { c.MaxBatch = 64 })
	h := n.srv.Handler()
	f.Fuzz(func(t *testing.T, q string) {
		req := httptest.NewRequest("GET", "/v1/ids", nil)
		req.URL.RawQuery = q
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			ids, err := ParseIDs(rec.Body.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("not increasing at %d", i)
				}
			}
		case http.StatusBadRequest:
			if !strings.HasPrefix(rec.Body.String(), `{"error":`) {
				t.Fatalf("400 body %q", rec.Body.String())
			}
		default:
			t.Fatalf("query %q: status %d %s", q, rec.Code, rec.Body.String())
		}
	})
}

// FuzzAppendIDs checks the body parser never panics and that whatever it
// accepts re-encodes to the same IDs.
func FuzzAppendIDs(f *testing.F) {
	for _, s := range []string{"1\n2\n", "1", `["1","2"]`, `{"id":"5"}`, "", "[]", `["01"]`, "1\r\n2", `[1,2]`, "x", `["1",]`, "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := ParseIDs(b)
		if err != nil {
			if !errors.Is(err, ErrBadBody) {
				t.Fatalf("error %v does not wrap ErrBadBody", err)
			}
			return
		}
		var text []byte
		for _, id := range ids {
			if id < 0 {
				t.Fatalf("negative ID %d", id)
			}
			text = strconv.AppendInt(text, int64(id), 10)
			text = append(text, '\n')
		}
		if len(ids) == 0 {
			return
		}
		again, err := ParseIDs(text)
		if err != nil || len(again) != len(ids) {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

func TestAppendIDs(t *testing.T) {
	for in, want := range map[string]string{
		"1\n2\n": "1,2", "1": "1", `["1", "2"]`: "1,2", `{"id":"5"}`: "5", "[]": "", "1\r\n2\r\n": "1,2",
	} {
		ids, err := ParseIDs([]byte(in))
		var parts []string
		for _, id := range ids {
			parts = append(parts, id.String())
		}
		if err != nil || strings.Join(parts, ",") != want {
			t.Errorf("ParseIDs(%q) = %v, %v; want %s", in, ids, err, want)
		}
	}
	for _, in := range []string{"", "x", "1\n\n2", `[1,2]`, `["1",]`, `["1"]x`, `{"x":1}`, "01", "-1", "9223372036854775808", `["1"`, "1 2"} {
		if ids, err := ParseIDs([]byte(in)); !errors.Is(err, ErrBadBody) {
			t.Errorf("ParseIDs(%q) = %v, %v; want ErrBadBody", in, ids, err)
		}
	}
}

// naiveIDList is the obvious encoding AppendIDList must match.
func naiveIDList(ids []generator.ID, asJSON bool) string {
	var parts []string
	for _, id := range ids {
		if asJSON {
			parts = append(parts, `"`+id.String()+`"`)
		} else {
			parts = append(parts, id.String()+"\n")
		}
	}
	if asJSON {
		return "[" + strings.Join(parts, ",") + "]\n"
	}
	return strings.Join(parts, "")
}

// FuzzAppendIDList checks the incremental encoder against the naive one on
// runs of consecutive IDs crossing carries and digit-count boundaries.
func FuzzAppendIDList(f *testing.F) {
	f.Add(int64(0), uint16(30), uint8(3), false)
	f.Add(int64(95), uint16(10), uint8(0), true)
	f.Add(int64(999_999_990), uint16(20), uint8(7), false)
	f.Add(int64(1<<63-5), uint16(5), uint8(1), true)
	f.Fuzz(func(t *testing.T, start int64, n uint16, gapEvery uint8, asJSON bool) {
		if start < 0 {
			start = -(start + 1)
		}
		var ids []generator.ID
		v := start
		for i := range int(n % 2000) {
			ids = append(ids, generator.ID(v))
			if v == 1<<63-1 {
				break
			}
			v++
			if gapEvery > 0 && i%int(gapEvery) == 0 && v < 1<<62 {
				v += int64(gapEvery) * 7
			}
		}
		got := string(AppendIDList(nil, ids, asJSON))
		if want := naiveIDList(ids, asJSON); got != want {
			t.Fatalf("AppendIDList(%v) = %q, want %q", ids, got, want)
		}
	})
}
