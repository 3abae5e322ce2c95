// Command soak runs snowchaos serve for minutes under rotating clock
// faults, kill -9 restarts and a lease store outage, every ID verified by
// the verify sink, and judges its memory and goroutines flat (package
// soak; make soak; docs/soak.md).
//
//	go run ./cmd/soak -bin ../bin/snowchaos [-duration 10m] [-v]
//
// Exit status: 0 pass, 1 a finding (a duplicate, an ID the sink did not
// verify, a growth past the limits), 2 the soak could not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/snowchaos/snowchaos/bench/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c soak.Config
	fs.StringVar(&c.Bin, "bin", "bin/snowchaos", "the snowchaos binary (serve and verify)")
	fs.DurationVar(&c.Duration, "duration", 0, "how long the load runs, 30s to 24h (0: 10m)")
	fs.DurationVar(&c.RestartEvery, "restart-every", 0, "kill -9 interval (0: 1m)")
	fs.DurationVar(&c.FaultEvery, "fault-every", 0, "clock fault interval (0: 10s)")
	fs.DurationVar(&c.OutageAt, "outage-at", 0, "when the lease store crashes (0: 45% of the duration)")
	fs.DurationVar(&c.OutageFor, "outage-for", 0, "how long it stays down (0: 20s)")
	fs.IntVar(&c.Rate, "rate", 0, "requests per second (0: 100)")
	fs.IntVar(&c.Batch, "batch", 0, "IDs per request (0: 100)")
	fs.IntVar(&c.Clients, "clients", 0, "connections (0: 4)")
	fs.StringVar(&c.Dir, "dir", "", "working directory (empty: a temporary one, removed after a pass)")
	verbose := fs.Bool("v", false, "print every event as it happens")
	samples := fs.String("samples", "", "also write every sample of the serve process to this CSV file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "soak: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *verbose {
		c.Progress = stderr
	}
	rep, err := soak.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	if err := soak.Write(stdout, rep); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	if *samples != "" {
		f, err := os.Create(*samples)
		if err == nil {
			err = soak.WriteSamples(f, rep)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "soak: -samples: %v\n", err)
			return 2
		}
	}
	if !rep.Pass {
		return 1
	}
	return 0
}
