package netns

import (
	"net/netip"
	"testing"
)

func TestRuleset(t *testing.T) {
	store := netip.MustParseAddr("10.1.2.2")
	peer := netip.MustParseAddr("10.1.2.9")
	for name, tc := range map[string]struct {
		blocks []Block
		want   string
	}{
		"heal": {nil, "add table inet snowchaos\ndelete table inet snowchaos\n"},
		"both": {[]Block{{Peer: store}}, `add table inet snowchaos
delete table inet snowchaos
table inet snowchaos {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr 10.1.2.2 drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr 10.1.2.2 drop
	}
}
`},
		"one way each": {[]Block{{Peer: store, Dir: Outbound}, {Peer: peer, Dir: Inbound}}, `add table inet snowchaos
delete table inet snowchaos
table inet snowchaos {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr 10.1.2.9 drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr 10.1.2.2 drop
	}
}
`},
		"whole link": {[]Block{{}}, `add table inet snowchaos
delete table inet snowchaos
table inet snowchaos {
	chain in {
		type filter hook input priority 0; policy accept;
		iifname "eth0" drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		oifname "eth0" drop
	}
}
`},
	} {
		if got := Ruleset(tc.blocks); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, tc.want)
		}
	}
}

func TestParseDirection(t *testing.T) {
	for in, want := range map[string]Direction{"": Both, "both": Both, "outbound": Outbound, "inbound": Inbound} {
		if d, err := ParseDirection(in); err != nil || d != want || (in != "" && d.String() != in) {
			t.Errorf("%q: %v %v", in, d, err)
		}
	}
	if _, err := ParseDirection("sideways"); err == nil {
		t.Error("accepted sideways")
	}
}
