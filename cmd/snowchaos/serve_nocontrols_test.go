//go:build !negativecontrols

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeHasNoControlFlags: a normal build refuses the negative-control
// flags (they exist only with -tags negativecontrols).
func TestServeHasNoControlFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"serve", "--lease", "memory", "--lease-mark-at-renewal"}, &out, &errb)
	if code != exitInvalid || !strings.Contains(errb.String(), "lease-mark-at-renewal") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the flag", code, errb.String())
	}
}
