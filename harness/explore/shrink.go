package explore

import (
	"context"
	"slices"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness"
)

// MinTail is the least time a shrunk schedule keeps after its last fault.
const MinTail = 1500 * time.Millisecond

// DefaultShrinkRuns bounds the runs one shrink makes.
const DefaultShrinkRuns = 400

// Shrink reduces failing schedule s greedily while it still fails the
// invariant key, with every fault still confirmed: it tries, in order, dropping each fault, the burst, the
// batch and extra clients, each node, shortening the duration, moving the
// faults earlier, halving each magnitude and dropping each option of a
// fault, halving the rate, plain node settings (default layout, reserve
// and TTL) and rounder instants, and keeps the first change that still
// fails, then starts over; it stops when no change is kept or after
// maxRuns runs (zero: DefaultShrinkRuns). It returns the smallest
// schedule and the runs it made. Runs are simulated, so a kept change
// reproduces.
func Shrink(ctx context.Context, s *Schedule, key string, maxRuns int, o harness.Options) (*Schedule, int) {
	if maxRuns <= 0 {
		maxRuns = DefaultShrinkRuns
	}
	cur := s.Clone()
	runs := 0
	tried := map[string]bool{cur.YAML(): true}
	for runs < maxRuns && ctx.Err() == nil {
		kept := false
		for _, c := range candidates(cur) {
			c.Invariants = Invariants(c)
			y := c.YAML()
			if tried[y] {
				continue
			}
			tried[y] = true
			if _, err := c.Scenario("shrink.yaml"); err != nil {
				continue
			}
			if ctx.Err() != nil {
				break
			}
			runs++
			out := RunSchedule(ctx, c, o)
			if out.stalled() {
				break // see Outcome.stalled
			}
			if out.Verdict == harness.Fail && failsKey(out, key) && !out.Unconfirmed {
				cur, kept = c, true
				break
			}
			if runs >= maxRuns {
				break
			}
		}
		if !kept {
			break
		}
	}
	return cur, runs
}

// failsKey reports whether one of the failed checks has subject key.
func failsKey(o Outcome, key string) bool {
	for _, f := range o.Failed {
		if subject(f) == key {
			return true
		}
	}
	return o.Key == key
}

// candidates are the one-step reductions of s, smallest-first in effect.
func candidates(s *Schedule) []*Schedule {
	var out []*Schedule
	add := func(f func(c *Schedule) bool) {
		c := s.Clone()
		if f(c) {
			out = append(out, c)
		}
	}
	// Fewer faults.
	for i := len(s.Faults) - 1; i >= 0; i-- {
		add(func(c *Schedule) bool { c.Faults = slices.Delete(c.Faults, i, i+1); return true })
	}
	// Plainer load.
	add(func(c *Schedule) bool { ok := c.Load.Burst != nil; c.Load.Burst = nil; return ok })
	add(func(c *Schedule) bool { ok := c.Load.Batch > 1; c.Load.Batch = 1; return ok })
	add(func(c *Schedule) bool { ok := c.Load.Clients > 1; c.Load.Clients = 1; return ok })
	// Fewer nodes.
	for j := len(s.Nodes) - 1; j >= 0 && len(s.Nodes) > 1; j-- {
		add(func(c *Schedule) bool { return dropNode(c, s.Nodes[j].Name) })
	}
	// Shorter: end soon after the last fault, or at half.
	last := time.Duration(0)
	for _, f := range s.Faults {
		last = max(last, f.At)
	}
	if b := s.Load.Burst; b != nil {
		last = max(last, b.At+time.Millisecond)
	}
	// The tail after the last fault stays long enough for the safe
	// generator to recover (a start fence waits out up to a second's
	// reserve): cut shorter, the shrunk schedule would leave a restarted
	// node that never served, unknown on the clean build.
	for _, d := range []time.Duration{last + MinTail, s.Duration / 2} {
		d = d.Round(100 * time.Millisecond)
		if d < s.Duration && d >= last+MinTail {
			add(func(c *Schedule) bool { c.Duration = d; return true })
		}
	}
	// A round duration.
	if r := s.Duration.Truncate(100 * time.Millisecond); r != s.Duration && r >= last+MinTail {
		add(func(c *Schedule) bool { c.Duration = r; return true })
	} else if r := (s.Duration + 99*time.Millisecond).Truncate(100 * time.Millisecond); r != s.Duration {
		add(func(c *Schedule) bool { c.Duration = r; return true })
	}
	// Earlier: move every fault (and the burst) earlier together.
	first := s.Duration
	for _, f := range s.Faults {
		first = min(first, f.At)
	}
	if shift := (first / 2).Round(time.Millisecond); shift > 0 && len(s.Faults) > 0 {
		add(func(c *Schedule) bool {
			for i := range c.Faults {
				c.Faults[i].At -= shift
			}
			if c.Load.Burst != nil {
				if c.Load.Burst.At < shift {
					return false
				}
				c.Load.Burst.At -= shift
			}
			c.Duration -= shift
			return true
		})
	}
	// Smaller faults: halve each magnitude, drop each option.
	for i := range s.Faults {
		for _, m := range reductions(s.Faults[i].Fault) {
			add(func(c *Schedule) bool { c.Faults[i].Fault = m; return true })
		}
		if len(s.Faults[i].Nodes) > 1 {
			for _, n := range s.Faults[i].Nodes {
				add(func(c *Schedule) bool { c.Faults[i].Nodes = []string{n}; return true })
			}
		}
	}
	// Lower rate.
	if s.Load.Rate >= 200 {
		add(func(c *Schedule) bool { c.Load.Rate = float64(int(c.Load.Rate / 2)); return true })
	}
	if b := s.Load.Burst; b != nil && b.Requests > 1 {
		add(func(c *Schedule) bool { c.Load.Burst.Requests = b.Requests * 3 / 4; return true })
	}
	// Plainer nodes.
	add(func(c *Schedule) bool {
		ch := false
		for i := range c.Nodes {
			if c.Nodes[i].Layout != "" {
				c.Nodes[i].Layout, ch = "", true
			}
		}
		return ch
	})
	for _, fld := range []func(n *Node) bool{
		func(n *Node) bool { ok := n.Reserve != 0; n.Reserve = 0; return ok },
		func(n *Node) bool { ok := n.LeaseTTL != 0; n.LeaseTTL = 0; return ok },
		func(n *Node) bool { ok := n.MaxLead != 0; n.MaxLead = 0; return ok },
	} {
		add(func(c *Schedule) bool {
			ch := false
			for i := range c.Nodes {
				ch = fld(&c.Nodes[i]) || ch
			}
			return ch
		})
	}
	// Rounder instants.
	for i, f := range s.Faults {
		for _, u := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond, time.Millisecond} {
			if r := f.At.Round(u); r != f.At && r < s.Duration {
				add(func(c *Schedule) bool { c.Faults[i].At = r; return true })
				break
			}
		}
	}
	return out
}

