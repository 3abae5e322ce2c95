package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultStateDir holds the runs' records (a tmpfs: a reboot, which also
// ends every namespace, clears it).
const DefaultStateDir = "/run/snowchaos-netns"

// Prefix starts every namespace name a run creates: sc-<run id>-<host>.
const Prefix = "sc-"

// record is what a run writes before it creates anything, and updates
// before each namespace it adds: the marker that lets a later run tell a
// crashed run's leftovers from anything else.
type record struct {
	ID         string   `json:"id"`
	PID        int      `json:"pid"`
	PIDStart   uint64   `json:"pid_start"` // the owner's start time (/proc/PID/stat field 22)
	Subnet     string   `json:"subnet"`
	Route      bool     `json:"route"` // the guard route may exist
	Namespaces []string `json:"namespaces"`
	Dirs       []string `json:"dirs,omitempty"` // the store servers' data directories
}

// owns reports whether namespace name is one the record's run may have
// created (it is listed and carries the run's prefix).
func (r *record) owns(name string) bool {
	if !strings.HasPrefix(name, Prefix+r.ID+"-") {
		return false
	}
	for _, n := range r.Namespaces {
		if n == name {
			return true
		}
	}
	return false
}

// write stores r in dir atomically.
func (r *record) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+r.ID+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("netns: writing the run record: %w", err)
	}
	if err := os.Rename(tmp, recordPath(dir, r.ID)); err != nil {
		return fmt.Errorf("netns: writing the run record: %w", err)
	}
	return nil
}

func recordPath(dir, id string) string { return filepath.Join(dir, id+".json") }

// readRecords returns the records in dir (a missing dir has none); a
// record that does not parse is reported, never acted on.
func readRecords(dir string) (recs []*record, bad []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			bad = append(bad, name+": "+err.Error())
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || !validID(r.ID) || name != r.ID+".json" {
			bad = append(bad, name+": not a run record")
			continue
		}
		recs = append(recs, &r)
	}
	return recs, bad, nil
}

// dirPrefix starts the name of every data directory a run's servers
// create (in the temporary directory).
const dirPrefix = "snowchaos-netns-"

// ownedDir reports whether d is a directory a run may have created: an
// absolute path whose last element starts with dirPrefix.
func ownedDir(d string) bool {
	return filepath.IsAbs(d) && strings.HasPrefix(filepath.Base(d), dirPrefix) && filepath.Clean(d) == d
}

// validID reports whether id is a run ID: 6 lowercase hex digits.
func validID(id string) bool {
	if len(id) != 6 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseStatStart returns the start time (field 22) of a /proc/PID/stat
// line; the command name (field 2) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatStart(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("netns: /proc stat line without a command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("netns: /proc stat line with %d fields", len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procStart returns the start time of process pid, or ok false when there
// is no such process.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s, err := parseStatStart(string(b))
	return s, err == nil
}

// system is what Sweep does to the machine, so that its decisions can be
// tested without root.
type system interface {
	alive(pid int, start uint64) bool
	nsExists(name string) bool
	// killIn kills (SIGKILL, by PID) every process in namespace name and
	// waits until none is left.
	killIn(name string) error
	delNS(name string) error
	guardExists(subnet netip.Prefix) bool
	delGuard(subnet netip.Prefix) error
}

// SweepResult says what Sweep found.
type SweepResult struct {
	// Removed lists the namespaces and routes removed, and the records.
	Removed []string
	// Live are the subnets of runs whose owner still runs (not touched).
	Live []netip.Prefix
	// Ignored lists files in the state directory that are not run
	// records; nothing is done about them.
	Ignored []string
}

// sweep removes what the records in dir say a dead owner left behind:
// only namespaces the record lists and that carry its run's prefix (after
// killing the processes still in them, which only the run started), the
// guard route of its subnet and its servers' data directories; then the
// record. Runs whose owner lives
// are left alone (their subnets are reported as in use).
func sweep(sys system, dir string) (SweepResult, error) {
	var res SweepResult
	recs, bad, err := readRecords(dir)
	res.Ignored = bad
	if err != nil {
		return res, err
	}
	var errs []error
	for _, r := range recs {
		subnet, perr := netip.ParsePrefix(r.Subnet)
		if sys.alive(r.PID, r.PIDStart) {
			if perr == nil {
				res.Live = append(res.Live, subnet)
			}
			continue
		}
		failed := false
		for i := len(r.Namespaces) - 1; i >= 0; i-- {
			ns := r.Namespaces[i]
			if !r.owns(ns) || !sys.nsExists(ns) {
				continue
			}
			if err := sys.killIn(ns); err != nil {
				errs = append(errs, err)
				failed = true
				continue
			}
			if err := sys.delNS(ns); err != nil {
				errs = append(errs, err)
				failed = true
				continue
			}
			res.Removed = append(res.Removed, "namespace "+ns)
		}
		if r.Route && perr == nil && subnet.Bits() == SubnetBits && sys.guardExists(subnet) {
			if err := sys.delGuard(subnet); err != nil {
				errs = append(errs, err)
				failed = true
			} else {
				res.Removed = append(res.Removed, "route unreachable "+subnet.String())
			}
		}
		for _, d := range r.Dirs {
			if !ownedDir(d) {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
				failed = true
				continue
			}
			res.Removed = append(res.Removed, "directory "+d)
		}
		if failed {
			continue // keep the record: the next sweep tries again
		}
		if err := os.Remove(recordPath(dir, r.ID)); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Removed = append(res.Removed, "record "+r.ID)
	}
	return res, errors.Join(errs...)
}
