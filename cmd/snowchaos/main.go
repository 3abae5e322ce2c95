// Command snowchaos generates Snowflake IDs and proves them unique under
// clock faults, worker-ID faults and load.
//
// Each subcommand lives in its own cmd_<name>.go file and registers itself.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK      = 0 // everything as expected
	exitFailure = 1 // a finding: a failed invariant, an unhealthy check
	exitInvalid = 2 // bad input, unknown verdicts, unusable environment
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; it is called from init functions.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("snowchaos: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	stop := handleSignals(cancel, os.Stderr, os.Exit)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// handleSignals cancels the command on the first SIGINT or SIGTERM, saying
// so on stderr, and on a second one exits at once with 128 + the signal's
// number (130, 143), as a shell reports a process killed by it, without
// waiting for the shutdown. stop ends the handling.
func handleSignals(cancel context.CancelFunc, stderr io.Writer, exit func(int)) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "snowchaos: %v: shutting down (a second signal exits at once)\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "snowchaos: second %v: exiting without finishing the shutdown\n", s)
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// dispatch runs the subcommand named by args[0].
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return exitInvalid
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "snowchaos: unknown command %q\n", args[0])
		usage(stderr)
		return exitInvalid
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: snowchaos <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}
