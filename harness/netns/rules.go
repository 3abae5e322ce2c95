package netns

import (
	"fmt"
	"net/netip"
	"strings"
)

// Direction is which packets a partition drops, seen from the host it is
// installed on.
type Direction int

// Directions.
const (
	// Both drops packets either way.
	Both Direction = iota
	// Outbound drops the packets the host sends to its peer (the peer
	// still reaches it, but never gets an answer).
	Outbound
	// Inbound drops the packets the peer sends to the host (the host's
	// requests arrive and take effect, their answers are lost).
	Inbound
)

// String returns "both", "outbound" or "inbound".
func (d Direction) String() string {
	switch d {
	case Outbound:
		return "outbound"
	case Inbound:
		return "inbound"
	}
	return "both"
}

// ParseDirection parses "both" (or ""), "outbound" or "inbound".
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "", "both":
		return Both, nil
	case "outbound":
		return Outbound, nil
	case "inbound":
		return Inbound, nil
	}
	return Both, fmt.Errorf("netns: direction %q: want both, outbound or inbound", s)
}

// Block drops traffic between a host and Peer in direction Dir; an
// invalid (zero) Peer means every packet on the host's link (the host is
// cut off from everyone, loopback aside).
type Block struct {
	Peer netip.Addr
	Dir  Direction
}

// Table is the nftables table (family inet) a run owns in each of its
// namespaces.
const Table = "snowchaos"

// Link is the name of a host's interface inside its namespace.
const Link = "eth0"

// Ruleset returns the nft script that replaces the run's table in one
// namespace with blocks, in one transaction (nft -f applies it atomically):
// declaring and deleting the table first makes it idempotent whether the
// table exists or not. No blocks leaves no table. Nothing outside the
// table is named.
func Ruleset(blocks []Block) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\ndelete table inet %s\n", Table, Table)
	if len(blocks) == 0 {
		return b.String()
	}
	var in, out []string
	for _, bl := range blocks {
		var i, o string
		if bl.Peer.IsValid() {
			fam := "ip"
			if bl.Peer.Is6() {
				fam = "ip6"
			}
			i = fmt.Sprintf("%s saddr %s drop", fam, bl.Peer)
			o = fmt.Sprintf("%s daddr %s drop", fam, bl.Peer)
		} else {
			i = fmt.Sprintf("iifname %q drop", Link)
			o = fmt.Sprintf("oifname %q drop", Link)
		}
		if bl.Dir != Outbound {
			in = append(in, i)
		}
		if bl.Dir != Inbound {
			out = append(out, o)
		}
	}
	fmt.Fprintf(&b, "table inet %s {\n", Table)
	chain := func(name, hook string, rules []string) {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority 0; policy accept;\n", name, hook)
		for _, r := range rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	chain("in", "input", in)
	chain("out", "output", out)
	b.WriteString("}\n")
	return b.String()
}
