package faults_test

import (
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// benchNow measures one Now call on c.
func benchNow(b *testing.B, c generator.Clock) {
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		w, m := c.Now()
		sink += w ^ m
	}
	_ = sink
}

// withFaults returns a fault clock over the system clock with a step, a
// running smear, slew and drift, and a scheduled leap: every offset term is
// evaluated on each read.
func withFaults() *faults.Clock {
	c := faults.New(generator.SystemClock())
	c.Step(-3 * time.Millisecond)
	c.Smear(-time.Second, 24*time.Hour)
	c.Slew(time.Second, 0)
	c.Drift(10)
	c.Leap(time.Now().Add(time.Hour))
	return c
}

func BenchmarkNow(b *testing.B) {
	b.Run("system", func(b *testing.B) { benchNow(b, generator.SystemClock()) })
	b.Run("nofaults", func(b *testing.B) { benchNow(b, faults.New(generator.SystemClock())) })
	b.Run("faults", func(b *testing.B) { benchNow(b, withFaults()) })
	b.Run("virtual", func(b *testing.B) { benchNow(b, faults.NewVirtual(time.Unix(0, 0), true)) })
	b.Run("virtual+faults", func(b *testing.B) {
		c := faults.New(faults.NewVirtual(time.Unix(0, 0), true))
		c.Smear(time.Second, time.Hour)
		c.Drift(10)
		benchNow(b, c)
	})
}

func BenchmarkNowParallel(b *testing.B) {
	run := func(b *testing.B, c generator.Clock) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Now()
			}
		})
	}
	b.Run("nofaults", func(b *testing.B) { run(b, faults.New(generator.SystemClock())) })
	b.Run("faults", func(b *testing.B) { run(b, withFaults()) })
}
