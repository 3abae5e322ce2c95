package generator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Policy is what a generator does when it finds the wall clock behind the
// last tick it issued.
type Policy uint8

// Rewind policies. The zero value is PolicyWait.
const (
	// PolicyWait sleeps until the clock passes the last issued tick,
	// bounded by the call's deadline (Settings.MaxWait); beyond it the call
	// fails with a *RewindError wrapping ErrWaitExceeded. Costs latency.
	PolicyWait Policy = iota
	// PolicyRefuse fails at once with a *RewindError wrapping
	// ErrClockBackwards; Ready reports the generator unready until the clock
	// has caught up. Costs availability.
	PolicyRefuse
	// PolicyLogical keeps issuing from max(last, now), carrying into the
	// next tick on sequence overflow, and refuses (ErrLeadExceeded) when the
	// embedded time would run more than Settings.MaxLead ahead of the wall
	// clock. Costs embedded-time accuracy, boundedly.
	PolicyLogical
)

// String returns "wait", "refuse" or "logical".
func (p Policy) String() string {
	switch p {
	case PolicyWait:
		return "wait"
	case PolicyRefuse:
		return "refuse"
	case PolicyLogical:
		return "logical"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy parses "wait", "refuse" or "logical".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "wait":
		return PolicyWait, nil
	case "refuse":
		return PolicyRefuse, nil
	case "logical":
		return PolicyLogical, nil
	}
	return 0, fmt.Errorf("%w: %q (want wait, refuse or logical)", ErrInvalidPolicy, s)
}

// Exported sentinel errors. Callers branch on them with errors.Is; their
// text never changes once published.
var (
	// ErrClockBackwards: the wall clock stood behind the last issued tick
	// and the policy refused.
	ErrClockBackwards = errors.New("generator: clock moved backwards")
	// ErrWaitExceeded: the call would have had to wait past its deadline
	// (for a rewind, the start fence, or the next tick after the sequence
	// ran out).
	ErrWaitExceeded = errors.New("generator: wait deadline exceeded")
	// ErrLeadExceeded: the logical clock would run further ahead of the wall
	// clock than Settings.MaxLead allows.
	ErrLeadExceeded = errors.New("generator: logical clock lead bound exceeded")
	// ErrLifetime: the time field overflowed; the layout's lifetime is over.
	ErrLifetime = errors.New("generator: time field overflowed: lifetime reached")
	// ErrBeforeEpoch: the clock reads earlier than the layout's epoch.
	ErrBeforeEpoch = errors.New("generator: clock before epoch")
	// ErrFenced: the generator's fence (for example a worker-ID lease) is
	// closed.
	ErrFenced = errors.New("generator: fenced")
	// ErrCheckpoint: persisting the high-water mark failed, so no ID past
	// the old mark can be issued.
	ErrCheckpoint = errors.New("generator: checkpoint failed")
	// ErrClosed: the generator was closed.
	ErrClosed = errors.New("generator: closed")
	// ErrPanic: a dependency (Clock, Fence, Checkpointer or Observer)
	// panicked during a call; the error is a *PanicError carrying the
	// panic value. The generator released its lock, and the next call runs
	// normally.
	ErrPanic = errors.New("generator: dependency panicked")
	// ErrInvalidLayout: a layout field is out of range.
	ErrInvalidLayout = errors.New("generator: invalid layout")
	// ErrNodeRange: the node (worker) ID does not fit the layout.
	ErrNodeRange = errors.New("generator: node ID out of range")
	// ErrInvalidID: a string or number is not a valid ID.
	ErrInvalidID = errors.New("generator: invalid ID")
	// ErrInvalidPolicy: an unknown policy name.
	ErrInvalidPolicy = errors.New("generator: invalid policy")
	// ErrInvalidSettings: a Settings field is out of range.
	ErrInvalidSettings = errors.New("generator: invalid settings")
)

// RewindError reports a call that failed because the clock stood behind
// the last issued tick (or the start fence). It wraps ErrClockBackwards,
// ErrWaitExceeded or ErrLeadExceeded.
type RewindError struct {
	// By is how far the clock stood behind.
	By time.Duration
	// Policy is the generator's policy.
	Policy Policy
	// Err is the sentinel.
	Err error
}

// Error returns e.g. "generator: clock moved backwards by 150ms (policy refuse)".
func (e *RewindError) Error() string {
	return fmt.Sprintf("%v by %v (policy %v)", e.Err, e.By, e.Policy)
}

// Unwrap returns the sentinel.
func (e *RewindError) Unwrap() error { return e.Err }

// Checkpointer persists the generator's reserved high-water mark, so that a
// restarted generator (or the next holder of a worker ID) never issues an
// ID at or below a tick an earlier incarnation may have used. Marks are
// wall-clock Unix milliseconds: a generator issues no ID in a tick after
// the one containing its last saved mark, and a new generator issues only
// in ticks after the one containing the loaded mark. Save is called about
// once per Settings.Reserve/2 while issuing, off the fast path.
type Checkpointer interface {
	// Load returns the stored mark, or 0 when none is stored.
	Load() (markMs int64, err error)
	// Save durably stores mark before returning (a file is fsynced, a
	// lease store has answered). It returns by ctx's deadline at the
	// latest: the generator passes a context bounded by what is left of
	// the calling request's MaxWait (Close: a MaxWait of its own), and an
	// error makes the generator refuse to issue past the previous mark. A
	// write Save gave up on may still land later; it holds a mark at or
	// above every ID issued, so that is safe.
	Save(ctx context.Context, markMs int64) error
}

// Fence gates issuing: the generator issues only while Check returns nil
// for the monotonic reading (ns) of the call. A worker-ID lease is a fence.
// Check is called once per Next or NextN call (and again after each sleep
// of a call that waits), so it must be cheap, unless the fence's word
// vouches for the call's reading (FenceWord); a non-nil error fails the
// call with an error wrapping ErrFenced and the fence's error.
type Fence interface {
	Check(mono int64) error
}

// FenceWord is what a Fence may also implement to spare the fast path a
// call to Check: OpenUntil returns a word, a monotonic reading (ns), such
// that Check(mono) is nil for every mono below the word's value, for as
// long as a generator built with the fence lives; the fence lowers the
// word (math.MinInt64: closed) before Check starts to refuse readings
// below it. A call whose reading is below the word is issued without
// calling Check; at or above it, Check decides (and says why it refuses).
// A nil word means none: Check on every call.
type FenceWord interface {
	OpenUntil() *atomic.Int64
}
