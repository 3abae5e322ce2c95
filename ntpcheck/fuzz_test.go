package ntpcheck

import (
	"errors"
	"testing"
)

func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"pool.ntp.org", "127.0.0.1:123", "[::1]:1123", "::1", "[fe80::1]", "a:0", "a:65536",
		"", ":", "[", "[::1", "[::1]x", "a:b:c", "host:+12", "-bad-.com", "time.example.org.", "a b", "1.2.3.4:0123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseServer(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidServer) {
				t.Fatalf("ParseServer(%q) error %v does not wrap ErrInvalidServer", s, err)
			}
			return
		}
		again, err := ParseServer(got)
		if err != nil || again != got {
			t.Fatalf("ParseServer(%q) = %q, which reparses to %q, %v", s, got, again, err)
		}
	})
}

func FuzzParseServerList(f *testing.F) {
	for _, s := range []string{"a,b c", " , ", "127.0.0.1:123,[::1]:123", "a,,b", "x:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseServerList(s)
		if err != nil {
			return
		}
		for _, a := range list {
			if b, err := ParseServer(a); err != nil || a != b {
				t.Fatalf("ParseServerList(%q) gave %q, not canonical (%q, %v)", s, a, b, err)
			}
		}
	})
}
