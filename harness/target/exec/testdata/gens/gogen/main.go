// Command gogen is a Snowflake generator in Go for the exec target's
// tests: stdio protocol, "time" answered with time.Now(). With NOCHECK=1
// in the environment it has no regression check (the negative twin). It
// reads the wall clock with time.Now().UnixMilli(), which the runtime
// serves from the vDSO: libfaketime never reaches it; the clock overlay
// does when the harness rebuilds it (clock: go).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const epochMs = 1704067200000

func main() {
	worker, err := strconv.ParseInt(os.Getenv("WORKER_ID"), 10, 64)
	if err != nil || worker < 0 || worker > 1023 {
		fmt.Fprintln(os.Stderr, "WORKER_ID must be 0..1023")
		os.Exit(2)
	}
	check := os.Getenv("NOCHECK") != "1"
	var last, seq int64 = -1, 0
	in, out := bufio.NewScanner(os.Stdin), bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	for in.Scan() {
		req := strings.TrimSpace(in.Text())
		if req == "time" {
			fmt.Fprintln(out, time.Now().UnixNano())
			out.Flush()
			continue
		}
		n, _ := strconv.Atoi(req)
		for range n {
			ms := time.Now().UnixMilli() - epochMs
			if check && ms < last {
				fmt.Fprintf(out, "refused: clock moved backwards by %d ms\n", last-ms)
				break
			}
			if ms == last {
				seq = (seq + 1) & 4095
			} else {
				seq = 0
			}
			last = ms
			fmt.Fprintln(out, ms<<22|worker<<12|seq)
		}
		out.Flush()
	}
}
