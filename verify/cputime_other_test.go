//go:build !unix

package verify

import "time"

// processCPU is unavailable here; benchmarks then omit cpu-ns/ID.
func processCPU() time.Duration { return 0 }
