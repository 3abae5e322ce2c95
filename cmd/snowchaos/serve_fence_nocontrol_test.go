//go:build !negativecontrols

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeHasNoFenceControl: a normal build refuses --lease-no-fence.
func TestServeHasNoFenceControl(t *testing.T) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"serve", "--lease", "memory", "--lease-no-fence"}, &out, &errb)
	if code != exitInvalid || !strings.Contains(errb.String(), "lease-no-fence") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the flag", code, errb.String())
	}
}
