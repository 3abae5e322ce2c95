// Package zkurl reads and writes the zk:// URLs that name a ZooKeeper
// lease store (zk://host:port[,host:port...][/root]). It has no
// dependency on a ZooKeeper client, so scenario files and flags can be
// checked without one.
package zkurl

import (
	"fmt"
	"strings"

	"github.com/snowchaos/snowchaos/lease"
)

// Scheme is the URL scheme of a ZooKeeper lease store: zk://host:port/path.
const Scheme = "zk"

// DefaultRoot is the root path of a URL without one.
const DefaultRoot = "/snowchaos/leases"

// maxServers bounds the servers a URL may name.
const maxServers = 64

// maxRootLen bounds the root path.
const maxRootLen = 512

// urlForm is the form of a ZooKeeper store's URL.
var urlForm = lease.HostsURL{Scheme: Scheme, Name: "zookeeper", Form: "zk://host:port[,host:port][/root]", MaxHosts: maxServers}

// Parse reads zk://host:port[,host:port...][/root] (the scheme in any
// case) into the servers ("host:port") and the root path (DefaultRoot
// when the URL has none). A bad URL fails with lease.ErrInvalidConfig
// naming the part at fault.
func Parse(s string) (servers []string, root string, err error) {
	servers, path, err := urlForm.Parse(s)
	if err != nil {
		return nil, "", err
	}
	root = DefaultRoot
	if path = strings.TrimSuffix(path, "/"); path != "" {
		root = "/" + path
	}
	if err := CheckRoot(root); err != nil {
		return nil, "", urlForm.Errorf(s, "%v", err)
	}
	return servers, root, nil
}

// CheckRoot reports why p is not a usable root path: absolute, not /, no
// empty, "." or ".." segment, no character ZooKeeper refuses, not under
// /zookeeper, at most 512 bytes.
func CheckRoot(p string) error {
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

// String returns the zk:// URL of servers and root (the inverse of Parse).
func String(servers []string, root string) string {
	return Scheme + "://" + strings.Join(servers, ",") + root
}
