//go:build linux

package netns

import "syscall"

// syscallAlive returns nil when process pid exists.
func syscallAlive(pid int) error { return syscall.Kill(pid, 0) }
