package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Every subcommand parses its flags here, so that flags may follow file
// and ID arguments as in most Go CLIs (snowchaos run a.yaml --html r.html)
// and "--" ends the flags.

// parseArgs parses args into fs and returns the positional arguments,
// with usage (which ends in "flags:\n") and fs's defaults as the -h text,
// and fs's messages on stderr. Flags may come before, between or after
// the positional arguments (see parseInterleaved). ok false means the
// command returns code at once: exitOK after -h, exitInvalid on bad input.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer, usage string) (pos []string, code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, flagExit(err), false
	}
	return pos, exitOK, true
}

// parseFlags is parseArgs for a command that takes no positional
// arguments: any is an error.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, usage string) (code int, ok bool) {
	pos, code, ok := parseArgs(fs, args, stderr, usage)
	if ok && len(pos) > 0 {
		fmt.Fprintf(stderr, "snowchaos %s: unexpected arguments %q\n", fs.Name(), pos)
		return exitInvalid, false
	}
	return code, ok
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments; "--" ends the flags, and an argument like "-1" is
// positional (so a negative ID is reported as a bad ID, not a bad flag)
// unless it is the value of a flag, as in "-n -5".
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos, flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") || isNegativeNumber(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return append(pos, fs.Args()...), nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func isNegativeNumber(s string) bool {
	return len(s) > 1 && s[0] == '-' && s[1] >= '0' && s[1] <= '9'
}

// flagSet returns a FlagSet that reports to stderr with a usage line.
func flagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: snowchaos %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// flagExit maps a flag parsing error to an exit code: 0 for -h, else 2
// (the flag package has already printed the problem and the usage).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitInvalid
}
