package target

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// Host is the clock of a machine simulated in this process: a fault clock
// over the run's base clock, and the end of a VM pause in progress (a
// paused machine runs nothing). It is the ClockControl of the in-process
// targets, and of any target whose nodes run on a faults.Clock.
type Host struct {
	// Clock is the host's wall and monotonic clock, faults included.
	Clock *faults.Clock
	base  generator.Clock

	pausedUntil atomic.Int64 // base mono ns; 0: not paused
}

var _ ClockControl = (*Host)(nil)

// NewHost returns a host on base whose clock starts stepped by offset.
func NewHost(base generator.Clock, offset time.Duration) *Host {
	h := &Host{Clock: faults.New(base), base: base}
	h.Clock.Step(offset)
	return h
}

// Apply implements ClockControl.
func (h *Host) Apply(_ context.Context, f faults.Fault) error {
	if err := f.ApplyTo(h.Clock); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	_, mono := h.base.Now()
	if until, ok := f.PauseEnd(mono); ok {
		h.pausedUntil.Store(until)
	}
	return nil
}

// Offset implements ClockControl.
func (h *Host) Offset(context.Context) (time.Duration, error) { return h.Clock.Offset(), nil }

// PauseLeft returns how much of a VM pause in progress is left on the base
// clock, 0 when the host is not paused.
func (h *Host) PauseLeft() time.Duration {
	until := h.pausedUntil.Load()
	if until == 0 {
		return 0
	}
	if _, mono := h.base.Now(); mono < until {
		return time.Duration(until - mono)
	}
	return 0
}

// WaitPause sleeps on the base clock until a pause in progress ends, as a
// call on a paused guest would.
func (h *Host) WaitPause() {
	if d := h.PauseLeft(); d > 0 {
		h.base.Sleep(d)
	}
}
