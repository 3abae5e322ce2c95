package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// budgetSlack is how much real time an ID request gets beyond the
// generator's MaxWait before its context ends.
const budgetSlack = 250 * time.Millisecond

// idBudget is the deadline of one ID request and the cause its context
// ends with, for a generator with the wait bound maxWait.
type idBudget struct {
	d       time.Duration
	cause   error
	maxWait time.Duration
}

// newIDBudget returns the budget of an ID request: the request timeout,
// capped at the generator's wait bound plus budgetSlack. The generator
// bounds its waits on its own monotonic clock; the cap bounds them in real
// time too, for when that clock stands still (a paused fault clock). The
// cause wraps context.DeadlineExceeded.
func newIDBudget(requestTimeout, maxWait time.Duration) *idBudget {
	if capped := maxWait + budgetSlack; capped < requestTimeout {
		return &idBudget{capped, deadlineError(fmt.Sprintf("no ID within the generator's wait bound %v (+%v) of real time: its clock stood still", maxWait, budgetSlack)), maxWait}
	}
	return &idBudget{requestTimeout, deadlineError(fmt.Sprintf("request timeout %v", requestTimeout)), maxWait}
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

// budgetCtx is the context an ID request hands the generator: it ends at
// the budget's deadline with the budget's cause, but the timer that ends
// it is only created when something asks for Done or Err, which the
// generator does only when it has to wait. A request served at once (the
// common case) pays for no timer, where context.WithTimeout costs a timer
// start and stop per request, and allocates nothing: its context comes
// from a pool and goes back to it on release.
type budgetCtx struct {
	parent   context.Context
	deadline mono
	cause    error

	mu       sync.Mutex
	inner    context.Context // nil until Done, Err or a derived context asks
	cancel   context.CancelFunc
	released bool
}

// newBudgetCtx returns a context below parent ending at start + the
// budget's duration. Call release when the generator has returned; after
// that the context is not to be used (unless something asked for its Done
// or Err, it serves the next request).
func newBudgetCtx(parent context.Context, start mono, b *idBudget) *budgetCtx {
	c := budgetPool.Get().(*budgetCtx)
	c.parent, c.deadline, c.cause = parent, start.add(b.d), b.cause
	return c
}

// budgetPool recycles the contexts of requests that did not wait.
var budgetPool = sync.Pool{New: func() any { return new(budgetCtx) }}

// materialize returns the real context, creating it on first use (ended
// at once when the request is over).
func (c *budgetCtx) materialize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadlineCause(c.parent, c.deadline.time(), c.cause)
		if c.released {
			c.cancel()
		}
	}
	return c.inner
}

// release ends the context (stopping its timer, if any). A context that
// nothing asked for Done or Err (the common case: the generator did not
// wait) has handed out nothing that can outlive the call, so it goes back
// to the pool for the next request.
func (c *budgetCtx) release() {
	c.mu.Lock()
	c.released = true
	if c.cancel != nil {
		c.cancel()
		c.mu.Unlock()
		return
	}
	c.parent, c.cause, c.released = nil, nil, false
	c.mu.Unlock()
	budgetPool.Put(c)
}

// Deadline is the request's deadline.
func (c *budgetCtx) Deadline() (time.Time, bool) { return c.deadline.time(), true }

// Done is closed at the deadline, when the parent ends, or on release.
func (c *budgetCtx) Done() <-chan struct{} { return c.materialize().Done() }

// Err reports why Done is closed.
func (c *budgetCtx) Err() error { return c.materialize().Err() }

// Value looks key up in the real context once it exists (so
// context.Cause finds the budget's cause), else in the parent.
func (c *budgetCtx) Value(key any) any {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}
