package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

func TestParseFull(t *testing.T) {
	s, err := ParseFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "step-back-small" || s.Seed != 42 || s.Mode != ModeSimulated || s.Duration != 10*time.Second {
		t.Fatalf("header: %+v", s)
	}
	if len(s.Nodes) != 2 || s.Nodes[0].Worker != 1 || !s.Nodes[0].Checkpoint || s.Nodes[1].Policy != generator.PolicyLogical ||
		s.Nodes[1].ClockOffset != -3*time.Millisecond || s.Nodes[1].Layout.Epoch.Year() != 2024 || s.Nodes[1].Reserve != 50*time.Millisecond {
		t.Fatalf("nodes: %+v", s.Nodes)
	}
	if len(s.Targets) != 3 || s.Targets[1].Use != "logical" || s.Targets[1].MaxLead != 10*time.Millisecond {
		t.Fatalf("targets: %+v", s.Targets)
	}
	l := s.Load
	if !l.PerNode || l.Clients != 4 || l.Batch != 2 || len(l.Stages) != 4 || l.Stages[1].Rate != 1e8 || !l.Stages[2].Max {
		t.Fatalf("load: %+v", l)
	}
	if last := l.Stages[3]; last.For != 10*time.Second-4*time.Second-2*time.Millisecond || last.Rate != 2000 {
		t.Fatalf("last stage: %+v", last)
	}
	if len(s.Faults) != 7 {
		t.Fatalf("faults: %+v", s.Faults)
	}
	f := s.Faults[0]
	if f.Name != "step" || f.Kind != faults.KindStep || f.By != -5*time.Millisecond || f.At != 2*time.Second || len(f.Nodes) != 1 || f.Line != 31 {
		t.Fatalf("fault 0: %+v", f)
	}
	if f := s.Faults[1]; f.Name != "step-2" || !f.All || len(f.Nodes) != 2 || f.Observe != 500*time.Millisecond {
		t.Fatalf("fault 1: %+v", f)
	}
	if f := s.Faults[3]; !f.WipeCheckpoint || f.OffsetWhileDown != -10*time.Millisecond {
		t.Fatalf("restart: %+v", f)
	}
	if got := len(s.FaultsNamed("step")); got != 1 {
		t.Fatalf("FaultsNamed(step) = %d", got)
	}
	if got := len(s.FaultsNamed("big")); got != 1 {
		t.Fatalf("FaultsNamed(big) = %d", got)
	}
	if len(s.Invariants) != 6 || s.Invariants[1].During != "step" || s.Invariants[3].Stat != StatP99 || s.Invariants[4].Metric != MetricWait {
		t.Fatalf("invariants: %+v", s.Invariants)
	}
	checks := s.ChecksFor("bad-no-rewind-check")
	var subjects []string
	for _, c := range checks {
		subjects = append(subjects, c.Subject())
	}
	want := "duplicates,lag p99,availability during step,lead max,wait max,gap during big"
	if strings.Join(subjects, ",") != want {
		t.Fatalf("checks = %s", strings.Join(subjects, ","))
	}
	if !checks[0].Expected || checks[len(checks)-1].Expected || !checks[len(checks)-1].Informational {
		t.Fatal("Expected/Informational flags")
	}
	if s.Simulation.Budget != 50000 || s.Simulation.Service != time.Microsecond {
		t.Fatalf("simulation: %+v", s.Simulation)
	}
}

