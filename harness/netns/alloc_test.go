package netns

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestPickSubnetAvoidsUsed(t *testing.T) {
	pools := []netip.Prefix{netip.MustParsePrefix("10.9.0.0/22")} // four /24s
	used := []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"),   // a default route: ignored
		netip.MustParsePrefix("10.9.0.0/24"), // an address's network
		netip.MustParsePrefix("10.9.1.7/32"), // a host route
		netip.MustParsePrefix("10.9.3.0/25"), // half of a /24
	}
	seen := map[netip.Prefix]bool{}
	for seed := range uint64(200) {
		p, err := PickSubnet(pools, used, rand.New(rand.NewPCG(seed, 1)), 64)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		seen[p] = true
	}
	if len(seen) != 1 || !seen[netip.MustParsePrefix("10.9.2.0/24")] {
		t.Fatalf("picked %v, want only 10.9.2.0/24 (the one free /24)", seen)
	}
}

func TestPickSubnetFallsThroughPools(t *testing.T) {
	pools := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
	used := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} // a corporate route over all of 10/8
	p, err := PickSubnet(pools, used, rand.New(rand.NewPCG(1, 2)), 16)
	if err != nil {
		t.Fatal(err)
	}
	if !netip.MustParsePrefix("192.168.0.0/16").Overlaps(p) || p.Bits() != SubnetBits {
		t.Fatalf("picked %s, want a /24 of 192.168.0.0/16", p)
	}
}

func TestPickSubnetNoneFree(t *testing.T) {
	pools := []netip.Prefix{netip.MustParsePrefix("10.9.0.0/23")}
	used := []netip.Prefix{netip.MustParsePrefix("10.9.0.0/23")}
	if _, err := PickSubnet(pools, used, rand.New(rand.NewPCG(1, 2)), 64); err == nil {
		t.Fatal("picked a subnet from a pool wholly in use")
	}
	if _, err := PickSubnet([]netip.Prefix{netip.MustParsePrefix("10.9.0.0/25")}, nil, rand.New(rand.NewPCG(1, 2)), 1); err == nil {
		t.Fatal("accepted a pool narrower than a /24")
	}
}

func TestHostAddr(t *testing.T) {
	s := netip.MustParsePrefix("10.1.2.0/24")
	if a, ok := HostAddr(s, 0); !ok || a != netip.MustParseAddr("10.1.2.2") {
		t.Fatalf("host 0: %v %v", a, ok)
	}
	if a, ok := HostAddr(s, MaxHosts-1); !ok || a != netip.MustParseAddr("10.1.2.253") {
		t.Fatalf("last host: %v %v", a, ok)
	}
	if _, ok := HostAddr(s, MaxHosts); ok {
		t.Fatal("a host past MaxHosts got an address")
	}
	if _, ok := HostAddr(s, -1); ok {
		t.Fatal("host -1 got an address")
	}
}

const ipAddrOut = `[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},
{"ifindex":4,"ifname":"eth0","addr_info":[{"family":"inet","local":"172.31.5.9","prefixlen":20},{"family":"inet6","local":"fe80::1","prefixlen":64}]}]`

const ipRouteOut = `[{"dst":"default","gateway":"172.31.0.1","dev":"eth0"},{"dst":"172.31.0.0/20","dev":"eth0"},
{"type":"local","dst":"127.0.0.1","table":"local"},{"type":"unreachable","dst":"10.44.3.0/24"}]`

func TestParseIPJSON(t *testing.T) {
	as, err := ParseAddrs([]byte(ipAddrOut))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "172.31.0.0/20"}
	if len(as) != len(want) || as[0].String() != want[0] || as[1].String() != want[1] {
		t.Fatalf("addrs %v, want %v", as, want)
	}
	rs, err := ParseRoutes([]byte(ipRouteOut))
	if err != nil {
		t.Fatal(err)
	}
	wantR := []string{"0.0.0.0/0", "172.31.0.0/20", "127.0.0.1/32", "10.44.3.0/24"}
	if len(rs) != len(wantR) {
		t.Fatalf("routes %v, want %v", rs, wantR)
	}
	for i := range rs {
		if rs[i].String() != wantR[i] {
			t.Fatalf("routes %v, want %v", rs, wantR)
		}
	}
	for _, bad := range []string{`{`, `[{"addr_info":[{"family":"inet","local":"nope","prefixlen":8}]}]`, `[{"addr_info":[{"family":"inet","local":"10.0.0.1","prefixlen":33}]}]`} {
		if _, err := ParseAddrs([]byte(bad)); err == nil {
			t.Errorf("ParseAddrs(%q) accepted it", bad)
		}
	}
	for _, bad := range []string{`[`, `[{"dst":"10.0.0.0/99"}]`, `[{"dst":"fe80::/64"}]`} {
		if _, err := ParseRoutes([]byte(bad)); err == nil {
			t.Errorf("ParseRoutes(%q) accepted it", bad)
		}
	}
}

// FuzzParseIPJSON: the parsers of ip's JSON never panic, and whatever
// they return is valid IPv4 and masked.
func FuzzParseIPJSON(f *testing.F) {
	f.Add([]byte(ipAddrOut))
	f.Add([]byte(ipRouteOut))
	f.Add([]byte(`[{"dst":"1.2.3.4"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) ([]netip.Prefix, error){ParseAddrs, ParseRoutes} {
			ps, err := parse(b)
			if err != nil {
				continue
			}
			for _, p := range ps {
				if !p.IsValid() || !p.Addr().Is4() || p.Masked() != p {
					t.Fatalf("%q gave %v", b, p)
				}
			}
		}
	})
}
