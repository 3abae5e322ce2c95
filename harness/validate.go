package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// policyTargets are the target names that mean "the in-process generator
// with this policy on every node".
var policyTargets = map[string]generator.Policy{
	"wait":    generator.PolicyWait,
	"refuse":  generator.PolicyRefuse,
	"logical": generator.PolicyLogical,
}

// DeclaredTarget is the target name that runs the nodes as declared, in
// process.
const DeclaredTarget = "declared"

// resolve maps a scenario target to the registered target it runs and the
// overrides it applies: "wait", "refuse" and "logical" are the in-process
// generator with that policy; "declared" is the in-process generator as the
// nodes declare it.
func resolve(t scenario.Target) (target.Target, scenario.Target, error) {
	use := t.Use
	if use == "" {
		use = t.Name
	}
	if p, ok := policyTargets[use]; ok {
		if t.Policy == nil {
			t.Policy = &p
		}
		use = target.InProcessName
	}
	if use == DeclaredTarget {
		use = target.InProcessName
	}
	tg, err := target.Lookup(use)
	if err != nil {
		names := append(target.Names(), DeclaredTarget, "wait", "refuse", "logical")
		return nil, t, fmt.Errorf("unknown target %q (known: %s)", use, strings.Join(names, ", "))
	}
	return tg, t, nil
}

// MaxReal bounds a real-mode run's duration: real mode spends wall-clock
// time, so hours of scenario time belong in simulated mode.
const MaxReal = 10 * time.Minute

// Validate checks what the parser cannot: that every target exists and
// can do what the scenario asks of it (the fault kinds, leases, simulated
// time), and that the load fits the simulation budget. Errors name the
// file and line, like the parser's.
func Validate(s *scenario.Scenario, mode scenario.Mode) error {
	var errs scenario.ErrorList
	add := func(line int, key, format string, args ...any) {
		errs = append(errs, &scenario.Error{File: s.File, Line: max(line, 1), Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if mode == "" {
		mode = s.Mode
	}
	for i, t := range s.Targets {
		key := fmt.Sprintf("targets[%d]", i)
		tg, rt, err := resolve(t)
		if err != nil {
			add(t.Line, key, "%v", err)
			continue
		}
		info := tg.Info()
		if mode == scenario.ModeSimulated && !info.Caps.Simulated {
			add(t.Line, key, "target %s cannot run on simulated time: use --mode real", info.Name)
		}
		for _, f := range s.Faults {
			if !info.Caps.Supports(f.Kind) {
				add(f.Line, key, "target %s cannot take a %s fault (faults[%s]): the harness cannot control its clock or lifecycle that way", t.Name, f.Kind, f.Name)
			}
		}
		if !info.KnownBad {
			for j, n := range s.Nodes {
				n = rt.Apply(n)
				if !info.Caps.SupportsLease(n.Lease) {
					add(n.Line, fmt.Sprintf("nodes[%d].lease", j), "target %s cannot use lease %s", t.Name, n.Lease)
				}
				if n.Checkpoint && !info.Caps.Checkpoint {
					add(n.Line, fmt.Sprintf("nodes[%d].checkpoint", j), "target %s keeps no checkpoint", t.Name)
				}
			}
		}
	}
	if mode == scenario.ModeReal && s.Duration > MaxReal {
		add(s.Line, "duration", "%s of wall-clock time: real mode runs are bounded to %s (simulate it, or shorten it)", s.Duration, MaxReal)
	}
	if _, err := newPlan(s, mode == scenario.ModeSimulated); err != nil {
		add(s.Load.Line, "load", "%v", err)
	}
	return errs.Err()
}
