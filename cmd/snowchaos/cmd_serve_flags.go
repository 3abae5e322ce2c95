package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/snowchaos/snowchaos/generator"
)

// parseFlags parses args into fs for a command that takes no positional
// arguments, with usage (which ends in "flags:\n") and fs's defaults as
// the -h text, and fs's messages on stderr. ok false means the command
// returns code at once: exitOK after -h, exitInvalid on bad input.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, usage string) (code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitInvalid, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "snowchaos %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return exitInvalid, false
	}
	return exitOK, true
}

// presetNames lists the layout presets.
func presetNames() string {
	var names []string
	for _, l := range generator.Presets() {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}

// envName is the environment variable for a flag: SNOWCHAOS_MAX_WAIT.
func envName(flagName string) string {
	return "SNOWCHAOS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// SNOWCHAOS_* variable; the error names the variable.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}
