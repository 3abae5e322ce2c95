package explore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

func TestParseSpace(t *testing.T) {
	sp, err := ParseSpace("s.yaml", []byte(`
kinds: [step, restart]
faults: 1-2
nodes: 2
duration: 500ms-1s
rate: 100-2000
burst: off
shift: 1ms-5ms
crash_points: [new_tick]
layouts: ["39/16/8@10ms"]
policies: [logical]
checkpoint: [on]
leases: [none]
max_lead: [10ms]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Space{Kinds: []faults.Kind{faults.KindStep, faults.KindRestart}, Faults: IntRange{1, 2}, Nodes: IntRange{2, 2},
		Duration: DurRange{500 * time.Millisecond, time.Second}, Rate: FloatRange{100, 2000}, Burst: -1,
		Shift: DurRange{time.Millisecond, 5 * time.Millisecond}, CrashPoints: []string{"new_tick"}, Layouts: []string{"39/16/8@10ms"},
		Policies: []string{"logical"}, Checkpoint: []bool{true}, Leases: []string{""}, MaxLead: []time.Duration{10 * time.Millisecond}}
	if !equalSpace(sp, want) {
		t.Fatalf("got %+v\nwant %+v", sp, want)
	}
	// An empty file is the default space.
	for _, empty := range []string{"", "# nothing\n", "~\n"} {
		if sp, err := ParseSpace("e.yaml", []byte(empty)); err != nil || !equalSpace(sp, Space{}) {
			t.Errorf("%q: %+v, %v", empty, sp, err)
		}
	}
}

func equalSpace(a, b Space) bool {
	return slices.Equal(a.Kinds, b.Kinds) && a.Faults == b.Faults && a.Nodes == b.Nodes && a.Duration == b.Duration && a.Rate == b.Rate &&
		a.Burst == b.Burst && a.Shift == b.Shift && slices.Equal(a.CrashPoints, b.CrashPoints) && slices.Equal(a.Layouts, b.Layouts) &&
		slices.Equal(a.Policies, b.Policies) && slices.Equal(a.Checkpoint, b.Checkpoint) && slices.Equal(a.Leases, b.Leases) &&
		slices.Equal(a.MaxLead, b.MaxLead) && a.Span == b.Span && a.PPM == b.PPM && a.Clients == b.Clients && a.Batch == b.Batch && a.LeaseTTL == b.LeaseTTL
}

// Each problem names the file, the line and the key.
func TestParseSpaceErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kinds: [step, stepp]", `s.yaml:1: kinds: unknown fault kind "stepp"`},
		{"faults: 1-4\nnodse: 2", `s.yaml:2: nodse: unknown key; did you mean "nodes"?`},
		{"nodes: 0-3", "s.yaml:1: nodes: want 1 <= min <= max <= 8"},
		{"nodes: 9", "s.yaml:1: nodes: want 1 <= min <= max <= 8"},
		{"faults: 0", "s.yaml:1: faults: want a max of at least 1"},
		{"faults: 17", "s.yaml:1: faults: want 0 <= min <= max <= 16"},
		{"duration: 2h", "s.yaml:1: duration: want 10ms <= min <= max <= 1m0s"},
		{"duration: 3s-1s", "s.yaml:1: duration: want 10ms <= min <= max <= 1m0s"},
		{"duration: soon", "s.yaml:1: duration: want a duration or a range"},
		{"rate: 1e7", "s.yaml:1: rate: want 1 <= min <= max <= 1e+06"},
		{"rate: NaN", "s.yaml:1: rate: want a number"},
		{"ppm: 2000000", "s.yaml:1: ppm: want 0.001 <= min <= max <= 1e+06"},
		{"burst: 2", "s.yaml:1: burst: want a chance in [0, 1]"},
		{"kinds: step", `s.yaml:1: kinds: want a list such as [a, b], found "step"`},
		{"kinds: []", "s.yaml:1: kinds: empty"},
		{"layouts: [41/10/13]", "s.yaml:1: layouts:"},
		{"policies: [spin]", `s.yaml:1: policies: want wait, refuse or logical, found "spin"`},
		{"leases: [etcd]", "s.yaml:1: leases: want none or memory"},
		{"checkpoint: [maybe]", "s.yaml:1: checkpoint: want on or off"},
		{"crash_points: [never]", `s.yaml:1: crash_points: unknown crash point "never"`},
		{"max_lead: [0s]", "s.yaml:1: max_lead: want a duration from 1us to 1h"},
		{"nodes: 2\nnodes: 3", "s.yaml:2: nodes: repeated"},
		{"- step", "s.yaml:1: a space file is a mapping"},
		{"nodes: [1", "s.yaml:1: invalid YAML"},
		{"clients: {a: 1}", "s.yaml:1: clients: want a value, found a mapping"},
		{"lease_ttl: 1ms", "s.yaml:1: lease_ttl: want 100ms"},
		{"batch: 1-20000", "s.yaml:1: batch: want 1 <= min <= max <= 10000"},
	} {
		_, err := ParseSpace("s.yaml", []byte(tc.in))
		var el scenario.ErrorList
		if err == nil || !errors.As(err, &el) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseSpace: any input gives a space or errors with lines, never a
// panic; a space that parses has every range ordered and bounded, and
// generates valid schedules.
func FuzzParseSpace(f *testing.F) {
	for _, s := range []string{"", "kinds: [step]\nfaults: 1-2", "nodes: 2\nduration: 1s-2s\nrate: 10-20", "burst: 0.5\nshift: 1ms-1s\nppm: 1-10",
		"layouts: [\"41/10/12\"]\nleases: [memory]\nlease_ttl: 1s", "a: [b, {c: d}]", "nodes: &x 2\nfaults: *x"} {
		f.Add([]byte(s))
	}
	c, err := CapsOf("inprocess")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := ParseSpace("f.yaml", data)
		if err != nil {
			var el scenario.ErrorList
			if !errors.As(err, &el) || len(el) == 0 {
				t.Fatalf("error without lines: %v", err)
			}
			for _, e := range el {
				if e.Line < 1 {
					t.Fatalf("error without a line: %v", e)
				}
			}
			return
		}
		d := sp.WithDefaults()
		if d.Faults.Min > d.Faults.Max || d.Faults.Max > MaxFaults || d.Nodes.Min < 1 || d.Nodes.Max > MaxNodes ||
			d.Duration.Min > d.Duration.Max || d.Duration.Max > MaxDuration || d.Rate.Max > MaxRate || d.Batch.Max > MaxBatch {
			t.Fatalf("unbounded space: %+v", d)
		}
		s := Generate(Derive(1, 0), sp, c, "inprocess", "x")
		if _, err := s.Scenario("x.yaml"); err != nil {
			t.Fatalf("space %q drew an invalid schedule: %v\n%s", data, err, s.YAML())
		}
	})
}