func TestParseErrors(t *testing.T) {
	base := `name: x
duration: 10s
nodes: [{name: a, worker: 1}, {name: b, worker: 2}]
load: {rate: 100/s}
invariants: ["duplicates == 0"]
`
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top key", base + "fualts: []\n", `6: fualts: unknown key "fualts" (did you mean "faults"?)`},
		{"misspelled invariant", strings.Replace(base, "duplicates == 0", "duplicate == 0", 1), `5: invariants[0]: unknown invariant "duplicate" (did you mean "duplicates"?)`},
		{"unknown node", base + "faults: [{at: 1s, kind: step, by: -5ms, nodes: [c]}]\n", `6: faults[0].nodes[0]: unknown node "c"`},
		{"beyond duration", base + "faults: [{at: 11s, kind: step, by: -5ms}]\n", `6: faults[0].at: 11s is not before the end of the run`},
		{"freeze beyond", base + "faults:\n  - {at: 9s, kind: freeze, for: 2s}\n", `7: faults[0]: the freeze lasts until 11s, beyond the duration 10s`},
		{"param of other kind", base + "faults:\n  - {at: 1s, kind: step, by: 1ms, ppm: 5}\n", `7: faults[0].ppm: a step fault takes only by`},
		{"missing param", base + "faults:\n  - {at: 1s, kind: step}\n", `7: faults[0].by: missing: a step fault needs by`},
		{"unknown kind", base + "faults:\n  - {at: 1s, kind: stpe}\n", `7: faults[0].kind: unknown fault kind "stpe" (did you mean "step"?)`},
		{"bad duration", strings.Replace(base, "10s", "10 seconds", 1), `2: duration: want a duration`},
		{"bad rate", strings.Replace(base, "100/s", "100", 1), `4: load.rate: want a rate such as 5000/s`},
		{"syntax", base + "faults: [\n", `invalid YAML`},
		{"bad policy", strings.Replace(base, "worker: 1}", "worker: 1, policy: wiat}", 1), `3: nodes[0].policy: want wait, refuse or logical, found "wiat" (did you mean "wait"?)`},
		{"worker range", strings.Replace(base, "worker: 1}", "worker: 1024}", 1), `3: nodes[0].worker: 1024 is out of range [0, 1023]`},
		{"bad layout", strings.Replace(base, "worker: 1}", "worker: 1, layout: 41/10/13}", 1), `3: nodes[0].layout: layout "41/10/13": generator: invalid layout: TimeBits+NodeBits+SeqBits = 41+10+13 = 64, want 63`},
		{"layout word", strings.Replace(base, "worker: 1}", "worker: 1, layout: sonyflak}", 1), `3: nodes[0].layout: generator: invalid layout: "sonyflak" is neither a preset nor T/N/S[@tick]`},
		{"layout tick", strings.Replace(base, "worker: 1}", "worker: 1, layout: 50/13/0@2h}", 1), `3: nodes[0].layout: generator: invalid layout: tick "2h" in "50/13/0@2h": want a duration within [1µs, 1h0m0s]`},
		{"layout width", strings.Replace(base, "worker: 1}", "worker: 1, layout: 50/x/13}", 1), `3: nodes[0].layout: generator: invalid layout: node bits "x" in "50/x/13"`},
		{"worker beyond custom layout", strings.Replace(base, "worker: 1}", "worker: 8192, layout: 50/13/0}", 1), `3: nodes[0].worker: 8192 is out of range [0, 8191]`},
		{"worker with no node bits", strings.Replace(base, "worker: 1}", "worker: 1, layout: 50/0/13}", 1), `3: nodes[0].worker: 1 is out of range [0, 0]`},
		{"during unknown", strings.Replace(base, `"duplicates == 0"`, `"availability >= 0.9 during leap"`, 1), `5: invariants[0]: "during leap": the scenario has no faults`},
		{"expect unknown target", base + "expect: {bad: {duplicates: \"> 0\"}}\n", `6: expect.bad: target "bad" is not in targets`},
		{"expect with a mode", base + "targets: [wait, bad-no-rewind-check]\nexpect: {bad-no-rewind-check: {max_wait: \"> 1ms in real mode\"}}\n", `7: expect.bad-no-rewind-check.max_wait: an expectation takes no "in real mode"`},
		{"wrong unit", strings.Replace(base, "duplicates == 0", "lead <= 5", 1), `5: invariants[0]: lead takes a duration such as 200ms, not "5"`},
		{"ratio range", strings.Replace(base, "duplicates == 0", "availability >= 2", 1), `availability takes a ratio`},
		{"duplicate key", base + "seed: 1\nseed: 2\n", `7: seed: key "seed" repeated`},
		{"two docs", base + "---\nname: y\n", `a file holds one scenario`},
		{"stages too long", strings.Replace(base, "{rate: 100/s}", "{stages: [{rate: 1/s, for: 8s}, {rate: 1/s, for: 3s}]}", 1), `4: load: stages last 11s, beyond the duration 10s`},
		{"handoff two nodes", base + "faults: [{at: 1s, kind: handoff, nodes: [a, b]}]\n", `6: faults[0].nodes: a handoff moves one node's worker ID`},
		{"node key", strings.Replace(base, "worker: 1}", "worker: 1, polcy: wait}", 1), `3: nodes[0].polcy: unknown key "polcy" (did you mean "policy"?)`},
		{"empty", "", `1: empty file`},
		{"no name", strings.Replace(base, "name: x\n", "", 1), `name: missing`},
		{"scalar root", "hello", `want a mapping`},
		{"lease knob without lease", strings.Replace(base, "worker: 1}", "worker: 1, lease_ttl: 2s}", 1), `3: nodes[0].lease_ttl: lease_ttl needs a lease: add lease: memory to the node`},
		{"short ttl", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, lease_ttl: 100ms}", 1), `3: nodes[0].lease_ttl: 100ms is shorter than 200ms`},
		{"worker range syntax", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, worker_range: 12}", 1), `3: nodes[0].worker_range: want a range of worker IDs such as 0-11`},
		{"worker range bounds", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, worker_range: 0-1024}", 1), `3: nodes[0].worker_range: range 0-1024 is not within [0, 1023]`},
		{"worker outside range", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, worker_range: [4, 11]}", 1), `3: nodes[0].worker_range: the node's worker 1 (the one it prefers) lies outside its range 4-11`},
		{"handoff guard value", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, handoff_guard: maybe}", 1), `3: nodes[0].handoff_guard: want on or off`},
		{"store outage no for", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory}", 1) + "faults: [{at: 1s, kind: store_outage}]\n", `6: faults[0].for: missing: a store_outage fault needs for`},
		{"store outage no lease", base + "faults: [{at: 1s, kind: store_outage, for: 1s}]\n", `6: faults[0]: a store_outage needs a node with lease: memory`},
		{"same holder on step", base + "faults: [{at: 1s, kind: step, by: 1ms, same_holder: on}]\n", `6: faults[0].same_holder: a step fault takes only by`},
		{"not applicable value", base + "targets: [{name: wait, not_applicable: sure}]\n", `6: targets[0].not_applicable: want ok`},
		{"lease scheme", strings.Replace(base, "worker: 1}", "worker: 1, lease: mysql://u@h:3306/db}", 1), `f.yaml:3: nodes[0].lease: want memory, none, postgres://..., etcd://host:port or zk://host:port[/root], found "mysql://u@h:3306/db"`},
		{"lease word", strings.Replace(base, "worker: 1}", "worker: 1, lease: memroy}", 1), `3: nodes[0].lease: want memory, none, postgres://..., etcd://host:port or zk://host:port[/root], found "memroy" (did you mean "memory"?)`},
		{"lease postgres no host", strings.Replace(base, "worker: 1}", "worker: 1, lease: \"postgres:///db\"}", 1), `3: nodes[0].lease: want a Postgres URL such as postgres://user@host:5432/db?sslmode=disable, found "postgres:///db"`},
		{"lease postgres password hidden", strings.Replace(base, "worker: 1}", "worker: 1, lease: \"postgresql://u:secret@/db\"}", 1), `found "postgresql://u:xxxxx@/db"`},
		{"lease etcd no port", strings.Replace(base, "worker: 1}", "worker: 1, lease: etcd://127.0.0.1}", 1), `3: nodes[0].lease: want etcd://host:port[,host:port], found "etcd://127.0.0.1"`},
		{"lease etcd path", strings.Replace(base, "worker: 1}", "worker: 1, lease: etcd://127.0.0.1:2379/x}", 1), `3: nodes[0].lease: want etcd://host:port[,host:port]`},
		{"lease zk no port", strings.Replace(base, "worker: 1}", "worker: 1, lease: zk://127.0.0.1/x}", 1), `3: nodes[0].lease: lease: invalid config: zookeeper URL "zk://127.0.0.1/x": server "127.0.0.1": want host:port`},
		{"lease zk root", strings.Replace(base, "worker: 1}", "worker: 1, lease: zk://127.0.0.1:2181/a//b}", 1), `empty, . or .. segment`},
		{"target lease scheme", base + "targets: [{name: wait, lease: redis://h:1}]\n", `6: targets[0].lease: want memory, none, postgres://..., etcd://host:port or zk://host:port[/root], found "redis://h:1"`},
		{"crash on a restart", base + "faults: [{at: 1s, kind: restart, crash: true, nodes: [a]}]\n", `6: faults[0].crash: a restart fault takes only for, keep_checkpoint, offset_while_down, graceful, point`},
		{"crash point unknown", strings.Replace(base, "worker: 1}", "worker: 1, checkpoint: on}", 1) + "faults: [{at: 1s, kind: restart, point: before_fsync, nodes: [a]}]\n",
			`6: faults[0].point: a restart fault's "point" "before_fsync" is not one of before_write, before_sync, after_sync, mid_batch, new_tick`},
		{"crash point and graceful", strings.Replace(base, "worker: 1}", "worker: 1, checkpoint: on}", 1) + "faults: [{at: 1s, kind: restart, point: after_sync, graceful: on, nodes: [a]}]\n",
			`6: faults[0].point: a graceful restart does not crash: give point or graceful, not both`},
		{"crash point wiped", strings.Replace(base, "worker: 1}", "worker: 1, checkpoint: on}", 1) + "faults: [{at: 1s, kind: restart, point: after_sync, keep_checkpoint: off, nodes: [a]}]\n",
			`6: faults[0].point: a crash point is a moment of the checkpoint's write: it needs keep_checkpoint on`},
		{"crash point no checkpoint", base + "faults: [{at: 1s, kind: restart, point: before_write, nodes: [a]}]\n",
			`6: faults[0].point: crash point before_write on node a, which has no checkpoint under target declared: no call would reach it`},
		{"graceful value", base + "faults: [{at: 1s, kind: restart, graceful: soon, nodes: [a]}]\n", `6: faults[0].graceful: want on or off`},
		{"reserve negative", strings.Replace(base, "worker: 1}", "worker: 1, reserve: -1ms}", 1), `3: nodes[0].reserve:`},
		{"reserve above max", strings.Replace(base, "worker: 1}", "worker: 1, reserve: 2h}", 1), `3: nodes[0].reserve: 2h0m0s is out of range [0, 1h0m0s]`},
		{"crash value", base + "faults: [{at: 1s, kind: handoff, crash: hard, nodes: [a]}]\n", `6: faults[0].crash: want on or off`},
		{"crash gap below ttl", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, lease_ttl: 2s}", 1) + "faults: [{at: 1s, kind: handoff, crash: true, gap: 1500ms, behind: 3s, nodes: [a]}]\n",
			`6: faults[0].gap: a crash handoff's gap (1.5s) must be at least node a's lease TTL (2s under target declared): until the crashed holder's lease expires no other host can take its worker ID`},
		{"crash gap below default ttl", base + "faults: [{at: 1s, kind: handoff, crash: true, gap: 2s, nodes: [a]}]\ntargets: [wait, {name: leased, use: wait, lease: memory}]\n",
			`6: faults[0].gap: a crash handoff's gap (2s) must be at least node a's lease TTL (10s under target leased)`},
		{"mark write-through without lease", strings.Replace(base, "worker: 1}", "worker: 1, mark_write_through: off}", 1), `3: nodes[0].mark_write_through: mark_write_through needs a lease: add lease: memory to the node`},
		{"mark write-through value", base + "targets: [{name: wait, mark_write_through: later}]\n", `6: targets[0].mark_write_through: want on or off`},
		{"peer check without lease", strings.Replace(base, "worker: 1}", "worker: 1, peer_clock_check: off}", 1), `3: nodes[0].peer_clock_check: peer_clock_check needs a lease: add lease: memory to the node`},
		{"peer check value", base + "targets: [{name: wait, peer_clock_check: sometimes}]\n", `6: targets[0].peer_clock_check: want on or off`},
		{"peer skew zero", strings.Replace(base, "worker: 1}", "worker: 1, lease: memory, peer_clock_max_skew: 0s}", 1), `3: nodes[0].peer_clock_max_skew: 0s outside (0, 1h0m0s] (switch the check off with peer_clock_check: off)`},
		{"peer skew above max", base + "targets: [{name: wait, lease: memory, peer_clock_max_skew: 2h}]\n", `6: targets[0].peer_clock_max_skew: 2h0m0s outside (0, 1h0m0s]`},
		{"refused starts during", strings.Replace(base, `"duplicates == 0"`, `"refused_starts == 0 during x"`, 1), `refused_starts is counted over the whole run`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, c.want)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("not an ErrorList: %T", err)
			}
			for _, e := range list {
				if e.Line < 1 || !strings.HasPrefix(e.Error(), "f.yaml:") {
					t.Fatalf("error without file:line: %q", e.Error())
				}
			}
		})
	}
}

