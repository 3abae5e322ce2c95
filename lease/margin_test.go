package lease_test

import (
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
)

// TestKeeperNoMargin: negative MarginRate and MarginAbs (a negative
// control's setting) keep the fence open for the lease's whole TTL by the
// node's clock, up to the store's own expiry when the clocks agree; the
// default keeps the margin; DefaultCallTimeout is the keeper's default.
func TestKeeperNoMargin(t *testing.T) {
	r := newRig(t, func(c *lease.KeeperConfig) { c.MaxFailures = 1000; c.MarginRate, c.MarginAbs = -1, -1 })
	l := r.acquire()
	if cfg := r.k.Config(); cfg.MarginRate != 0 || cfg.MarginAbs != 0 || cfg.CallTimeout != lease.DefaultCallTimeout(ttl) {
		t.Fatalf("config %+v", cfg)
	}
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl - 1)
	r.tick()
	if err := r.check(); err != nil {
		t.Fatalf("fence without margin closed before the TTL: %v", err)
	}
	r.clock.Advance(1)
	wantReason(t, r.check(), lease.ReasonMarginReached)
	if wall, _ := r.clock.Now(); time.Unix(0, wall).Before(l.LeasedUntil) {
		t.Fatalf("fence without margin closed at %v, before the store's expiry %v", time.Unix(0, wall), l.LeasedUntil)
	}
	if got := lease.DefaultCallTimeout(6 * time.Second); got != time.Second {
		t.Fatalf("DefaultCallTimeout(6s) = %v", got)
	}
	if _, err := lease.NewKeeper(lease.KeeperConfig{Registry: r.mem, MarginRate: 0.5}); err == nil {
		t.Fatal("margin rate 0.5 accepted")
	}
}
