package soak

import (
	"strings"
	"testing"
	"time"
)

// TestConfigBounds: every numeric setting out of its bounds is refused,
// naming it; the zero Config (with a binary) gets the documented defaults.
func TestConfigBounds(t *testing.T) {
	c := Config{Bin: "snowchaos"}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	if c.Duration != 10*time.Minute || c.RestartEvery != time.Minute || c.OutageAt != 270*time.Second || c.OutageFor != 20*time.Second ||
		c.Rate != 100 || c.Batch != 100 || c.Clients != 4 || c.Limits != DefaultLimits {
		t.Errorf("defaults %+v", c)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "no snowchaos binary"},
		{Config{Bin: "x", Duration: time.Second}, "duration 1s"},
		{Config{Bin: "x", Duration: 25 * time.Hour}, "duration 25h"},
		{Config{Bin: "x", RestartEvery: time.Second}, "restart interval"},
		{Config{Bin: "x", FaultEvery: time.Millisecond}, "fault interval"},
		{Config{Bin: "x", OutageAt: 9 * time.Minute, OutageFor: 2 * time.Minute}, "does not fit"},
		{Config{Bin: "x", Rate: 20000}, "rate 20000"},
		{Config{Bin: "x", Batch: 5000}, "batch 5000"},
		{Config{Bin: "x", Clients: 65}, "clients 65"},
		{Config{Bin: "x", LeaseTTL: time.Millisecond}, "lease TTL"},
	} {
		if err := tc.c.defaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %q", tc.c, err, tc.want)
		}
	}
}