// TestParseCrashPoints: a restart's point and graceful parameters, and an
// explicit reserve: 0 (no reservation ahead).
func TestParseCrashPoints(t *testing.T) {
	src := `name: x
duration: 10s
nodes: [{name: a, worker: 1, checkpoint: on, reserve: 0}, {name: b, worker: 2, checkpoint: on}]
load: {rate: 100/s}
faults:
  - {at: 1s, kind: restart, point: mid_batch, nodes: [a]}
  - {at: 2s, kind: restart, graceful: on, nodes: [b]}
  - {at: 3s, kind: restart, nodes: [b]}
invariants: ["duplicates == 0"]
targets: [wait, {name: big, use: wait, reserve: 20ms}]
`
	s, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes[0].Reserve != generator.NoReserve || s.Nodes[1].Reserve != 0 {
		t.Fatalf("reserves %v, %v: want NoReserve for reserve: 0, 0 when absent", s.Nodes[0].Reserve, s.Nodes[1].Reserve)
	}
	if f := s.Faults[0]; f.Point != faults.PointMidBatch || f.Graceful || f.WipeCheckpoint {
		t.Fatalf("fault 0: %+v", f)
	}
	if f := s.Faults[1]; f.Point != "" || !f.Graceful {
		t.Fatalf("fault 1: %+v", f)
	}
	if f := s.Faults[2]; f.Point != "" || f.Graceful {
		t.Fatalf("fault 2: %+v", f)
	}
	if got := s.Targets[1].Apply(s.Nodes[0]).Reserve; got != 20*time.Millisecond {
		t.Fatalf("target override of reserve: %v", got)
	}
}

