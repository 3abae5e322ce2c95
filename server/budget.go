package server

import (
	"context"
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// budgetSlack is how much real time an ID request gets beyond the
// generator's MaxWait before its context ends.
const budgetSlack = 250 * time.Millisecond

// idBudget is the deadline of one ID request and the cause its context
// ends with.
type idBudget struct {
	d     time.Duration
	cause error
}

// newIDBudget returns the budget of an ID request: the request timeout,
// capped at the generator's wait bound plus budgetSlack. The generator
// bounds its waits on its own monotonic clock; the cap bounds them in real
// time too, for when that clock stands still (a paused fault clock). The
// cause wraps context.DeadlineExceeded.
func newIDBudget(requestTimeout, maxWait time.Duration) *idBudget {
	if capped := maxWait + budgetSlack; capped < requestTimeout {
		return &idBudget{capped, deadlineError(fmt.Sprintf("no ID within the generator's wait bound %v (+%v) of real time: its clock stood still", maxWait, budgetSlack))}
	}
	return &idBudget{requestTimeout, deadlineError(fmt.Sprintf("request timeout %v", requestTimeout))}
}

// deadlineError is a context cause that is context.DeadlineExceeded.
type deadlineError string

func (e deadlineError) Error() string        { return string(e) }
func (e deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// HoldError reports why a node whose fault clock is held (faults.Clock.Hold:
// kind and left) cannot go on issuing, or nil: a freeze or pause that ends
// within the generator's wait bound maxWait is waited out, a longer one
// stops the wall clock at one tick, whose sequence runs out, after which
// every call refuses.
func HoldError(kind faults.Kind, left, maxWait time.Duration) error {
	if kind == "" || (left >= 0 && left <= maxWait) {
		return nil
	}
	what := "wall clock frozen"
	if kind == faults.KindPause {
		what = "clock paused"
	}
	how := "until release"
	if left >= 0 {
		how = "for " + left.String() + " more"
	}
	return fmt.Errorf("%s %s (a %s fault), longer than the wait bound %v: no new tick can start, so the node issues at most the rest of the current tick",
		what, how, kind, maxWait)
}
