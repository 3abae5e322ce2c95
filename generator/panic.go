package generator

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// PanicError reports that a dependency of the generator (its Clock, Fence,
// Checkpointer or Observer) panicked during a call that held the
// generator's lock, had a checkpoint write in flight, or was reporting to
// the Observer. The generator recovered: the lock is released, no write is
// left marked in flight, and the next call runs normally. It wraps
// ErrPanic and, when the panic value is an error, that error too.
type PanicError struct {
	// Op names the dependency call, such as "Clock.Now" or
	// "Checkpointer.Save".
	Op string
	// Value is the value the dependency panicked with.
	Value any
	// Stack is the stack of the panicking goroutine where it was
	// recovered.
	Stack []byte
}

// Error returns e.g. "generator: dependency panicked: Clock.Now: overflow".
func (e *PanicError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrPanic, e.Op, e.Value)
}

// Unwrap returns ErrPanic and, when the panic value is an error, that
// error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}

// guard is deferred around a dependency call: it turns a panic into a
// *PanicError in *err.
func guard(op string, err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Op: op, Value: r, Stack: debug.Stack()}
	}
}

// withPanic adds a dependency's panic to a call's error, keeping the call's
// error first.
func withPanic(err, perr error) error {
	if err == nil {
		return perr
	}
	return fmt.Errorf("%w; %w", err, perr)
}

// The calls below are the generator's dependency calls off the fast path,
// each with its panic recovered; the fast path calls Clock.Now and
// Fence.Check directly, with nothing held (see Generator).

func clockNow(c Clock) (wall, mono int64, err error) {
	defer guard("Clock.Now", &err)
	wall, mono = c.Now()
	return wall, mono, nil
}

func clockSleep(c Clock, d time.Duration) (err error) {
	defer guard("Clock.Sleep", &err)
	c.Sleep(d)
	return nil
}

// fenceCheck returns nil, the fence's error wrapped in ErrFenced, or a
// *PanicError.
func fenceCheck(f Fence, mono int64) (err error) {
	defer guard("Fence.Check", &err)
	if err := f.Check(mono); err != nil {
		return fenceError(err)
	}
	return nil
}

// contextDone returns an error wrapping ErrWaitExceeded and the context's
// cause once ctx is done.
func contextDone(ctx context.Context) (err error) {
	defer guard("context", &err)
	if ctx.Done() != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrWaitExceeded, context.Cause(ctx))
	}
	return nil
}

func checkpointLoad(cp Checkpointer) (markMs int64, err error) {
	defer guard("Checkpointer.Load", &err)
	return cp.Load()
}

// save writes markMs with the Checkpointer and reports the write to the
// Observer. It returns Save's error, or a *PanicError if Save or the
// Observer panicked.
func (g *Generator) save(ctx context.Context, markMs int64) error {
	err := checkpointSave(ctx, g.cp, markMs)
	if g.obs != nil {
		if perr := observe("Observer.Checkpoint", func() { g.obs.Checkpoint(markMs, err) }); perr != nil {
			err = withPanic(err, perr)
		}
	}
	return err
}

func checkpointSave(ctx context.Context, cp Checkpointer, markMs int64) (err error) {
	defer guard("Checkpointer.Save", &err)
	return cp.Save(ctx, markMs)
}

// observe runs f, which calls the Observer.
func observe(op string, f func()) (err error) {
	defer guard(op, &err)
	f()
	return nil
}
