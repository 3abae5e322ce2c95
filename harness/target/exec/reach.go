package exec

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
)

// A clock fault reaches a process only through the interposer its route
// puts in it: libfaketime, preloaded into every dynamically linked
// program, or the Go runtime overlay's clock page, mapped by the rebuilt
// program. Neither is visible to the harness from the outside unless it
// looks: a statically linked program ignores LD_PRELOAD, a Go binary
// behind a wrapper script reads the clock through the vDSO, and either
// would run unfaulted while a probe beside it reports the fault. So after
// each start the node looks at the memory maps of every process in its
// process group (the command and whatever it started): the route's
// interposer loaded in none of them means no clock fault can reach the
// node. Loaded is necessary, not sufficient (a program may still read the
// time another way: bash's $EPOCHREALTIME does); the process's own clock
// reading, or the time its IDs carry, decides whether a fault reached it.

// member is one process of a node's process group.
type member struct {
	pid  int
	exe  string // the executable's path ("" when unreadable)
	comm string
	maps []byte // its memory map (nil when unreadable)
}

// groupMembers returns the live processes of process group pgid, by
// reading /proc.
func groupMembers(pgid int) []member {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []member
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		comm, pg, ok := parseStat(stat)
		if !ok || pg != pgid {
			continue
		}
		m := member{pid: pid, comm: comm}
		m.exe, _ = os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		m.maps, _ = os.ReadFile(filepath.Join("/proc", e.Name(), "maps"))
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// parseStat returns the command name and process group of a
// /proc/<pid>/stat line ("pid (comm) state ppid pgrp ...").
func parseStat(b []byte) (comm string, pgrp int, ok bool) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return "", 0, false
	}
	f := strings.Fields(string(b[close+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pg, err := strconv.Atoi(f[2])
	return string(b[open+1 : close]), pg, err == nil
}

// maps reports whether a memory map names a file whose path contains
// needle.
func mapsHave(maps []byte, needle string) bool {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(needle)) {
			return true
		}
	}
	return false
}

// reach says whether the route's interposer is loaded in a process of the
// group: "" when it is, else why no clock fault can reach the node, naming
// the processes and, for a Go binary on the libfaketime route, what to do
// instead. needle is what the interposer's mapping is called (the
// library's or the clock page's path).
func reach(members []member, needle, route string) string {
	if len(members) == 0 {
		return "no process of the node's group is alive to carry the fault"
	}
	var without []string
	var goBins []string
	for _, m := range members {
		if m.maps != nil && mapsHave(m.maps, needle) {
			return ""
		}
		name := m.exe
		if name == "" {
			name = m.comm
		}
		why := "not loaded"
		if m.maps == nil {
			why = "memory map unreadable"
		} else if !mapsHave(m.maps, "ld-linux") && !mapsHave(m.maps, "libc.so") {
			why = "statically linked: LD_PRELOAD has no effect (link it dynamically for the test)"
		}
		if m.exe != "" {
			if ok, v := goclock.IsGoBinary(m.exe); ok {
				goBins = append(goBins, fmt.Sprintf("%s (pid %d, built by %s)", m.exe, m.pid, v))
				why = "a Go binary: it reads the wall clock through the vDSO"
			}
		}
		without = append(without, fmt.Sprintf("pid %d %s: %s", m.pid, name, why))
	}
	msg := fmt.Sprintf("%s is loaded in no process of the node (%s): no clock fault can reach it", route, strings.Join(without, "; "))
	if len(goBins) > 0 && route == routeFaketime {
		msg += fmt.Sprintf("; %s runs behind the command: give its source (clock: go, go_build: ./path/to/main) so the harness rebuilds it with the runtime clock overlay, and start it without the wrapper or exec it from one", strings.Join(goBins, ", "))
	}
	return msg
}

// Routes, as reach names them.
const (
	routeFaketime = "libfaketime"
	routeGo       = "the Go clock overlay's page"
)
