package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/snowchaos/snowchaos/generator"
)

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
