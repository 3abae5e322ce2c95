package lease

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// HostsURL is the form of a store URL that names a cluster by its
// members, scheme://host:port[,host:port...][/path] (etcd and ZooKeeper):
// one parser, so every such store reads its host list the same way.
type HostsURL struct {
	// Scheme is the URL's scheme ("zk"), matched in any case.
	Scheme string
	// Name names the store in errors ("zookeeper").
	Name string
	// Form is the URL's form as errors show it
	// ("zk://host:port[,host:port][/root]").
	Form string
	// MaxHosts bounds the members a URL may name.
	MaxHosts int
}

// Parse reads s into its members ("host:port", each port in [1, 65535])
// and the path after the slash that ends them ("" without one). User
// info, queries and fragments are refused. Errors wrap ErrInvalidConfig
// and name the URL and the part at fault (Errorf).
func (f HostsURL) Parse(s string) (hosts []string, path string, err error) {
	prefix := f.Scheme + "://"
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return nil, "", f.Errorf(s, "want %s", f.Form)
	}
	list, path, _ := strings.Cut(s[len(prefix):], "/")
	if strings.ContainsAny(list, "@?#") || strings.ContainsAny(path, "?#") {
		return nil, "", f.Errorf(s, "user info, queries and fragments are not supported")
	}
	if list == "" {
		return nil, "", f.Errorf(s, "no server")
	}
	for _, hp := range strings.Split(list, ",") {
		h, port, err := net.SplitHostPort(hp)
		if err != nil || h == "" {
			return nil, "", f.Errorf(s, "server %q: want host:port", hp)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, "", f.Errorf(s, "server %q: port %q not in [1, 65535]", hp, port)
		}
		if len(hosts) == f.MaxHosts {
			return nil, "", f.Errorf(s, "more than %d servers", f.MaxHosts)
		}
		hosts = append(hosts, hp)
	}
	return hosts, path, nil
}

// Errorf returns the error for a URL s of this form: ErrInvalidConfig,
// the store's name, s and the message.
func (f HostsURL) Errorf(s, format string, args ...any) error {
	return fmt.Errorf("%w: %s URL %q: %s", ErrInvalidConfig, f.Name, s, fmt.Sprintf(format, args...))
}
