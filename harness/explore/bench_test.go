package explore

import (
	"context"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness"
)

// BenchmarkSchedule draws and runs one-second, two-node schedules at
// 10,000 IDs/s in all (5,000 requests per second per node, single calls,
// no burst), one to four faults of every kind, on one core: the figure
// docs/benchmarks.md reports as schedules per second per core, against
// the built-in suite's IDs per CPU-second.
func BenchmarkSchedule(b *testing.B) {
	sp := Space{Nodes: IntRange{2, 2}, Duration: DurRange{time.Second, time.Second}, Rate: FloatRange{5000, 5000},
		Batch: IntRange{1, 1}, Burst: -1}
	c, err := CapsOf("inprocess")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var ids, unknown uint64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s := Generate(Derive(1, i), sp, c, "inprocess", "bench")
		sc, err := s.Scenario("bench.yaml")
		if err != nil {
			b.Fatal(err)
		}
		res := harness.RunOne(ctx, sc, sc.Targets[0], harness.Options{})
		switch res.Verdict {
		case harness.Fail:
			b.Fatalf("schedule %d failed the safe generator:\n%s", i, s.YAML())
		case harness.Unknown:
			unknown++
		}
		ids += res.Figures.IDs
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "schedules/s")
	b.ReportMetric(float64(ids)/sec, "IDs/s")
	b.ReportMetric(float64(unknown)/float64(b.N), "unknown/schedule")
}
