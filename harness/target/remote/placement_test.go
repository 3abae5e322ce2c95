package remote

import (
	"net/netip"
	"slices"
	"testing"
)

func TestPlacement(t *testing.T) {
	var p Placement
	if p.listen() != "127.0.0.1:0" || !slices.Equal(p.command("x", "-a").Args, []string{"x", "-a"}) {
		t.Fatalf("zero placement: %s %v", p.listen(), p.command("x", "-a").Args)
	}
	p.Addr = netip.MustParseAddr("10.1.2.3")
	if p.listen() != "10.1.2.3:0" {
		t.Fatal(p.listen())
	}
	n := &procNode{t: &Process{}, spec: spec("a", 1), place: p}
	args := n.args()
	if !slices.Contains(args, "10.1.2.3:0") || !slices.Contains(args, "--admin-allow-remote") {
		t.Fatalf("args %v", args)
	}
	n.place = Placement{}
	if slices.Contains(n.args(), "--admin-allow-remote") {
		t.Fatal("a loopback node allows a remote admin API")
	}
}
