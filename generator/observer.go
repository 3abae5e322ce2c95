package generator

import (
	"context"
	"time"
)

// Outcome is what a rewind policy did about a clock that moved backwards.
type Outcome uint8

// Outcomes of a detected rewind.
const (
	// OutcomeWaited means the call slept until the clock passed the last
	// issued tick.
	OutcomeWaited Outcome = iota
	// OutcomeLogical means the call kept issuing from the last tick (the
	// embedded time runs ahead of the wall clock).
	OutcomeLogical
	// OutcomeRefused means the call returned an error instead of an ID.
	OutcomeRefused
)

// String returns "waited", "logical" or "refused".
func (o Outcome) String() string {
	switch o {
	case OutcomeWaited:
		return "waited"
	case OutcomeLogical:
		return "logical"
	case OutcomeRefused:
		return "refused"
	}
	return "unknown"
}

// WaitReason says why a call slept.
type WaitReason uint8

// Reasons for a wait.
const (
	// WaitRewind is a wait for the clock to pass the last issued tick after
	// it moved backwards (or before the start fence has passed).
	WaitRewind WaitReason = iota
	// WaitExhausted is a wait for the next tick after the sequence ran out.
	WaitExhausted
)

// String returns "rewind" or "sequence_exhausted".
func (r WaitReason) String() string {
	switch r {
	case WaitRewind:
		return "rewind"
	case WaitExhausted:
		return "sequence_exhausted"
	}
	return "unknown"
}

// RewindEvent describes one detected backwards step of the wall clock
// relative to the last issued tick.
type RewindEvent struct {
	// By is how far the clock stood behind the last issued tick.
	By time.Duration
	// Policy is the generator's rewind policy.
	Policy Policy
	// Outcome is what the policy did.
	Outcome Outcome
	// Start is true when the rewind was against the start fence (a stored
	// high-water mark or a lease's last issued time) rather than against an
	// ID this generator issued.
	Start bool
}

// Observer receives the generator's rare events. Every method is called
// outside the fast path only: an issued ID that meets no rewind, wait or
// refusal costs one nil check. Methods may be called concurrently and must
// not call back into the generator. ctx is the context of the call that
// met the event (context.Background for Next and NextN).
type Observer interface {
	// Rewind is called once per call that finds the clock behind the last
	// issued tick.
	Rewind(ctx context.Context, e RewindEvent)
	// Wait is called after a call slept, with the reason and how long it
	// slept on the monotonic clock. start is the monotonic reading (ns)
	// at which the wait began.
	Wait(ctx context.Context, reason WaitReason, start int64, d time.Duration)
	// Exhausted is called when a call used up the sequence of a tick.
	Exhausted(ctx context.Context)
	// Refused is called when a call returns an error instead of an ID.
	Refused(ctx context.Context, err error)
	// Lead is called when the logical clock's lead over the wall clock
	// changes (zero when it falls back in step).
	Lead(d time.Duration)
	// Checkpoint is called after the generator persisted a new reserved
	// high-water mark (Unix ms), with the error if the write failed.
	Checkpoint(markMs int64, err error)
}
