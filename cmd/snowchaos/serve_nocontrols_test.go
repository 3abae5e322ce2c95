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
	for _, flag := range []string{"lease-mark-at-renewal", "lease-no-fence"} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), []string{"serve", "--lease", "memory", "--" + flag}, &out, &errb)
		if code != exitInvalid || !strings.Contains(errb.String(), flag) {
			t.Fatalf("--%s: exit %d, stderr %q; want 2 naming the flag", flag, code, errb.String())
		}
	}
}
