package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics and that every error it
// returns carries a line.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("name: x\nduration: 1s\nnodes: [{name: a, worker: 1}]\nload: {rate: 1/s}\ninvariants: [\"duplicates == 0\"]\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [{name: a, worker: 1, lease: memory, lease_ttl: 2s, worker_range: 0-3, fence: off}]\nload: {rate: 1/s}\n" +
		"faults: [{at: 1s, kind: store_outage, for: 2s, nodes: [a]}, {at: 4s, kind: clone, same_holder: on}]\ninvariants: [\"refused_starts == 0\"]\ntargets: [{name: w, use: wait, not_applicable: ok, real_na: races}]\nreal_na: 26 h\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [{name: a, worker: 1, lease: memory, lease_ttl: 2s, mark_write_through: off}]\nload: {rate: 1/s}\n" +
		"faults: [{at: 1s, kind: handoff, crash: true, gap: 2s, behind: 3s, nodes: [a]}]\ninvariants: [\"duplicates == 0\"]\ntargets: [{name: w, use: wait, mark_write_through: on}]\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [{name: a, worker: 1, lease: memory, peer_clock_max_skew: 2s}, {name: b, worker: 2, lease: memory}]\nload: {rate: 1/s}\n" +
		"faults: [{at: 1s, kind: handoff, behind: 10s, nodes: [a]}]\ninvariants: [\"refused_starts == 1\"]\ntargets: [{name: w, use: wait, peer_clock_check: off, peer_clock_max_skew: 1h}]\n"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("- - -"))
	f.Add([]byte("name: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err == nil {
			if s == nil || s.Name == "" || len(s.Nodes) == 0 || s.Duration <= 0 {
				t.Fatalf("accepted an incomplete scenario: %+v", s)
			}
			return
		}
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
		}
		for _, e := range list {
			if e.Line < 1 || e.File != "fuzz.yaml" {
				t.Fatalf("error without a line: %q", e.Error())
			}
		}
	})
}
