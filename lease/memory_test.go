package lease_test

import (
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

var epoch = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func TestMemoryConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		TTL: 10 * time.Second,
		New: func(t *testing.T) leasetest.Backend {
			c := leasetest.NewClock(epoch)
			return leasetest.Backend{Registry: lease.NewMemory(c), Advance: c.Advance}
		},
	})
}
