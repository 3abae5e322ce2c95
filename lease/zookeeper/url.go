package zookeeper

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/snowchaos/snowchaos/lease"
)

// Scheme is the URL scheme of a ZooKeeper lease store: zk://host:port/path.
const Scheme = "zk"

// maxServers bounds the servers a URL may name.
const maxServers = 64

// maxRootLen bounds the root path.
const maxRootLen = 512

// ParseURL reads zk://host:port[,host:port...][/root] into the servers
// ("host:port") and the root path (DefaultRoot when the URL has none). A
// bad URL fails with lease.ErrInvalidConfig naming the part at fault.
func ParseURL(s string) (servers []string, root string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: zookeeper URL %q: %s", lease.ErrInvalidConfig, s, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, Scheme+"://")
	if !ok {
		return nil, "", bad("want zk://host:port[,host:port][/root]")
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(hosts, "@?#") {
		return nil, "", bad("user info, queries and fragments are not supported")
	}
	if hosts == "" {
		return nil, "", bad("no server")
	}
	for _, hp := range strings.Split(hosts, ",") {
		h, port, err := net.SplitHostPort(hp)
		if err != nil || h == "" {
			return nil, "", bad("server %q: want host:port", hp)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, "", bad("server %q: port %q not in [1, 65535]", hp, port)
		}
		if len(servers) == maxServers {
			return nil, "", bad("more than %d servers", maxServers)
		}
		servers = append(servers, hp)
	}
	root = DefaultRoot
	if path = strings.TrimSuffix(path, "/"); path != "" {
		root = "/" + path
	}
	if err := checkRoot(root); err != nil {
		return nil, "", bad("%v", err)
	}
	return servers, root, nil
}

// checkRoot reports why p is not a usable root path: absolute, no empty,
// "." or ".." segment, no control character, at most maxRootLen bytes.
func checkRoot(p string) error {
	switch {
	case p == "/":
		return fmt.Errorf("root path must not be /")
	case !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/"):
		return fmt.Errorf("root path %q must start and must not end with /", p)
	case len(p) > maxRootLen:
		return fmt.Errorf("root path longer than %d bytes", maxRootLen)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("root path %q lies in ZooKeeper's reserved /zookeeper", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("root path %q has an empty, . or .. segment", p)
		}
		for _, r := range seg {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 && r <= 0xffff {
				return fmt.Errorf("root path %q has a character ZooKeeper refuses (%U)", p, r)
			}
		}
	}
	return nil
}

// URL returns the zk:// URL of servers and root (the inverse of ParseURL).
func URL(servers []string, root string) string {
	return Scheme + "://" + strings.Join(servers, ",") + root
}
