package zkurl_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		servers []string
		root    string
	}{
		{"zk://127.0.0.1:2181", []string{"127.0.0.1:2181"}, zkurl.DefaultRoot},
		{"zk://127.0.0.1:2181/", []string{"127.0.0.1:2181"}, zkurl.DefaultRoot},
		{"zk://a:1,b:2,[::1]:3/ids/leases", []string{"a:1", "b:2", "[::1]:3"}, "/ids/leases"},
		{"zk://zk-0.zk:2181/snowchaos/", []string{"zk-0.zk:2181"}, "/snowchaos"},
		{"ZK://h:1/x", []string{"h:1"}, "/x"},
	} {
		servers, root, err := zkurl.Parse(c.in)
		if err != nil || !slices.Equal(servers, c.servers) || root != c.root {
			t.Errorf("Parse(%q) = %v %q %v, want %v %q", c.in, servers, root, err, c.servers, c.root)
		}
	}
	for in, part := range map[string]string{
		"":                          "want zk://",
		"etcd://h:1":                "want zk://",
		"zk://":                     "no server",
		"zk:///x":                   "no server",
		"zk://h/x":                  `server "h"`,
		"zk://h:0":                  "port",
		"zk://h:99999":              "port",
		"zk://h:1,,h:2":             `server ""`,
		"zk://:1":                   `server ":1"`,
		"zk://u:p@h:1":              "user info",
		"zk://h:1?x=1":              "user info, queries",
		"zk://h:1/a//b":             "segment",
		"zk://h:1/a/../b":           "segment",
		"zk://h:1/zookeeper/config": "reserved",
		"zk://h:1/a\x01":            "refuses",
	} {
		_, _, err := zkurl.Parse(in)
		if !errors.Is(err, lease.ErrInvalidConfig) || !strings.Contains(err.Error(), part) {
			t.Errorf("Parse(%q): %v, want ErrInvalidConfig naming %q", in, err, part)
		}
	}
}

// FuzzParse: Parse never panics; what it accepts has 1 to 64
// servers and a valid root, and round-trips through String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"zk://127.0.0.1:2181", "zk://a:1,b:2/x/y", "zk://h:1/", "zk://[::1]:2181/r", "zk://h:1/a//b", "zk://h", "zk://u@h:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		servers, root, err := zkurl.Parse(s)
		if err != nil {
			if !errors.Is(err, lease.ErrInvalidConfig) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalidConfig", s, err)
			}
			return
		}
		if len(servers) == 0 || len(servers) > 64 || !strings.HasPrefix(root, "/") {
			t.Fatalf("Parse(%q) = %v %q", s, servers, root)
		}
		s2, r2, err := zkurl.Parse(zkurl.String(servers, root))
		if err != nil || !slices.Equal(s2, servers) || r2 != root {
			t.Fatalf("round trip of %q: %v %q %v", s, s2, r2, err)
		}
	})
}
