package leasetest

import (
	"context"
	"testing"

	"github.com/snowchaos/snowchaos/lease"
)

// StartKeeper makes a Keeper from cfg and starts it with a context
// cancelled at the end of the test, failing t on any error; it returns
// the Keeper and its first lease.
func StartKeeper(t *testing.T, cfg lease.KeeperConfig) (*lease.Keeper, lease.Lease) {
	t.Helper()
	k, err := lease.NewKeeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := k.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return k, l
}
