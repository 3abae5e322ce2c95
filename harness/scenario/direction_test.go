package scenario

import (
	"strings"
	"testing"
)

const directionBase = `name: d
duration: 3s
nodes:
  - {name: a, worker: 1, lease: memory}
load: {rate: 100/s}
invariants: [duplicates == 0]
targets: [wait]
faults:
`

// TestStoreOutageDirection: a partition may be one way; the direction is
// checked and needs nodes.
func TestStoreOutageDirection(t *testing.T) {
	for _, d := range []string{"both", "outbound", "inbound"} {
		s, err := Parse("d.yaml", []byte(directionBase+"  - {at: 1s, kind: store_outage, for: 1s, nodes: [a], direction: "+d+"}\n"))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if f := s.Faults[0]; f.Direction != d || !f.Partition {
			t.Fatalf("%s: %+v", d, f)
		}
	}
	for in, want := range map[string]string{
		"  - {at: 1s, kind: store_outage, for: 1s, nodes: [a], direction: sideways}\n": `faults[0].direction: a store_outage fault's "direction" "sideways" is not one of both, outbound, inbound`,
		"  - {at: 1s, kind: store_outage, for: 1s, direction: inbound}\n":              "faults[0].direction: a direction needs nodes",
		"  - {at: 1s, kind: restart, nodes: [a], direction: inbound}\n":                "faults[0].direction: a restart fault takes only",
	} {
		_, err := Parse("d.yaml", []byte(directionBase+in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(in), err, want)
		}
	}
}
