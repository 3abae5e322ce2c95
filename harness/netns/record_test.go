package netns

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeSystem is a machine for sweep: which owners live, which namespaces
// and guard routes exist, and what sweep deleted.
type fakeSystem struct {
	live    map[int]uint64
	ns      map[string]bool
	guards  map[netip.Prefix]bool
	deleted []string
	killed  []string
	failDel string
}

func (f *fakeSystem) alive(pid int, start uint64) bool { s, ok := f.live[pid]; return ok && s == start }
func (f *fakeSystem) nsExists(n string) bool           { return f.ns[n] }
func (f *fakeSystem) killIn(n string) error {
	f.killed = append(f.killed, n)
	return nil
}
func (f *fakeSystem) delNS(n string) error {
	if n == f.failDel {
		return errors.New("busy")
	}
	delete(f.ns, n)
	f.deleted = append(f.deleted, n)
	return nil
}
func (f *fakeSystem) guardExists(p netip.Prefix) bool { return f.guards[p] }
func (f *fakeSystem) delGuard(p netip.Prefix) error {
	delete(f.guards, p)
	f.deleted = append(f.deleted, "route "+p.String())
	return nil
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	pgDir, strange := filepath.Join(tmp, "snowchaos-netns-pg-1"), filepath.Join(tmp, "keep-me")
	os.Mkdir(pgDir, 0o755)
	os.Mkdir(strange, 0o755)
	dead := &record{ID: "aaaaaa", PID: 100, PIDStart: 7, Subnet: "10.5.5.0/24", Route: true,
		Namespaces: []string{"sc-aaaaaa-hub", "sc-aaaaaa-a", "sc-bbbbbb-a", "other"},
		Dirs:       []string{pgDir, strange, "relative/snowchaos-netns-x"}}
	reused := &record{ID: "cccccc", PID: 200, PIDStart: 1, Subnet: "10.6.6.0/24", Route: true,
		Namespaces: []string{"sc-cccccc-hub"}} // PID 200 now belongs to another process
	live := &record{ID: "dddddd", PID: 300, PIDStart: 9, Subnet: "10.7.7.0/24", Route: true,
		Namespaces: []string{"sc-dddddd-hub"}}
	for _, r := range []*record{dead, reused, live} {
		if err := r.write(dir); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "notes.json"), []byte("{}"), 0o644)
	sys := &fakeSystem{
		live: map[int]uint64{200: 5, 300: 9},
		ns: map[string]bool{"sc-aaaaaa-hub": true, "sc-aaaaaa-a": true, "sc-bbbbbb-a": true, "other": true,
			"sc-aaaaaa-unlisted": true, "sc-cccccc-hub": true, "sc-dddddd-hub": true},
		guards: map[netip.Prefix]bool{netip.MustParsePrefix("10.5.5.0/24"): true, netip.MustParsePrefix("10.7.7.0/24"): true},
	}
	res, err := sweep(sys, dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sys.deleted)
	want := []string{"route 10.5.5.0/24", "sc-aaaaaa-a", "sc-aaaaaa-hub", "sc-cccccc-hub"}
	if !slices.Equal(sys.deleted, want) {
		t.Fatalf("deleted %v, want %v", sys.deleted, want)
	}
	// Not listed, another run's prefix, no prefix, a live run's: untouched.
	for _, n := range []string{"sc-aaaaaa-unlisted", "sc-bbbbbb-a", "other", "sc-dddddd-hub"} {
		if !sys.ns[n] {
			t.Errorf("sweep removed %s", n)
		}
	}
	if _, err := os.Stat(pgDir); !os.IsNotExist(err) {
		t.Errorf("a dead run's data directory kept: %v", err)
	}
	if _, err := os.Stat(strange); err != nil {
		t.Errorf("sweep removed a directory without the run's prefix: %v", err)
	}
	slices.Sort(sys.killed)
	if want := []string{"sc-aaaaaa-a", "sc-aaaaaa-hub", "sc-cccccc-hub"}; !slices.Equal(sys.killed, want) {
		t.Errorf("killed the processes of %v, want %v", sys.killed, want)
	}
	if !sys.guards[netip.MustParsePrefix("10.7.7.0/24")] {
		t.Error("sweep removed a live run's route")
	}
	if len(res.Live) != 1 || res.Live[0] != netip.MustParsePrefix("10.7.7.0/24") {
		t.Errorf("live subnets %v", res.Live)
	}
	if len(res.Ignored) != 1 {
		t.Errorf("ignored %v, want notes.json", res.Ignored)
	}
	for _, id := range []string{"aaaaaa", "cccccc"} {
		if _, err := os.Stat(recordPath(dir, id)); !os.IsNotExist(err) {
			t.Errorf("record %s kept: %v", id, err)
		}
	}
	if _, err := os.Stat(recordPath(dir, "dddddd")); err != nil {
		t.Errorf("live record removed: %v", err)
	}
}

// TestSweepKeepsRecordOnFailure: a namespace that could not be removed
// keeps its record, so the next sweep tries again.
func TestSweepKeepsRecordOnFailure(t *testing.T) {
	dir := t.TempDir()
	r := &record{ID: "abcdef", PID: 1, PIDStart: 1, Subnet: "10.5.5.0/24", Namespaces: []string{"sc-abcdef-hub"}}
	r.write(dir)
	sys := &fakeSystem{ns: map[string]bool{"sc-abcdef-hub": true}, failDel: "sc-abcdef-hub"}
	if _, err := sweep(sys, dir); err == nil {
		t.Fatal("no error for a failed removal")
	}
	if _, err := os.Stat(recordPath(dir, "abcdef")); err != nil {
		t.Fatalf("record removed after a failure: %v", err)
	}
}

func TestParseStatStart(t *testing.T) {
	line := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	if s, err := parseStatStart(line); err != nil || s != 987654 {
		t.Fatalf("%d %v", s, err)
	}
	for _, bad := range []string{"", "1 (x) S 1", "no paren"} {
		if _, err := parseStatStart(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if s, ok := procStart(os.Getpid()); !ok || s == 0 {
		t.Fatalf("own start %d %v", s, ok)
	}
}

func TestValidID(t *testing.T) {
	for id, ok := range map[string]bool{"a1b2c3": true, "A1B2C3": false, "a1b2c": false, "../../x": false, "a1b2c3d": false} {
		if validID(id) != ok {
			t.Errorf("validID(%q) = %v", id, !ok)
		}
	}
}
