//go:build unix

package verify

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used,
// so that benchmarks on a shared machine can report cost per ID that
// other processes' load does not inflate.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
