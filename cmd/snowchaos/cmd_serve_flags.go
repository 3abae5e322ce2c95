package main

import (
	"flag"
	"fmt"
	"github.com/snowchaos/snowchaos/faults"
	"strings"
	"time"

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

// checkServeFlags checks serve's numeric flags against their bounds
// (those server.Config and the generator do not bound themselves) and the
// worker ID against the layout's node field, with --lease too (where it is
// the preferred ID); the error names the flag, its value and the bound.
func checkServeFlags(f *serveFlags, layout generator.Layout) error {
	for _, d := range []struct {
		flag     string
		v        time.Duration
		min, max time.Duration
	}{
		{"--max-wait", f.maxWait, 0, 10 * time.Minute},
		{"--max-lead", f.maxLead, 0, 24 * time.Hour},
		{"--reserve", f.reserve, 0, time.Hour},
		{"--clock-offset", f.clockOffset, -faults.MaxOffset, faults.MaxOffset},
		{"--lease-ttl", f.leaseTTL, 0, 24 * time.Hour},
		{"--ntp-max-offset", f.ntpMaxOffset, 0, time.Hour},
		{"--ntp-interval", f.ntpEvery, 0, 24 * time.Hour},
	} {
		if d.v < d.min || d.v > d.max {
			return fmt.Errorf("%s %v out of range [%v, %v]", d.flag, d.v, d.min, d.max)
		}
	}
	if f.worker < 0 || f.worker > layout.MaxNode() {
		what := "worker ID"
		if f.leaseURL != "" {
			what = "preferred worker ID"
		}
		return fmt.Errorf("--worker %d: the %s must be in [0, %d] for layout %s", f.worker, what, layout.MaxNode(), layout.Name)
	}
	return nil
}