// TestParseNoFollowUpErrors checks that a fault parameter that fails to
// parse is reported once, without a second, false complaint about the zero
// value left behind (such as "must not be zero" after "longer than a year").
func TestParseNoFollowUpErrors(t *testing.T) {
	base := `name: x
duration: 10s
nodes: [{name: a, worker: 1}]
load: {rate: 100/s}
invariants: ["duplicates == 0"]
faults:
`
	for _, tc := range []struct{ fault, key, want string }{
		{"{at: 1s, kind: step, by: -876000h}", "faults[0].by", "longer than a year"},
		{"{at: 1s, kind: step, by: soon}", "faults[0].by", "want a duration"},
		{"{at: 1s, kind: pause, for: 9000h}", "faults[0].for", "longer than a year"},
		{"{at: 1s, kind: pause, for: -1s}", "faults[0].for", "must not be negative"},
		{"{at: 1s, kind: smear, by: 1s, window: long}", "faults[0].window", "want a duration"},
	} {
		_, err := Parse("f.yaml", []byte(base+"  - "+tc.fault+"\n"))
		var list ErrorList
		if !errors.As(err, &list) {
			t.Fatalf("%s: %v, want an ErrorList", tc.fault, err)
		}
		var got []string
		for _, e := range list {
			if e.Key == tc.key {
				got = append(got, e.Msg)
			}
		}
		if len(got) != 1 || !strings.Contains(got[0], tc.want) {
			t.Errorf("%s: errors for %s: %q, want one saying %q", tc.fault, tc.key, got, tc.want)
		}
	}
}

