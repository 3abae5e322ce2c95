//go:build !linux

package main

import "errors"

// pinProcess is only available on Linux.
func pinProcess(int) error { return errors.New("pinning to a CPU needs Linux (sched_setaffinity)") }
