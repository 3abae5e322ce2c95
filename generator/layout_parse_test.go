package generator

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseLayout(t *testing.T) {
	for _, p := range Presets() {
		l, err := ParseLayout(p.Name)
		if err != nil || l != p {
			t.Errorf("ParseLayout(%q) = %+v, %v; want the preset", p.Name, l, err)
		}
	}
	for _, c := range []struct {
		in      string
		t, n, s uint
		dc      uint
		tick    time.Duration
		name    string
	}{
		{"50/13/0", 50, 13, 0, 0, time.Millisecond, "50/13/0"},
		{"41/10/12", 41, 10, 12, 0, time.Millisecond, "41/10/12"},
		{"63/0/0@1h", 63, 0, 0, 0, time.Hour, "63/0/0@1h0m0s"},
		{"40/3+7/13@100us", 40, 10, 13, 3, 100 * time.Microsecond, "40/3+7/13@100µs"},
		{"43/20/0@1us", 43, 20, 0, 0, time.Microsecond, "43/20/0@1µs"},
		{"1/0/62", 1, 0, 62, 0, time.Millisecond, "1/0/62"},
	} {
		l, err := ParseLayout(c.in)
		if err != nil {
			t.Errorf("ParseLayout(%q): %v", c.in, err)
			continue
		}
		if l.TimeBits != c.t || l.NodeBits != c.n || l.SeqBits != c.s || l.DatacenterBits != c.dc || l.Tick != c.tick || l.Name != c.name || !l.Epoch.Equal(DefaultEpoch) {
			t.Errorf("ParseLayout(%q) = %+v", c.in, l)
		}
		// The name reads back as the same layout.
		if back, err := ParseLayout(l.Name); err != nil || back != l {
			t.Errorf("ParseLayout(%q) = %+v, %v; want %+v", l.Name, back, err, l)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", ""}, // "" is the default preset: no error
		{"41/10", "neither a preset"},
		{"41/10/12/1", "neither a preset"},
		{"40/10/12", "= 62, want 63"},
		{"41/10/13", "= 64, want 63"},
		{"x/10/12", "time bits"},
		{"41/-1/12", "node bits"},
		{"41/10/99", "sequence bits"},
		{"0/51/12", "TimeBits = 0"},
		{"41/0+10/12", "datacenter bits 0"},
		{"41/5+x/12", "worker bits"},
		{"41/10/12@0s", "tick"},
		{"41/10/12@999ns", "tick"},
		{"41/10/12@2h", "tick"},
		{"41/10/12@soon", "tick"},
	} {
		_, err := ParseLayout(c.in)
		if c.want == "" {
			if err != nil {
				t.Errorf("ParseLayout(%q): %v", c.in, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseLayout(%q) = %v; want an ErrInvalidLayout containing %q", c.in, err, c.want)
		}
	}
}

// FuzzParseLayout checks that ParseLayout never panics, that what it
// accepts is valid, and that its name reads back as the same layout.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"41/10/12", "50/13/0", "40/3+7/13@100us", "63/0/0", "sonyflake", "1/1/61@1h", "41/10/12@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidLayout) {
				t.Fatalf("ParseLayout(%q): error %v does not wrap ErrInvalidLayout", s, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLayout(%q) accepted an invalid layout: %v", s, err)
		}
		if back, err := ParseLayout(l.Name); err != nil || back != l {
			t.Fatalf("ParseLayout(%q).Name = %q reads back as %+v, %v", s, l.Name, back, err)
		}
	})
}
