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
	f.Add([]byte("name: x\nduration: 1s\nnodes: [{name: a, worker: 8191, layout: 50/13/0@100us, epoch: 2026-01-01T00:00:00Z}]\nload: {rate: 1/s}\ninvariants: [\"max_lead_own <= 1ms\"]\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [{name: a, worker: 1, worker_range: 1-1, holder: pod-a, lease: memory, fence_margin: off}]\nload: {rate: 1/s}\n" +
		"faults: [{at: 1s, kind: store_drift, ppm: 50000}, {at: 2s, kind: store_step, by: 1s}, {at: 3s, kind: store_pause, for: 1s}, {at: 5s, kind: store_outage, for: 1s, hang: on, nodes: [a]}]\n" +
		"invariants: [\"lease_overruns == 0\"]\ntargets: [{name: w, use: wait, fence_margin: on}]\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [{name: a, worker: 1, checkpoint: on, reserve: 0}]\nload: {rate: 1/s, batch: 1500}\n" +
		"faults: [{at: 1s, kind: restart, point: mid_batch, nodes: [a]}, {at: 2s, kind: restart, graceful: on}]\ninvariants: [\"restart_violations == 0\"]\ntargets: [{name: w, use: wait, reserve: 1h}]\n"))
	f.Add([]byte("name: x\nmode: real\nduration: 1s\nnodes: [{name: a, worker: 1}]\nload: {rate: 10/s}\ninvariants: [\"duplicates == 0\"]\n" +
		"targets: [{name: js, use: exec, exec: {command: [a, \"{port}\"], env: {A: \"{worker}\"}, protocol: http, url: \"http://127.0.0.1:{port}/ids?n={n}\", time: on, time_url: \"http://127.0.0.1:{port}/t\", timeout: 2s}}]\n"))
	f.Add([]byte("name:\nduration: ~\nnodes: [~, {name: a, worker: }]\nload: {rate: }\nfaults: [{at: 1s, kind: step, by: }]\ninvariants: [~]\nexpect:\n"))
	f.Add([]byte("name: x\nduration: 9s\nnodes: [&n {name: a, worker: 1, lease: memory}, {name: b, worker: 2, lease: memory, lease_ttl: &t 2s}]\nload: {rate: 1/s}\n" +
		"faults: [{at: 1s, kind: store_outage, for: *t, nodes: [a]}, {at: 3s, kind: drift, ppm: 1e-300}]\ninvariants: [\"duplicates == 0\"]\n"))
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
