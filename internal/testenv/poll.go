package testenv

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ErrExited is what Poll returns when its exited channel closed before the
// condition held.
var ErrExited = errors.New("testenv: process exited")

// Poll calls cond at once and then every interval until it returns true
// (Poll returns nil), exited is closed (ErrExited; a nil channel never
// is), or ctx ends (ctx.Err()). It never sleeps past those events: it is
// how a test waits for readiness or a result without a fixed sleep.
func Poll(ctx context.Context, interval time.Duration, exited <-chan struct{}, cond func() bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// WaitFor polls cond every 10 ms until it holds, and fails t with the
// formatted message when timeout passes first (on the monotonic clock).
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Eventually(context.Background(), timeout, cond) {
		t.Fatalf("testenv: after %s: "+format, append([]any{timeout}, args...)...)
	}
}

// Eventually polls cond every 10 ms and reports whether it held before
// timeout passed or ctx ended.
func Eventually(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Poll(ctx, 10*time.Millisecond, nil, cond) == nil
}
