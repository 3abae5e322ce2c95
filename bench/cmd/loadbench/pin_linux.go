//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinProcess binds every thread of this process to one CPU with
// sched_setaffinity (what taskset -a -p does) and sets GOMAXPROCS to 1,
// as the Go runtime would have chosen had the process started pinned.
// Threads created later inherit the binding from their creator. cpu must
// be one the process may run on.
func pinProcess(cpu int) error {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("reading the CPU affinity: %w", err)
	}
	if cpu < 0 || cpu >= 1024 || !allowed.IsSet(cpu) {
		return fmt.Errorf("CPU %d is not one this process may run on (%d allowed)", cpu, allowed.Count())
	}
	var set unix.CPUSet
	set.Set(cpu)
	runtime.GOMAXPROCS(1)
	// A thread started while the list is read may have inherited the old
	// binding: repeat until a pass finds every thread bound.
	for range 10 {
		tids, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing threads: %w", err)
		}
		bound := true
		for _, d := range tids {
			tid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err != nil {
				continue // the thread exited
			}
			if cur == set {
				continue
			}
			bound = false
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("binding thread %d to CPU %d: %w", tid, cpu, err)
			}
		}
		if bound {
			return nil
		}
	}
	return fmt.Errorf("threads kept appearing unbound to CPU %d", cpu)
}