// dropNode removes node name and what only it was aimed at.
func dropNode(c *Schedule, name string) bool {
	c.Nodes = slices.DeleteFunc(c.Nodes, func(n Node) bool { return n.Name == name })
	leased := slices.ContainsFunc(c.Nodes, func(n Node) bool { return n.Lease != "" })
	var fs []Fault
	for _, f := range c.Faults {
		had := len(f.Nodes) > 0
		f.Nodes = slices.DeleteFunc(f.Nodes, func(n string) bool { return n == name })
		spec, _ := faults.Lookup(f.Kind)
		switch {
		case had && len(f.Nodes) == 0:
			continue
		case spec.Scope == faults.ScopeStore && !leased:
			continue
		}
		fs = append(fs, f)
	}
	c.Faults = fs
	return true
}

// reductions are the one-step reductions of fault f: each duration
// halved (towards zero, an optional one dropped), each rate halved, each
// option switched off.
func reductions(f faults.Fault) []faults.Fault {
	var out []faults.Fault
	spec, _ := faults.Lookup(f.Kind)
	for _, p := range spec.ParamsIn(faults.InScenario) {
		v := f.Param(p.Name)
		g := f
		switch x := v.(type) {
		case time.Duration:
			if x == 0 {
				continue
			}
			if !p.Required && !p.NonZero && p.Min == 0 {
				g2 := f
				setDur(&g2, p.Name, 0)
				out = append(out, g2)
			}
			h := roundSig(max(x, -x) / 2)
			if x < 0 {
				h = -h
			}
			if h == 0 || h == x || (p.Min > 0 && max(h, -h) < p.Min) {
				continue
			}
			setDur(&g, p.Name, h)
			if f.Kind == faults.KindSmear && p.Name == "window" && max(g.By, -g.By) > h {
				continue
			}
		case float64:
			if x == 0 {
				continue
			}
			h := float64(int64(x / 2))
			if max(h, -h) < 1 {
				continue
			}
			g.PPM = h
		case bool:
			if x == (faults.Fault{}.Param(p.Name)).(bool) {
				continue
			}
			switch p.Name {
			case "keep_checkpoint":
				g.WipeCheckpoint = false
			case "graceful":
				g.Graceful = false
			case "same_holder":
				g.SameHolder = false
			case "crash":
				g.Crash = false
			case "hang":
				g.Hang = false
			default:
				continue
			}
		case string:
			if x == "" {
				continue
			}
			switch p.Name {
			case "point":
				g.Point = ""
			case "direction":
				g.Direction = ""
			default:
				continue
			}
		default:
			continue
		}
		out = append(out, g)
	}
	return out
}

// setDur sets f's duration parameter name.
func setDur(f *faults.Fault, name string, d time.Duration) {
	switch name {
	case "by":
		f.By = d
	case "for":
		f.For = d
	case "window":
		f.Window = d
	case "offset_while_down":
		f.OffsetWhileDown = d
	case "behind":
		f.Behind = d
	case "gap":
		f.Gap = d
	}
}
