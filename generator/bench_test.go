package generator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks. The physical limit of a layout is 2^SeqBits IDs per tick per
// node: 4096 per ms for 41/10/12, a ceiling of 244.14 ns per ID on a real
// clock. The counter clocks below never make the generator wait for the
// clock, so they measure the pure per-call cost; a bare mutex generator on
// the same clock in the same run is the reference.

// ceilingNs is the real-clock ceiling of the default layout, ns per ID.
const ceilingNs = float64(time.Millisecond) / 4096

// counterClock is a single-goroutine bench clock: the wall clock moves one
// tick every perTick readings, and Sleep moves it forward by d at once.
// Not safe for concurrent use.
type counterClock struct {
	n      int64
	shift  uint // one tick every 1<<shift readings
	tickNs int64
	base   int64
}

func newCounterClock(shift uint) *counterClock {
	return &counterClock{shift: shift, tickNs: int64(time.Millisecond), base: DefaultEpoch.Add(time.Hour).UnixNano()}
}

func (c *counterClock) Now() (int64, int64) {
	c.n++
	w := c.n >> c.shift * c.tickNs
	return c.base + w, w
}

func (c *counterClock) Sleep(d time.Duration) {
	c.n += (int64(d) + c.tickNs - 1) / c.tickNs << c.shift
}

// atomicCounterClock is counterClock safe for concurrent use.
type atomicCounterClock struct {
	n      atomic.Int64
	shift  uint
	tickNs int64
	base   int64
}

func newAtomicCounterClock(shift uint) *atomicCounterClock {
	return &atomicCounterClock{shift: shift, tickNs: int64(time.Millisecond), base: DefaultEpoch.Add(time.Hour).UnixNano()}
}

func (c *atomicCounterClock) Now() (int64, int64) {
	w := c.n.Add(1) >> c.shift * c.tickNs
	return c.base + w, w
}

func (c *atomicCounterClock) Sleep(d time.Duration) {
	c.n.Add((int64(d) + c.tickNs - 1) / c.tickNs << c.shift)
}

// bareGen is the reference: the textbook mutex Snowflake generator with no
// safety features (no rewind policy, no deadline, no checkpoint, no fence,
// no stats), on the default layout.
type bareGen struct {
	mu      sync.Mutex
	clock   Clock
	epochNs int64
	last    int64
	seq     int64
	node    int64
}

func newBareGen(c Clock) *bareGen {
	return &bareGen{clock: c, epochNs: DefaultEpoch.UnixNano(), last: -1, node: 5}
}

func (b *bareGen) Next() ID {
	b.mu.Lock()
	wall, _ := b.clock.Now()
	t := (wall - b.epochNs) / int64(time.Millisecond)
	if t > b.last {
		b.last, b.seq = t, 0
	} else {
		b.seq++
		if b.seq > 4095 {
			for t <= b.last {
				b.clock.Sleep(time.Duration(b.epochNs + (b.last+1)*int64(time.Millisecond) - wall))
				wall, _ = b.clock.Now()
				t = (wall - b.epochNs) / int64(time.Millisecond)
			}
			b.last, b.seq = t, 0
		}
	}
	id := ID(b.last<<22 | b.node<<12 | b.seq)
	b.mu.Unlock()
	return id
}

// memCheckpoint is an in-memory Checkpointer.
type memCheckpoint struct {
	mu    sync.Mutex
	mark  int64
	saves int
	err   error
	hook  func(markMs int64)
}

func (m *memCheckpoint) Load() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mark, nil
}

func (m *memCheckpoint) Save(_ context.Context, markMs int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.hook != nil {
		m.hook(markMs)
	}
	m.mark = markMs
	m.saves++
	return nil
}

func (m *memCheckpoint) Mark() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mark
}

// openFence is a Fence that is always open.
type openFence struct{}

func (openFence) Check(int64) error { return nil }

