package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// clockCtl is a node's ClockControl: faults go to the host model, which
// publishes them to the process; the process's own clock reading (the
// time request) measures them, and the probe beside it explains what it
// cannot show.
type clockCtl struct{ n *node }

var (
	_ target.Bracketed = clockCtl{}
	_ target.Diagnoser = clockCtl{}
)

// Apply implements target.ClockControl.
func (c clockCtl) Apply(_ context.Context, f faults.Fault) error {
	h := c.n.host
	switch f.Kind {
	case faults.KindStep:
		return h.Step(f.By)
	case faults.KindFreeze:
		return h.Freeze(f.For)
	case faults.KindLeap:
		return h.Leap(f.At)
	case faults.KindSmear:
		return h.Smear(f.By, f.Window)
	case faults.KindSlew:
		return h.Slew(f.By, f.PPM)
	case faults.KindDrift:
		return h.Drift(f.PPM)
	case faults.KindRevert:
		return h.Revert()
	case faults.KindPause:
		return fmt.Errorf("%w: %w", target.ErrUnsupported, extclock.ErrPause)
	}
	return fmt.Errorf("%w: clock fault %q", target.ErrUnsupported, f.Kind)
}

// Offset implements target.ClockControl.
func (c clockCtl) Offset(ctx context.Context) (time.Duration, error) {
	off, _, err := c.OffsetWithin(ctx)
	return off, err
}

// readings is how many readings OffsetWithin takes at most, keeping the
// narrowest; readingBudget is how long it goes on taking more once it has
// one. A reading waits for the call in flight on the process's pipe, and
// the run's driver waits for the measurement: five readings behind calls
// that take tens of milliseconds each would hold the next fault past its
// instant.
const (
	readings      = 5
	readingBudget = 20 * time.Millisecond
)

// OffsetWithin implements target.Bracketed: the process's own clock
// reading against true time, the best of a few. It fails with
// ErrNotReached when the route's interposer is loaded in no process of
// the node, with ErrNoReading when the process answers no time request,
// and when a publish to the process failed.
func (c clockCtl) OffsetWithin(ctx context.Context) (time.Duration, time.Duration, error) {
	n := c.n
	if err := n.host.Err(); err != nil {
		if errors.Is(err, extclock.ErrLate) {
			return 0, 0, fmt.Errorf("%w: %v", target.ErrArtifact, err)
		}
		return 0, 0, fmt.Errorf("%w: publishing the host clock to the process failed: %v", target.ErrNotReached, err)
	}
	p, err := n.current()
	if err != nil {
		return 0, 0, err
	}
	if why := n.reachOf(p); why != "" {
		return 0, 0, fmt.Errorf("%w: %s", target.ErrNotReached, why)
	}
	if ok, why := n.ClockAnswer(); !ok {
		return 0, 0, fmt.Errorf("%w: %s", target.ErrNoReading, why)
	}
	best, bestHalf := time.Duration(0), time.Duration(-1)
	start := time.Now()
	for i := range readings {
		if i > 0 && time.Since(start) > readingBudget {
			break
		}
		r, err := n.reading(ctx, p, n.x.Timeout)
		if err != nil {
			return 0, 0, n.readingFailed(p, err)
		}
		off, half := r.offset()
		if bestHalf < 0 || half < bestHalf {
			best, bestHalf = off, half
		}
		if bestHalf <= r.res/2+100*time.Microsecond {
			break
		}
	}
	// A freeze is held a little ahead of the model (extclock.State.Hold):
	// the reading lies within that much more of it.
	return best, bestHalf + n.host.Lead(), nil
}

// readingFailed turns a failed clock reading during the run into the
// call's error: the process answered one at its first start, so a hang
// puts it out of step (it goes) and a non-reading is a protocol violation.
func (n *node) readingFailed(p *proc, err error) error {
	switch {
	case errors.Is(err, ErrHung):
		return n.hung(p, err)
	case errors.Is(err, ErrNotReading):
		return n.violate(p, fmt.Sprintf("the answer to %s is not a clock reading: %v", n.timeAsk(), err))
	}
	return err
}

// reachOf says whether the route's interposer is loaded in a process of
// p's group ("" when it is; see reach).
func (n *node) reachOf(p *proc) string {
	if p.reached.Load() {
		return ""
	}
	var why string
	switch n.x.Clock {
	case scenario.ClockFaketime:
		why = reach(groupMembers(p.pid()), "libfaketime", routeFaketime)
	case scenario.ClockGo:
		why = reach(groupMembers(p.pid()), n.page.Path, routeGo)
	}
	if why == "" {
		p.reached.Store(true)
	}
	return why
}

// Diagnose implements target.Diagnoser: what the clock probe beside the
// process (under the same interposer and model) reads.
func (c clockCtl) Diagnose(ctx context.Context) string {
	n := c.n
	if n.probe == nil {
		return "no probe beside the process"
	}
	got, err := n.probe.Agrees(ctx, n.host, OffsetTolerance)
	if err != nil {
		return "the probe beside the process: " + err.Error()
	}
	s := fmt.Sprintf("the probe beside the process (%s) reads offset %s as the model does", n.probeName(), scenario.FormatDuration(got))
	if n.x.Clock == scenario.ClockFaketime {
		s += ": libfaketime works here, so a process it does not reach reads its clock without the C library (as bash's $EPOCHREALTIME does); read the clock through the library (date +%s%N, a language runtime's clock)"
	}
	return s
}

// probeName names the probe's program.
func (n *node) probeName() string {
	if n.x.Clock == scenario.ClockGo {
		return "a Go program with the same overlay and page"
	}
	return "perl under the same libfaketime"
}
