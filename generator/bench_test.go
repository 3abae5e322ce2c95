package generator

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/yieldclock"
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

// openFence is a Fence that is always open, with a word (FenceWord) as the
// lease Keeper has while its lease is valid.
type openFence struct{}

func (openFence) Check(int64) error { return nil }

func (openFence) OpenUntil() *atomic.Int64 { return wordOpen }

// benchGen returns a generator with every safety feature on: wait policy,
// checkpoint, fence (with a word, as the lease Keeper's), observer.
func benchGen(b *testing.B, c Clock) *Generator {
	b.Helper()
	g, err := New(Settings{Node: 5, Clock: c, Checkpoint: &memCheckpoint{}, Fence: openFence{}, Observer: nopObserver{}, MaxWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// NextN is the reference batch: under the lock, one clock reading per
// tick, the rest of the tick's sequence filled in a loop, sleeping under
// the lock for the next tick when the batch needs more.
func (b *bareGen) NextN(dst []ID) {
	b.mu.Lock()
	for n := 0; n < len(dst); {
		wall, _ := b.clock.Now()
		t := (wall - b.epochNs) / int64(time.Millisecond)
		if t > b.last {
			b.last, b.seq = t, -1
		} else if b.seq >= 4095 {
			b.clock.Sleep(time.Duration(b.epochNs + (b.last+1)*int64(time.Millisecond) - wall))
			continue
		}
		for ; n < len(dst) && b.seq < 4095; n++ {
			b.seq++
			dst[n] = ID(b.last<<22 | b.node<<12 | b.seq)
		}
	}
	b.mu.Unlock()
}

// yieldClock is the system clock with the sleep it replaced
// (yieldclock.Sleep): the same-run reference for the CPU a wait costs.
type yieldClock struct{ systemClock }

func (yieldClock) Sleep(d time.Duration) { yieldclock.Sleep(d) }

// side is one side of a paired benchmark: run does n operations (Next
// calls or batches), shared by procs goroutines.
type side struct {
	run   func(n int)
	procs int
	// prime, if set, runs untimed before each round.
	prime func()
	// Totals over the timed rounds: wall time and process CPU.
	elapsed, cpu time.Duration
	cpuOK        bool
}

// round runs n operations and returns the wall time it took.
func (s *side) round(n int) time.Duration {
	if s.prime != nil {
		s.prime()
	}
	cpu0, ok0 := processCPU()
	start := time.Now()
	share := func(p int) int {
		if p < n%s.procs {
			return n/s.procs + 1
		}
		return n / s.procs
	}
	var wg sync.WaitGroup
	for p := 1; p < s.procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(share(p))
		}()
	}
	s.run(share(0))
	wg.Wait()
	d := time.Since(start)
	cpu1, ok1 := processCPU()
	s.elapsed += d
	s.cpu += cpu1 - cpu0
	s.cpuOK = ok0 && ok1
	return d
}

// pair runs a benchmark's subject and its reference alternately in rounds
// (ABBA order) of about round each, b.N operations per side in all. Only
// the subject's rounds are timed, so ns/op is the subject's. It reports
// ns/ID for both sides and, as ratio, the median of the per-round ratios
// subject/reference: two rounds next to each other saw about the same
// machine, and the median drops the rounds a busy host interrupted, so
// the ratio holds up where absolute figures do not.
func pair(b *testing.B, idsPerOp int, round time.Duration, ratio string, sub, ref *side) {
	var ratios []float64
	b.StopTimer()
	b.ResetTimer()
	size := 1
	for i, left := 0, b.N; left > 0; i++ {
		n := min(left, size)
		left -= n
		var ds, dr time.Duration
		if i%4 == 0 || i%4 == 3 {
			b.StartTimer()
			ds = sub.round(n)
			b.StopTimer()
			dr = ref.round(n)
		} else {
			dr = ref.round(n)
			b.StartTimer()
			ds = sub.round(n)
			b.StopTimer()
		}
		if ds < round {
			size *= 2 // still sizing the rounds
		}
		if ds >= round/2 || left == 0 && ratios == nil {
			ratios = append(ratios, float64(ds)/float64(max(dr, 1)))
		}
	}
	slices.Sort(ratios)
	ids := float64(b.N) * float64(idsPerOp)
	b.ReportMetric(float64(sub.elapsed.Nanoseconds())/ids, "ns/ID")
	b.ReportMetric(float64(ref.elapsed.Nanoseconds())/ids, "ref-ns/ID")
	b.ReportMetric(ratios[len(ratios)/2], ratio)
}

// Round lengths: a counter clock round is short (about 20,000 calls), so
// few are cut by the host's scheduler; a real-clock round spans many
// ticks.
const (
	counterRound = 200 * time.Microsecond
	realRound    = 20 * time.Millisecond
)

// nextSide is Next on g from procs goroutines.
//
//go:noinline
func nextSide(b *testing.B, g *Generator, procs int) *side {
	return &side{procs: procs, run: func(n int) {
		for range n {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	}}
}

// bareSide is the bare mutex generator's Next from procs goroutines.
//
//go:noinline
func bareSide(m *bareGen, procs int) *side {
	return &side{procs: procs, run: func(n int) {
		for range n {
			m.Next()
		}
	}}
}

// batchSide is NextN filling 4096 IDs per call on g from procs goroutines.
func batchSide(b *testing.B, g *Generator, procs int) *side {
	return &side{procs: procs, run: func(n int) {
		dst := make([]ID, 4096)
		for range n {
			if got, err := g.NextN(dst); err != nil || got != len(dst) {
				b.Error(got, err)
				return
			}
		}
	}}
}

// bareBatchSide is the bare mutex generator's NextN(4096) from procs
// goroutines.
func bareBatchSide(m *bareGen, procs int) *side {
	return &side{procs: procs, run: func(n int) {
		dst := make([]ID, 4096)
		for range n {
			m.NextN(dst)
		}
	}}
}

// primeTick returns a prime function for a real-clock side: it issues
// single IDs until one lands in a new tick, so the timed round starts in
// the steady state (the sequence of the current tick used up) rather than
// with a fresh tick's worth of IDs available at once, which would make
// short rounds look faster than the ceiling.
func primeTick(next func() ID) func() {
	return func() {
		first := tickOf(next())
		for tickOf(next()) == first {
		}
	}
}

// reportCeiling reports the subject's rate against the layout's real-clock
// ceiling (x-ceiling: 1.00 is 4,096 IDs per ms; above 1 is slower) and the
// process CPU it used per wall second (cpu-frac; 1 is one core busy).
func reportCeiling(b *testing.B, sub *side, idsPerOp int) {
	nsPerID := float64(sub.elapsed.Nanoseconds()) / (float64(b.N) * float64(idsPerOp))
	b.ReportMetric(nsPerID/ceilingNs, "x-ceiling")
	if sub.cpuOK {
		b.ReportMetric(float64(sub.cpu)/float64(sub.elapsed), "cpu-frac")
	}
}

// BenchmarkNext is the per-call cost with every safety feature on (wait
// policy, checkpoint, fence, observer), on a counter clock that moves one
// tick every 4096 readings and so never exhausts the sequence; x-mutex is
// the ratio to the bare mutex generator on the same clock.
func BenchmarkNext(b *testing.B) {
	g, m := benchGen(b, newCounterClock(12)), newBareGen(newCounterClock(12))
	pair(b, 1, counterRound, "x-mutex", nextSide(b, g, 1), bareSide(m, 1))
}

// BenchmarkNextFenceCheck is BenchmarkNext with a fence that has no word,
// so that Check is called on every Next.
func BenchmarkNextFenceCheck(b *testing.B) {
	g, err := New(Settings{Node: 5, Clock: newCounterClock(12), Checkpoint: &memCheckpoint{}, Fence: fenceFunc(func(int64) error { return nil }), Observer: nopObserver{}, MaxWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	m := newBareGen(newCounterClock(12))
	pair(b, 1, counterRound, "x-mutex", nextSide(b, g, 1), bareSide(m, 1))
}

// BenchmarkNextMinimal is BenchmarkNext with no checkpoint, fence or
// observer.
func BenchmarkNextMinimal(b *testing.B) {
	g, err := New(Settings{Node: 5, Clock: newCounterClock(12)})
	if err != nil {
		b.Fatal(err)
	}
	m := newBareGen(newCounterClock(12))
	pair(b, 1, counterRound, "x-mutex", nextSide(b, g, 1), bareSide(m, 1))
}

// BenchmarkNextParallel is BenchmarkNext from GOMAXPROCS goroutines
// contending on one generator (and one clock, safe for concurrent use),
// against the bare mutex generator from as many goroutines.
func BenchmarkNextParallel(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	g, m := benchGen(b, newAtomicCounterClock(12)), newBareGen(newAtomicCounterClock(12))
	pair(b, 1, counterRound, "x-mutex", nextSide(b, g, procs), bareSide(m, procs))
}

// realNextSides returns the generator and bare mutex sides of a real-clock
// Next benchmark from procs goroutines.
func realNextSides(b *testing.B, procs int) (sub, ref *side) {
	g, m := benchGen(b, SystemClock()), newBareGen(SystemClock())
	sub, ref = nextSide(b, g, procs), bareSide(m, procs)
	sub.prime = primeTick(func() ID { id, _ := g.Next(); return id })
	ref.prime = primeTick(m.Next)
	return sub, ref
}

// BenchmarkNextRealClock is Next on the system clock, capped by the
// sequence at 4,096 IDs per ms: x-ceiling is the rate against that cap,
// x-mutex against the bare mutex generator on the system clock.
func BenchmarkNextRealClock(b *testing.B) {
	sub, ref := realNextSides(b, 1)
	pair(b, 1, realRound, "x-mutex", sub, ref)
	reportCeiling(b, sub, 1)
}

// BenchmarkNextRealClockParallel is BenchmarkNextRealClock from
// GOMAXPROCS goroutines sharing one generator.
func BenchmarkNextRealClockParallel(b *testing.B) {
	sub, ref := realNextSides(b, runtime.GOMAXPROCS(0))
	pair(b, 1, realRound, "x-mutex", sub, ref)
	reportCeiling(b, sub, 1)
}

// BenchmarkNextN4096 is NextN filling 4096 IDs per call (one tick's worth)
// on a counter clock that moves a tick per reading; ns/ID is the cost per
// ID, x-mutex the ratio to the bare mutex generator's batch on the same
// clock.
func BenchmarkNextN4096(b *testing.B) {
	g, m := benchGen(b, newCounterClock(0)), newBareGen(newCounterClock(0))
	pair(b, 4096, counterRound, "x-mutex", batchSide(b, g, 1), bareBatchSide(m, 1))
}

// BenchmarkNextN4096Parallel is BenchmarkNextN4096 from GOMAXPROCS
// goroutines.
func BenchmarkNextN4096Parallel(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	g, m := benchGen(b, newAtomicCounterClock(0)), newBareGen(newAtomicCounterClock(0))
	pair(b, 4096, counterRound, "x-mutex", batchSide(b, g, procs), bareBatchSide(m, procs))
}

// BenchmarkNextNRealClock is NextN(4096) on the system clock: each batch
// needs a whole millisecond of sequence, so it runs at the ceiling
// (x-ceiling) and spends most of the millisecond waiting for the next tick.
// cpu-us/batch is the process CPU per batch. The reference is the same
// generator on a clock whose sleep yields in a loop below 1 ms, as the
// system clock did before: ref-cpu-us/batch, and x-cpu the ratio.
func BenchmarkNextNRealClock(b *testing.B) { benchRealBatches(b, 1) }

// BenchmarkNextNRealClockWorkers is BenchmarkNextNRealClock from 4
// goroutines, as loadbench's default batch workers: three of them wait
// for a tick while one is served.
func BenchmarkNextNRealClockWorkers(b *testing.B) { benchRealBatches(b, 4) }

func benchRealBatches(b *testing.B, workers int) {
	g, y := benchGen(b, SystemClock()), benchGen(b, yieldClock{})
	sub, ref := batchSide(b, g, workers), batchSide(b, y, workers)
	sub.prime = primeTick(func() ID { id, _ := g.Next(); return id })
	ref.prime = primeTick(func() ID { id, _ := y.Next(); return id })
	pair(b, 4096, realRound, "x-yield", sub, ref)
	reportCeiling(b, sub, 4096)
	if sub.cpuOK && ref.cpuOK {
		b.ReportMetric(float64(sub.cpu.Microseconds())/float64(b.N), "cpu-us/batch")
		b.ReportMetric(float64(ref.cpu.Microseconds())/float64(b.N), "ref-cpu-us/batch")
		b.ReportMetric(float64(sub.cpu)/float64(max(ref.cpu, 1)), "x-cpu")
	}
}

// BenchmarkStats is the cost of a Stats snapshot (atomic loads only).
func BenchmarkStats(b *testing.B) {
	g := benchGen(b, newCounterClock(12))
	for b.Loop() {
		_ = g.Stats()
	}
}

// BenchmarkSleepLate sleeps the system clock to the next millisecond
// boundary, as a call waiting for the next tick does, alternating with the
// same wait on time.Sleep (the reference). It reports how late each woke
// (late-p50-us, late-p99-us; ref- for time.Sleep; x-late the ratio of
// the medians) and the process CPU per sleep (cpu-us/sleep,
// ref-cpu-us/sleep; x-cpu their ratio).
func BenchmarkSleepLate(b *testing.B) {
	type sample struct {
		late []time.Duration
		cpu  time.Duration
	}
	var sub, ref sample
	measure := func(s *sample, sleep func(time.Duration)) {
		c0, _ := processCPU()
		now := time.Now()
		d := time.Millisecond - time.Duration(now.UnixNano()%int64(time.Millisecond))
		sleep(d)
		s.late = append(s.late, time.Since(now)-d)
		c1, _ := processCPU()
		s.cpu += c1 - c0
	}
	clock := SystemClock()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			measure(&sub, clock.Sleep)
			measure(&ref, time.Sleep)
		} else {
			measure(&ref, time.Sleep)
			measure(&sub, clock.Sleep)
		}
	}
	q := func(s sample, p float64) float64 {
		slices.Sort(s.late)
		return float64(s.late[int(p*float64(len(s.late)-1))]) / 1e3
	}
	n := float64(len(sub.late))
	b.ReportMetric(q(sub, 0.5), "late-p50-us")
	b.ReportMetric(q(sub, 0.99), "late-p99-us")
	b.ReportMetric(q(ref, 0.5), "ref-late-p50-us")
	b.ReportMetric(q(ref, 0.99), "ref-late-p99-us")
	b.ReportMetric(float64(sub.cpu)/n/1e3, "cpu-us/sleep")
	b.ReportMetric(float64(ref.cpu)/n/1e3, "ref-cpu-us/sleep")
	b.ReportMetric(q(sub, 0.5)/max(q(ref, 0.5), 1e-3), "x-late")
	b.ReportMetric(float64(sub.cpu)/float64(max(ref.cpu, 1)), "x-cpu")
}