// benchGen returns a generator with every safety feature on: wait policy,
// checkpoint, fence, observer.
func benchGen(b *testing.B, c Clock) *Generator {
	b.Helper()
	g, err := New(Settings{Node: 5, Clock: c, Checkpoint: &memCheckpoint{}, Fence: openFence{}, Observer: nopObserver{}, MaxWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func reportPerID(b *testing.B, ids int) {
	nsPerID := float64(b.Elapsed().Nanoseconds()) / float64(ids)
	b.ReportMetric(nsPerID, "ns/ID")
}

// BenchmarkNextRealClock is Next on the system clock, capped by the
// sequence; pct_of_ceiling is the achieved rate over 4096 IDs per ms.
func BenchmarkNextRealClock(b *testing.B) {
	g := benchGen(b, SystemClock())
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	reportPerID(b, b.N)
	b.ReportMetric(100*ceilingNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "pct_of_ceiling")
}

// BenchmarkNextRealClockParallel is BenchmarkNextRealClock from
// GOMAXPROCS goroutines sharing one generator.
func BenchmarkNextRealClockParallel(b *testing.B) {
	g := benchGen(b, SystemClock())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportPerID(b, b.N)
	b.ReportMetric(100*ceilingNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "pct_of_ceiling")
}

// BenchmarkBareMutexRealClock is the reference generator on the system
// clock.
func BenchmarkBareMutexRealClock(b *testing.B) {
	g := newBareGen(SystemClock())
	for b.Loop() {
		g.Next()
	}
	reportPerID(b, b.N)
	b.ReportMetric(100*ceilingNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "pct_of_ceiling")
}

// BenchmarkNext is the pure per-call cost with every safety feature on: a
// counter clock moving one tick every 4096 (1<<12) readings never exhausts.
func BenchmarkNext(b *testing.B) {
	g := benchGen(b, newCounterClock(12))
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	reportPerID(b, b.N)
}

// BenchmarkNextMinimal is Next with no checkpoint, fence or observer.
func BenchmarkNextMinimal(b *testing.B) {
	g, err := New(Settings{Node: 5, Clock: newCounterClock(12)})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	reportPerID(b, b.N)
}

// BenchmarkBareMutex is the reference on the same counter clock.
func BenchmarkBareMutex(b *testing.B) {
	g := newBareGen(newCounterClock(12))
	for b.Loop() {
		g.Next()
	}
	reportPerID(b, b.N)
}

// BenchmarkNextParallel is BenchmarkNext from GOMAXPROCS goroutines.
func BenchmarkNextParallel(b *testing.B) {
	g := benchGen(b, newAtomicCounterClock(12))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportPerID(b, b.N)
}

// BenchmarkBareMutexParallel is the reference from GOMAXPROCS goroutines.
func BenchmarkBareMutexParallel(b *testing.B) {
	g := newBareGen(newAtomicCounterClock(12))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g.Next()
		}
	})
	reportPerID(b, b.N)
}

// BenchmarkNextN4096 is NextN filling 4096 IDs per call (one tick's worth);
// ns/ID is the cost per ID.
func BenchmarkNextN4096(b *testing.B) {
	g := benchGen(b, newCounterClock(0))
	dst := make([]ID, 4096)
	for b.Loop() {
		if n, err := g.NextN(dst); err != nil || n != len(dst) {
			b.Fatal(n, err)
		}
	}
	reportPerID(b, b.N*len(dst))
}

// BenchmarkNextN4096Parallel is BenchmarkNextN4096 from GOMAXPROCS
// goroutines.
func BenchmarkNextN4096Parallel(b *testing.B) {
	g := benchGen(b, newAtomicCounterClock(0))
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]ID, 4096)
		for pb.Next() {
			if n, err := g.NextN(dst); err != nil || n != len(dst) {
				b.Error(n, err)
				return
			}
		}
	})
	reportPerID(b, b.N*4096)
}

// BenchmarkNextNRealClock is NextN(4096) on the system clock: each batch
// needs a whole millisecond of sequence, so it runs at the ceiling.
func BenchmarkNextNRealClock(b *testing.B) {
	g := benchGen(b, SystemClock())
	dst := make([]ID, 4096)
	for b.Loop() {
		if n, err := g.NextN(dst); err != nil || n != len(dst) {
			b.Fatal(n, err)
		}
	}
	reportPerID(b, b.N*len(dst))
	b.ReportMetric(100*ceilingNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst))), "pct_of_ceiling")
}

// BenchmarkStats is the cost of a Stats snapshot (atomic loads only).
func BenchmarkStats(b *testing.B) {
	g := benchGen(b, newCounterClock(12))
	for b.Loop() {
		_ = g.Stats()
	}
}

// BenchmarkBareMutexRealClockParallel is the reference on the system clock
// from GOMAXPROCS goroutines.
func BenchmarkBareMutexRealClockParallel(b *testing.B) {
	g := newBareGen(SystemClock())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g.Next()
		}
	})
	reportPerID(b, b.N)
	b.ReportMetric(100*ceilingNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "pct_of_ceiling")
}
