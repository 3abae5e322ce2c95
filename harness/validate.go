package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
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

// binding is a scenario target resolved to what it runs: the registered
// target, the entry with its overrides ("wait", "refuse" and "logical" are
// the in-process generator with that policy; "declared" is the in-process
// generator as the nodes declare it) and the target's description.
type binding struct {
	t    scenario.Target // as written
	rt   scenario.Target // with the resolved overrides
	tgt  target.Target
	info target.Info
}

// bind resolves a scenario target once.
func bind(t scenario.Target) (binding, error) {
	rt := t
	use := t.Use
	if use == "" {
		use = t.Name
	}
	if p, ok := policyTargets[use]; ok {
		if rt.Policy == nil {
			rt.Policy = &p
		}
		use = target.InProcessName
	}
	if use == DeclaredTarget {
		use = target.InProcessName
	}
	tg, err := target.Lookup(use)
	if err != nil {
		names := append(target.Names(), DeclaredTarget, "wait", "refuse", "logical")
		return binding{}, fmt.Errorf("unknown target %q (known: %s)", use, strings.Join(names, ", "))
	}
	return binding{t: t, rt: rt, tgt: tg, info: tg.Info()}, nil
}

// MaxReal bounds a real-mode run's duration: real mode spends wall-clock
// time, so hours of scenario time belong in simulated mode.
const MaxReal = 10 * time.Minute

// notApplicable returns why bound target b cannot take scenario s in
// mode, "" when it can (see problems). Reasons are joined with "; ".
func notApplicable(s *scenario.Scenario, b binding, mode scenario.Mode) string {
	var why []string
	for _, p := range problems(s, b, mode) {
		why = append(why, p.msg)
	}
	return strings.Join(why, "; ")
}

// problem is one thing a target cannot do, at a line of the scenario.
type problem struct {
	line int
	key  string
	msg  string
}

// problems lists what bound target b cannot do of scenario s in mode: a
// fault kind it cannot take, a lease or checkpoint its nodes do not honour
// (known-bad targets ignore those on purpose), or simulated time.
func problems(s *scenario.Scenario, b binding, mode scenario.Mode) []problem {
	t, rt, tg, info := b.t, b.rt, b.tgt, b.info
	var out []problem
	if mode == scenario.ModeSimulated && !info.Caps.Simulated {
		out = append(out, problem{t.Line, "", fmt.Sprintf("target %s cannot run on simulated time: use --mode real", info.Name)})
	}
	explain, _ := tg.(target.FaultExplainer)
	for _, f := range s.Faults {
		if info.Caps.Supports(f.Kind) {
			continue
		}
		msg := fmt.Sprintf("target %s cannot take a %s fault (faults[%s]): the harness cannot control its clock or lifecycle that way", t.Name, f.Kind, f.Name)
		if explain != nil {
			if why := explain.NotApplicable(f); why != "" {
				msg = fmt.Sprintf("target %s cannot take a %s fault (faults[%s]): %s", t.Name, f.Kind, f.Name, why)
			}
		}
		out = append(out, problem{f.Line, "", msg})
	}
	if !info.KnownBad {
		for j, n := range s.Nodes {
			n = rt.Apply(n)
			if !info.Caps.SupportsLease(n.Lease) {
				out = append(out, problem{n.Line, fmt.Sprintf("nodes[%d].lease", j), fmt.Sprintf("target %s cannot use lease %s", t.Name, n.Lease)})
			}
			if n.Checkpoint && !info.Caps.Checkpoint {
				out = append(out, problem{n.Line, fmt.Sprintf("nodes[%d].checkpoint", j), fmt.Sprintf("target %s keeps no checkpoint", t.Name)})
			}
		}
	}
	return out
}

// Validate checks what the parser cannot: that every target exists and
// can do what the scenario asks of it (the fault kinds, leases, simulated
// time), that the lease settings make a working lease keeper, and that the
// load fits the simulation budget. A target that cannot take the scenario
// is an error unless it opts in to the n/a outcome (not_applicable: ok);
// a scenario that no target can take is an error either way. Errors name
// the file and line, like the parser's.
func Validate(s *scenario.Scenario, mode scenario.Mode) error {
	if mode == "" {
		mode = s.Mode
	}
	return validate(s, mode, false)
}

// validate is Validate in a given mode; allowNA opts every target in to
// n/a.
func validate(s *scenario.Scenario, mode scenario.Mode, allowNA bool) error {
	var errs scenario.ErrorList
	add := func(line int, key, format string, args ...any) {
		errs = append(errs, &scenario.Error{File: s.File, Line: max(line, 1), Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	na, firstNA := 0, ""
	for i, t := range s.Targets {
		key := fmt.Sprintf("targets[%d]", i)
		b, err := bind(t)
		if err != nil {
			add(t.Line, key, "%v", err)
			continue
		}
		rt := b.rt
		if ps := problems(s, b, mode); len(ps) > 0 {
			if t.NotApplicable || allowNA {
				na++
				if firstNA == "" {
					firstNA = t.Name + ": " + ps[0].msg
				}
				continue
			}
			for _, p := range ps {
				k := key
				if p.key != "" {
					k = p.key
				}
				add(p.line, k, "%s", p.msg)
			}
		}
		leases := false
		for j, n := range s.Nodes {
			n = rt.Apply(n)
			if scenario.LeaseKind(n.Lease) == scenario.LeaseNone {
				continue
			}
			leases = true
			if _, err := lease.NewKeeper(lease.KeeperConfig{Registry: lease.NewMemory(nil), Holder: n.Name, TTL: n.LeaseTTL}); err != nil {
				add(n.Line, fmt.Sprintf("nodes[%d].lease_ttl", j), "target %s: %v", t.Name, err)
			}
		}
		if !leases && (t.HandoffGuard != nil || t.PauseCheck != nil || t.Fence != nil || t.MarkWriteThrough != nil || t.LeaseTTL != 0 ||
			t.PeerClockCheck != nil || t.PeerClockMaxSkew != 0 || t.FenceMargin != nil) {
			add(t.Line, key, "target %s sets a lease setting but none of its nodes leases a worker ID", t.Name)
		}
	}
	if na > 0 && na == len(s.Targets) {
		add(s.Line, "targets", "no target can take this scenario (all %d would be n/a; first: %s)", na, firstNA)
	}
	if mode == scenario.ModeReal && s.RealNA != "" {
		return errs.Err() // every run is n/a: nothing of it runs on the wall clock
	}
	if mode == scenario.ModeReal {
		for i, f := range s.Faults {
			if f.Hang || f.Kind == faults.KindStorePause {
				// A hung call is modelled on the keeper's schedule in
				// simulated time (lifecycle.hangCall); in real time it
				// would fail at once, which is another fault.
				add(f.Line, fmt.Sprintf("faults[%d]", i), "a %s whose calls hang is simulated only (in real mode they would fail at once)", f.Kind)
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
