package verify

import (
	"runtime"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

// benchBaseTick is a realistic tick: about 1.5 years after the epoch.
const benchBaseTick = 47_000_000_000

// sparseStream is one ID per tick per node, nodes interleaved: the worst
// case for per-node locality.
func sparseStream(nodes, ticks int) []generator.ID {
	l := generator.DefaultLayout()
	out := make([]generator.ID, 0, nodes*ticks)
	for t := range ticks {
		for n := range nodes {
			id, _ := l.Compose(benchBaseTick+int64(t), int64(n), 0)
			out = append(out, id)
		}
	}
	return out
}

// saturatedStream is every sequence number of every tick (4096 per ms
// per node), the nodes interleaved ID by ID.
func saturatedStream(nodes, ticks int) []generator.ID {
	l := generator.DefaultLayout()
	out := make([]generator.ID, 0, nodes*ticks*4096)
	for t := range ticks {
		for s := range 4096 {
			for n := range nodes {
				id, _ := l.Compose(benchBaseTick+int64(t), int64(n), int64(s))
				out = append(out, id)
			}
		}
	}
	return out
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func reportPerID(b *testing.B, ids int, setBytes, heapBytes uint64) {
	total := float64(ids) * float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/ID")
	b.ReportMetric(total/b.Elapsed().Seconds(), "IDs/s")
	if setBytes > 0 {
		b.ReportMetric(float64(setBytes)/float64(ids), "bytes/ID")
	}
	b.ReportMetric(float64(heapBytes)/float64(ids), "heap-bytes/ID")
}

func benchSet(b *testing.B, ids []generator.ID) {
	var setBytes, heapBytes uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h0 := heapInUse()
		b.StartTimer()
		s := NewSet(generator.DefaultLayout())
		for _, id := range ids {
			if !s.Add(id) {
				b.Fatalf("false duplicate %d", id)
			}
		}
		b.StopTimer()
		heapBytes = heapInUse() - h0
		setBytes = s.Bytes()
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	reportPerID(b, len(ids), setBytes, heapBytes)
}

func benchMap(b *testing.B, ids []generator.ID) {
	var heapBytes uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h0 := heapInUse()
		b.StartTimer()
		m := make(map[uint64]struct{})
		for _, id := range ids {
			if _, dup := m[uint64(id)]; dup {
				b.Fatalf("false duplicate %d", id)
			}
			m[uint64(id)] = struct{}{}
		}
		b.StopTimer()
		heapBytes = heapInUse() - h0
		runtime.KeepAlive(m)
		b.StartTimer()
	}
	reportPerID(b, len(ids), 0, heapBytes)
}

// BenchmarkDuplicates compares the Set with a plain map on identical
// streams: 1,024 nodes each issuing one ID per ms (sparse), and 4 nodes
// each issuing 4,096 IDs per ms (saturated). bytes/ID is Set.Bytes;
// heap-bytes/ID is the live heap the structure holds (runtime.MemStats).
func BenchmarkDuplicates(b *testing.B) {
	sparse := sparseStream(1024, 4096)
	saturated := saturatedStream(4, 256)
	b.Run("sparse/set", func(b *testing.B) { benchSet(b, sparse) })
	b.Run("sparse/map", func(b *testing.B) { benchMap(b, sparse) })
	b.Run("saturated/set", func(b *testing.B) { benchSet(b, saturated) })
	b.Run("saturated/map", func(b *testing.B) { benchMap(b, saturated) })
}
