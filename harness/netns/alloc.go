package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
)

// SubnetBits is the size of a run's subnet: a /24, 253 hosts.
const SubnetBits = 24

// MaxHosts bounds the hosts of one run (the /24 minus network, broadcast
// and the unused .1).
const MaxHosts = 252

// DefaultPools are the private ranges a run's subnet is picked from, in
// order.
var DefaultPools = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// ErrNoSubnet: every candidate subnet overlaps something in use.
var ErrNoSubnet = errors.New("netns: no free private subnet")

// PickSubnet returns a /24 inside one of pools that overlaps none of used,
// trying up to tries random candidates per pool (rng picks them). A prefix
// of length 0 in used (a default route) is ignored: it overlaps
// everything and is no address anyone holds.
func PickSubnet(pools, used []netip.Prefix, rng *rand.Rand, tries int) (netip.Prefix, error) {
	for _, pool := range pools {
		pool = pool.Masked()
		if !pool.Addr().Is4() || pool.Bits() > SubnetBits {
			return netip.Prefix{}, fmt.Errorf("netns: pool %s: want an IPv4 prefix of /%d or wider", pool, SubnetBits)
		}
		n := uint32(1) << (SubnetBits - pool.Bits())
		base := pool.Addr().As4()
		b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		for range tries {
			v := b + rng.Uint32N(n)<<(32-SubnetBits)
			cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0}), SubnetBits)
			if !overlapsAny(cand, used) {
				return cand, nil
			}
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w in %v (%d in use)", ErrNoSubnet, pools, len(used))
}

// overlapsAny reports whether p overlaps any non-default prefix of used.
func overlapsAny(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Bits() > 0 && u.Overlaps(p) {
			return true
		}
	}
	return false
}

// HostAddr returns the address of the i-th host (0-based) of subnet: .2,
// .3, ...; ok is false past MaxHosts.
func HostAddr(subnet netip.Prefix, i int) (netip.Addr, bool) {
	if i < 0 || i >= MaxHosts {
		return netip.Addr{}, false
	}
	a := subnet.Masked().Addr().As4()
	a[3] = byte(2 + i)
	return netip.AddrFrom4(a), true
}

// ipAddrJSON is one interface of `ip -j addr show`.
type ipAddrJSON struct {
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// ipRouteJSON is one route of `ip -j route show`.
type ipRouteJSON struct {
	Dst string `json:"dst"`
}

// ParseAddrs returns the IPv4 networks of `ip -j -4 addr show` output
// (each address with its prefix, masked).
func ParseAddrs(out []byte) ([]netip.Prefix, error) {
	var ifs []ipAddrJSON
	if err := json.Unmarshal(out, &ifs); err != nil {
		return nil, fmt.Errorf("netns: parsing ip -j addr: %w", err)
	}
	var ps []netip.Prefix
	for _, i := range ifs {
		for _, a := range i.AddrInfo {
			if a.Family != "inet" {
				continue
			}
			addr, err := netip.ParseAddr(a.Local)
			if err != nil || !addr.Is4() || a.PrefixLen < 0 || a.PrefixLen > 32 {
				return nil, fmt.Errorf("netns: parsing ip -j addr: address %q/%d", a.Local, a.PrefixLen)
			}
			ps = append(ps, netip.PrefixFrom(addr, a.PrefixLen).Masked())
		}
	}
	return ps, nil
}

// ParseRoutes returns the IPv4 destinations of `ip -j -4 route show`
// output; "default" is 0.0.0.0/0 and a bare address a /32.
func ParseRoutes(out []byte) ([]netip.Prefix, error) {
	var rs []ipRouteJSON
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("netns: parsing ip -j route: %w", err)
	}
	var ps []netip.Prefix
	for _, r := range rs {
		if r.Dst == "default" {
			ps = append(ps, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(r.Dst, "/") {
			p, err = netip.ParsePrefix(r.Dst)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(r.Dst); err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("netns: parsing ip -j route: destination %q", r.Dst)
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}
