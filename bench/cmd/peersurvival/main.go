// Command peersurvival runs the peer scenarios (default: scenarios/peers)
// through the snowchaos harness with the peer libraries registered as
// targets, and prints the fault-survival table as Markdown.
//
//	go run ./cmd/peersurvival [-v] [FILE|DIR ...]
//
// It links the harness API (harness.Prepare and harness.Run) rather than
// the snowchaos CLI, whose binary does not know the peer targets. Exit
// status: 0 when every verdict is as the scenarios expect (a peer's
// expected duplicates included), 1 when a check failed, 2 when one is
// unknown or the input is invalid.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/snowchaos/snowchaos/bench/survival"
	"github.com/snowchaos/snowchaos/bench/throughput"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("peersurvival", flag.ContinueOnError)
	fl.SetOutput(stderr)
	verbose := fl.Bool("v", false, "also print the harness's full matrix (checks, unconfirmed faults, first duplicates)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	paths := fl.Args()
	if len(paths) == 0 {
		paths = []string{"scenarios/peers"}
	}
	suite, err := survival.Load(paths...)
	if err != nil {
		fmt.Fprintf(stderr, "peersurvival: invalid scenario:\n%v\n", err)
		return 2
	}
	began := time.Now()
	rep, err := survival.Run(ctx, suite, harness.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "peersurvival: %v\n", err)
		return 2
	}
	if *verbose {
		if err := report.Terminal(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "peersurvival: %v\n", err)
			return 2
		}
	}
	m := throughput.ThisMachine()
	fmt.Fprintf(stdout, "Fault survival: %d scenarios (%s mode where any needs it), machine %s, %d cores, %s, %s; ran in %s.\n\n", len(suite), rep.Mode, m.CPU, m.Cores, m.Go, m.OS, time.Since(began).Round(time.Millisecond))
	if err := survival.Build(rep).Markdown(stdout); err != nil {
		fmt.Fprintf(stderr, "peersurvival: %v\n", err)
		return 2
	}
	s := rep.Summary
	fmt.Fprintf(stdout, "\n%d runs: %d passed, %d failed, %d unknown; verdict %s\n", s.Runs, s.Passed, s.Failed, s.Unknown, rep.Verdict)
	return rep.ExitCode()
}
