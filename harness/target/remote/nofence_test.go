package remote

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness/target"
)

// TestProcessNoFenceNeedsControlsBuild: fence: off on a normal build is a
// clear unsupported error naming the build tag, not a start failure.
func TestProcessNoFenceNeedsControlsBuild(t *testing.T) {
	p := &Process{Binary: bin, Dir: t.TempDir()}
	s := spec("a", 1)
	s.Lease, s.NoFence = "etcd://127.0.0.1:1", true // serve stops at its flags, before any connection
	_, err := p.Start(context.Background(), s, target.Env{Run: t.Name()})
	if !errors.Is(err, target.ErrUnsupported) || !strings.Contains(err.Error(), "-tags negativecontrols") {
		t.Fatalf("start with fence off on a normal build: %v", err)
	}
}
