package scenario

import (
	"strings"
	"testing"
)

const decodeBase = `name: x
duration: 10s
nodes: [{name: a, worker: 1, lease: memory}]
load: {rate: 100/s}
invariants: ["duplicates == 0"]
`

// TestParseNothing: a key given with no value ("key:", ~, null) is never
// taken for an absent one; each is an error naming its line and key.
func TestParseNothing(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{strings.Replace(decodeBase, "duration: 10s", "duration:", 1), `2: duration: want a duration such as 150ms, found nothing`},
		{strings.Replace(decodeBase, "nodes: [{name: a, worker: 1, lease: memory}]", "nodes:", 1), `3: nodes: want a list, found nothing`},
		{strings.Replace(decodeBase, "nodes: [{name: a, worker: 1, lease: memory}]", "nodes:\n  -\n", 1), `4: nodes[0]: want a mapping with keys name, worker`},
		{strings.Replace(decodeBase, "worker: 1", "worker: ~", 1), `3: nodes[0].worker: want a whole number, found nothing`},
		{strings.Replace(decodeBase, "lease: memory", "lease: null", 1), `3: nodes[0].lease: want memory, none, postgres://..., etcd://host:port or zk://host:port[/root], found nothing`},
		{strings.Replace(decodeBase, "{rate: 100/s}", "{rate: }", 1), `4: load.rate: want a rate such as 5000/s, or max, found nothing`},
		{decodeBase + "faults: [{at: 1s, kind: step, by: }]\n", `6: faults[0].by: want a duration such as 150ms, found nothing`},
		{decodeBase + "faults: [{at: 1s, kind: }]\n", `6: faults[0].kind: want a fault kind, found nothing`},
		{decodeBase + "faults: [{at: 1s, kind: store_outage, for: 1s, nodes: [a, ~]}]\n", `6: faults[0].nodes[1]: want a node name, found nothing`},
		{decodeBase + "targets: [wait, ~]\n", `6: targets[1]: want a name, found nothing`},
		{decodeBase + "expect:\n", `6: expect: want a mapping from target name`},
		{strings.Replace(decodeBase, `["duplicates == 0"]`, `[~]`, 1), `5: invariants[0]: want an invariant such as "duplicates == 0", found nothing`},
		{decodeBase + "simulation: {budget: }\n", `6: simulation.budget: want a whole number, found nothing`},
	} {
		_, err := Parse("n.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), "n.yaml:"+tc.want) {
			t.Errorf("%s\nerror %v\nwant n.yaml:%s", tc.yaml, err, tc.want)
		}
	}
}

// TestParseAliases: anchors and aliases decode as the values they name;
// an error in an aliased value names the anchor's line.
func TestParseAliases(t *testing.T) {
	s, err := Parse("a.yaml", []byte(`name: x
duration: 10s
nodes:
  - &n {name: a, worker: 1, lease: memory, lease_ttl: &ttl 2s}
  - {name: b, worker: 2, lease: memory, lease_ttl: *ttl}
load: {rate: 100/s}
faults: [{at: 1s, kind: store_outage, for: *ttl, nodes: [a]}]
invariants: ["duplicates == 0"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes[1].LeaseTTL != s.Nodes[0].LeaseTTL || s.Faults[0].For != s.Nodes[0].LeaseTTL {
		t.Fatalf("aliases: %+v %+v", s.Nodes, s.Faults[0])
	}
	_, err = Parse("a.yaml", []byte(strings.Replace(decodeBase, "nodes: [{name: a, worker: 1, lease: memory}]",
		"nodes: [{name: a, worker: &w -1, lease: memory}, {name: b, worker: *w}]", 1)))
	if err == nil || !strings.Contains(err.Error(), "a.yaml:3: nodes[0].worker: -1 is out of range [0, 1023]") {
		t.Fatalf("an aliased bad value: %v", err)
	}
}

// TestParseRateResolution: a rate that is not 0 but below the fault
// clock's resolution would do nothing; the scenario parser refuses it by
// the same rule as the admin API (faults.Param.CheckPPM).
func TestParseRateResolution(t *testing.T) {
	for _, f := range []string{"{at: 1s, kind: drift, ppm: 1e-300}", "{at: 1s, kind: store_drift, ppm: -0.0004}", "{at: 1s, kind: slew, by: 1ms, ppm: 0.0009}"} {
		_, err := Parse("r.yaml", []byte(decodeBase+"faults: ["+f+"]\n"))
		if err == nil || !strings.Contains(err.Error(), `r.yaml:6: faults[0].ppm:`) || !strings.Contains(err.Error(), "below the fault clock's resolution of 0.001 ppm") {
			t.Errorf("%s: %v", f, err)
		}
	}
	s, err := Parse("r.yaml", []byte(decodeBase+"faults: [{at: 1s, kind: drift, ppm: 0.001}, {at: 2s, kind: slew, by: 1ms, ppm: 0}]\n"))
	if err != nil || s.Faults[0].PPM != 0.001 {
		t.Fatalf("%v", err)
	}
}