func TestParseExpr(t *testing.T) {
	good := map[string]string{
		"duplicates == 0":                                 "duplicates == 0",
		"duplicates==0":                                   "duplicates == 0",
		"availability >= 0.99 during leap":                "availability >= 0.9900 during leap",
		"availability >= 99.5%":                           "availability >= 0.9950",
		"lead <= 200ms":                                   "lead max <= 200ms",
		"lag p99 <= 5ms":                                  "lag p99 <= 5ms",
		"max_wait <= 1s":                                  "wait max <= 1s",
		"gap < 150ms during step":                         "gap < 150ms during step",
		"order_violations == 0":                           "order_violations == 0",
		"restart_violations != 3":                         "restart_violations != 3",
		"wait p50 > 0s":                                   "wait p50 > 0s",
		"refusals >= 2900 during pause in simulated mode": "refusals >= 2900 during pause in simulated mode",
		"max_wait <= 5ms in real mode":                    "wait max <= 5ms in real mode",
	}
	for in, want := range good {
		e, err := ParseExpr(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if e.String() != want {
			t.Errorf("%q -> %q, want %q", in, e.String(), want)
		}
	}
	bad := map[string]string{
		"":                                      "empty invariant",
		"duplicats == 0":                        `did you mean "duplicates"?`,
		"lead p98 <= 1ms":                       `lead has no statistic "p98"`,
		"duplicates p99 == 0":                   `duplicates has no statistic`,
		"duplicates =< 0":                       `unknown comparison "="`,
		"duplicates == -1":                      "whole number",
		"duplicates == 0 while leap":            `unexpected "while"`,
		"order_violations == 0 during x":        "takes no \"during\"",
		"max_wait p99 <= 1s":                    "already names its statistic",
		"lead <=":                               "want a value",
		"max_wait <= 5ms in fake mode":          `in "fake" mode: want`,
		"duplicates == 0 in real mode":          "safety figure",
		"lease_overruns == 0 in simulated mode": "safety figure",
		"max_wait <= 5ms in real":               `unexpected "in"`,
	}
	for in, want := range bad {
		_, err := ParseExpr(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestHolds(t *testing.T) {
	e, _ := ParseExpr("availability >= 0.99")
	if !e.Holds(0.99) || e.Holds(0.9899) {
		t.Fatal("ge")
	}
	e, _ = ParseExpr("duplicates > 0")
	if e.Holds(0) || !e.Holds(1) {
		t.Fatal("gt")
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"5000/s": 5000, "100000/ms": 1e8, "60/m": 1, "1/us": 1e6, "3600/h": 1} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"5000", "x/s", "0/s", "-1/s", "1/d", "2/ns"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

func TestWindows(t *testing.T) {
	f := Fault{At: time.Second, Fault: faults.Fault{Kind: faults.KindStep, By: -150 * time.Millisecond}}
	if s, e := f.Observed(10 * time.Second); s != time.Second || e != time.Second+150*time.Millisecond+DefaultTail {
		t.Fatalf("step window %v %v", s, e)
	}
	f = Fault{At: 0, Fault: faults.Fault{Kind: faults.KindSlew, By: -300 * time.Millisecond}}
	if d := f.SlewDuration(); d != 600*time.Second {
		t.Fatalf("slew duration %v", d)
	}
	f = Fault{At: 5 * time.Second, Fault: faults.Fault{Kind: faults.KindDrift, PPM: 100}}
	if s, e := f.Observed(10 * time.Second); s != 5*time.Second || e != 10*time.Second {
		t.Fatalf("drift window %v %v", s, e)
	}
}

// TestParseTestdata parses every good file under testdata and rejects every
// file under testdata/bad with a line.
func TestParseTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range files {
		if _, err := ParseFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, f := range bad {
		_, err := ParseFile(f)
		if err == nil {
			t.Errorf("%s: parsed", f)
			continue
		}
		want, _ := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
		if len(want) > 0 && !strings.Contains(err.Error(), strings.TrimSpace(string(want))) {
			t.Errorf("%s: %v\nwant %s", f, err, want)
		}
	}
}

// TestParseLeaseKnobs: the lease settings of nodes, targets and faults.
func TestParseLeaseKnobs(t *testing.T) {
	s, err := Parse("lease.yaml", []byte(`name: lease
duration: 10s
nodes:
  - {name: a, worker: 3, lease: memory, lease_ttl: 2s, worker_range: 0-11, handoff_guard: off, pause_check: off, fence: off, mark_write_through: off, peer_clock_check: off, peer_clock_max_skew: 30s}
  - {name: b, worker: 4, lease: memory, worker_range: [4, 4]}
load: {rate: 100/s}
faults:
  - {name: down, at: 1s, kind: store_outage, for: 2s}
  - {name: cut, at: 4s, kind: store_outage, for: 1s, nodes: [a]}
  - {at: 6s, kind: clone, same_holder: on, nodes: [b]}
  - {at: 7s, kind: handoff, crash: on, gap: 3s, behind: 1s, nodes: [a]}
invariants: ["duplicates == 0", "refused_starts == 0", "rebinds >= 1", "availability < 1 during down"]
targets:
  - wait
  - {name: x, use: wait, lease_ttl: 3s, handoff_guard: on, pause_check: on, fence: on, mark_write_through: on, peer_clock_check: on, peer_clock_max_skew: 5s, not_applicable: ok}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Nodes[0], s.Nodes[1]
	if a.LeaseTTL != 2*time.Second || a.WorkerRange == nil || *a.WorkerRange != (WorkerRange{0, 11}) || !a.NoHandoffGuard || !a.NoPauseCheck || !a.NoFence || !a.NoMarkWriteThrough ||
		!a.NoPeerClockCheck || a.PeerClockMaxSkew != 30*time.Second {
		t.Fatalf("node a: %+v", a)
	}
	if b.LeaseTTL != 0 || *b.WorkerRange != (WorkerRange{4, 4}) || b.NoHandoffGuard || b.NoPauseCheck || b.NoFence || b.NoMarkWriteThrough || b.WorkerRange.Len() != 1 ||
		b.NoPeerClockCheck || b.PeerClockMaxSkew != 0 {
		t.Fatalf("node b: %+v", b)
	}
	if f := s.Faults[0]; f.Kind != faults.KindStoreOutage || f.Partition || !f.All || f.Span(0) != 2*time.Second || f.Kind.Clock() {
		t.Fatalf("outage: %+v", f)
	}
	if f := s.Faults[1]; !f.Partition || len(f.Nodes) != 1 || f.Nodes[0] != "a" {
		t.Fatalf("partition: %+v", f)
	}
	if f := s.Faults[2]; !f.SameHolder {
		t.Fatalf("clone: %+v", f)
	}
	if f := s.Faults[3]; !f.Crash || f.Gap != 3*time.Second || s.Faults[2].Crash {
		t.Fatalf("crash handoff: %+v", f)
	}
	x := s.Targets[1]
	if !x.NotApplicable || s.Targets[0].NotApplicable || x.LeaseTTL != 3*time.Second {
		t.Fatalf("targets: %+v", s.Targets)
	}
	if n := x.Apply(a); n.LeaseTTL != 3*time.Second || n.NoHandoffGuard || n.NoPauseCheck || n.NoFence || n.NoMarkWriteThrough ||
		n.NoPeerClockCheck || n.PeerClockMaxSkew != 5*time.Second {
		t.Fatalf("applied: %+v", n)
	}
	if s.Invariants[1].Metric != MetricRefusedStarts || s.Invariants[2].Metric != MetricRebinds {
		t.Fatalf("invariants: %+v", s.Invariants)
	}
}

// TestParseLeaseURLs: a node's lease may be a Postgres, etcd or ZooKeeper
// URL, kept as written; LeaseKind maps every accepted value to its backend
// kind.
func TestParseLeaseURLs(t *testing.T) {
	const pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	s, err := Parse("urls.yaml", []byte(`name: urls
duration: 10s
nodes:
  - {name: a, worker: 1, lease: "`+pg+`", lease_ttl: 2s}
  - {name: b, worker: 2, lease: "postgresql://u:pw@db.example:6543/ids"}
  - {name: c, worker: 3, lease: "etcd://127.0.0.1:2379,127.0.0.1:22379"}
  - {name: d, worker: 4, lease: memory}
  - {name: e, worker: 5}
  - {name: f, worker: 6, lease: "zk://127.0.0.1:2181,127.0.0.1:2182/snowchaos/run"}
load: {rate: 100/s}
invariants: ["duplicates == 0"]
targets:
  - wait
  - {name: x, use: wait, lease: "etcd://localhost:2379"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ lease, kind string }{
		{pg, LeasePostgres},
		{"postgresql://u:pw@db.example:6543/ids", LeasePostgres},
		{"etcd://127.0.0.1:2379,127.0.0.1:22379", LeaseEtcd},
		{LeaseMemory, LeaseMemory},
		{LeaseNone, LeaseNone},
		{"zk://127.0.0.1:2181,127.0.0.1:2182/snowchaos/run", LeaseZooKeeper},
	}
	for i, w := range want {
		n := s.Nodes[i]
		if n.Lease != w.lease || LeaseKind(n.Lease) != w.kind {
			t.Errorf("node %s: lease %q (kind %q), want %q (kind %q)", n.Name, n.Lease, LeaseKind(n.Lease), w.lease, w.kind)
		}
	}
	if s.Nodes[0].LeaseTTL != 2*time.Second {
		t.Errorf("node a: lease_ttl %v", s.Nodes[0].LeaseTTL)
	}
	if n := s.Targets[1].Apply(s.Nodes[3]); n.Lease != "etcd://localhost:2379" {
		t.Errorf("target override: %q", n.Lease)
	}
	for v, k := range map[string]string{"": LeaseNone, "ETCD://h:1": LeaseEtcd, "PostgreSQL://h/db": LeasePostgres, "mysql://h": "", "memory ": "", "postgres": "", "ZK://h:1": LeaseZooKeeper, "zookeeper": ""} {
		if got := LeaseKind(v); got != k {
			t.Errorf("LeaseKind(%q) = %q, want %q", v, got, k)
		}
	}
}

// TestExecBlock: an exec target's block parses with its defaults, and each
// bad value is an error naming its line.
func TestExecBlock(t *testing.T) {
	base := `name: x
mode: real
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: ["duplicates == 0"]
targets:
`
	s, err := Parse("dir/s.yaml", []byte(base+`  - name: js
    use: exec
    exec:
      command: [node, stdio.js, "{worker}"]
      env: {WORKER_ID: "{worker}", B: x}
      ready: ready
      timeout: 2s
`))
	if err != nil {
		t.Fatal(err)
	}
	x := s.Targets[0].Exec
	if x == nil || x.Protocol != ProtocolStdio || x.Format != FormatLines || x.ID != IDDecimal || x.Clock != ClockFaketime ||
		x.Dir != "dir" || x.Request != "{n}" || x.Timeout != 2*time.Second || len(x.Env) != 2 || x.Env[0] != (EnvVar{"WORKER_ID", "{worker}"}) {
		t.Fatalf("exec block: %+v", x)
	}
	if n := s.Targets[0].Apply(s.Nodes[0]); n.Exec != x {
		t.Fatal("Apply does not carry the exec block to the node")
	}
	if k := x.IDKind(); k != verify.KindSnowflake {
		t.Fatalf("IDKind of id: decimal = %s, want snowflake", k)
	}
	for _, k := range verify.Kinds()[1:] {
		s, err := Parse("s.yaml", []byte(base+"  - {name: js, use: exec, exec: {command: [a], id: "+k.String()+"}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Targets[0].Exec.IDKind(); got != k {
			t.Errorf("id: %s: IDKind %s", k, got)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"  - {name: js, use: exec}\n", "s.yaml:8: targets[0].exec: missing"},
		{"  - exec\n", "s.yaml:8: targets[0].exec: missing"},
		{"  - {name: js, exec: {command: [a]}}\n", "needs use: exec"},
		{"  - {name: js, use: exec, exec: {}}\n", "exec.command: missing"},
		{"  - {name: js, use: exec, exec: {command: [a, \"{wroker}\"]}}\n", "unknown placeholder {wroker}"},
		{"  - {name: js, use: exec, exec: {command: [a], protocol: grpc}}\n", `want stdio or http, found "grpc"`},
		{"  - {name: js, use: exec, exec: {command: [a], protocol: http}}\n", "exec.url: missing"},
		{"  - {name: js, use: exec, exec: {command: [a], protocol: http, url: \"http://10.0.0.1:{port}/\"}}\n", "loopback only"},
		{"  - {name: js, use: exec, exec: {command: [a], protocol: http, url: \"http://127.0.0.1:8080/\"}}\n", "needs {port}"},
		{"  - {name: js, use: exec, exec: {command: [a], format: json-field}}\n", "exec.field: missing"},
		{"  - {name: js, use: exec, exec: {command: [a], clock: go}}\n", "go_build: missing"},
		{"  - {name: js, use: exec, exec: {command: [a], max_batch: 0}}\n", "out of range [1, 1000000]"},
		{"  - {name: js, use: exec, exec: {command: [a], timeout: 10m}}\n", "out of range"},
		{"  - {name: js, use: exec, exec: {command: [a], env: {1X: y}}}\n", "not an environment variable name"},
		{"  - {name: js, use: exec, exec: {command: [a], formt: lines}}\n", `unknown key "formt"`},
		{"  - {name: js, use: exec, exec: {command: [a], id: uuid7}}\n", `exec.id: want decimal or uuidv7 or ulid or uuidv4 or uuid or string, found "uuid7"`},
	} {
		_, err := Parse("s.yaml", []byte(base+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestParseCustomLayout checks that a node takes any split of the 63 bits,
// with a tick and an epoch, and the whole node field as its worker range.
func TestParseCustomLayout(t *testing.T) {
	src := `name: x
duration: 2s
nodes:
  - {name: a, worker: 8191, layout: 50/13/0}
  - {name: b, worker: 0, layout: 63/0/0@1h, epoch: 2020-01-01T00:00:00Z}
  - {name: c, worker: 1023, layout: "40/3+7/13@100us"}
  - {name: d, worker: 65535, layout: sonyflake}
load: {rate: 100/s}
invariants: ["duplicates == 0"]
`
	s, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := s.Nodes[0].Layout, s.Nodes[1].Layout, s.Nodes[2].Layout, s.Nodes[3].Layout
	if a.SeqBits != 0 || a.NodeBits != 13 || a.TimeBits != 50 || a.MaxSeq() != 0 || s.Nodes[0].Worker != 8191 {
		t.Errorf("a: %+v", a)
	}
	if b.TimeBits != 63 || b.Tick != time.Hour || b.Epoch.Year() != 2020 || b.MaxNode() != 0 {
		t.Errorf("b: %+v", b)
	}
	if c.DatacenterBits != 3 || c.NodeBits != 10 || c.Tick != 100*time.Microsecond || s.Nodes[2].LayoutName != "40/3+7/13@100us" {
		t.Errorf("c: %+v %q", c, s.Nodes[2].LayoutName)
	}
	if d.Name != "39/16/8@10ms" || s.Nodes[3].Worker != 65535 {
		t.Errorf("d: %+v", d)
	}
}

// TestLeadOwnExpr: max_lead_own is a duration figure over the run or a
// window, with no percentiles.
func TestLeadOwnExpr(t *testing.T) {
	base := "name: x\nduration: 2s\nnodes: [{name: a, worker: 1, policy: logical}]\nload: {rate: 100/s}\nfaults: [{at: 1s, kind: step, by: -50ms}]\n"
	s, err := Parse("f.yaml", []byte(base+"invariants: [\"max_lead_own <= 1s\", \"max_lead_own < 60ms during step\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Invariants[0]; e.Metric != MetricLeadOwn || e.Value != float64(time.Second) || e.Unit() != UnitDuration {
		t.Errorf("%+v", e)
	}
	if e := s.Invariants[1]; e.During != "step" {
		t.Errorf("%+v", e)
	}
	for _, bad := range []string{"max_lead_own p99 <= 1s", "max_lead_own <= 5"} {
		if _, err := Parse("f.yaml", []byte(base+"invariants: [\""+bad+"\"]\n")); err == nil || !strings.Contains(err.Error(), "f.yaml:6: invariants[0]") {
			t.Errorf("%q: %v, want an error naming f.yaml:6: invariants[0]", bad, err)
		}
	}
}
