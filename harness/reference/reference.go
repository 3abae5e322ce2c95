// Package reference holds Snowflake generators that are wrong on purpose.
//
// Each one carries a single bug found in real generators, so that the
// harness can show it catching that bug: run the built-in suite against
// them ("snowchaos run --target bad-no-rewind-check") and watch the
// duplicates, the restart violations or the runaway lead appear. They are
// negative controls, not examples: never issue production IDs with them.
//
//   - NoRewindCheck uses the clock's reading even when it is behind the
//     last tick it issued, and restarts its sequence: a step back re-issues
//     IDs (the original Twitter snowflake without its guard).
//   - SeqResetFirst resets its sequence on any change of tick before it
//     checks which way the clock moved, then waits out a rewind and issues
//     the last tick again from sequence 0.
//   - MemoryOnly handles rewinds correctly but keeps its last tick only in
//     memory: a restart in the same millisecond, or after the clock went
//     back, re-issues IDs (no checkpoint, no start fence).
//   - UnboundedLogical never waits and never refuses: its logical clock
//     runs ahead of the wall clock without bound when the load exceeds the
//     sequence or after a rewind, as CPython's uuid7 counter does.
//   - NarrowWorker is the safe generator keeping its worker ID in one bit
//     fewer than the layout's node field: only nodes in the top half of
//     the worker range show it.
//
// All of them take their time from a generator.Clock, honour the layout and
// node of a generator.Settings, and are safe for concurrent use. Their
// waits are bounded by MaxStall so a harness never hangs on them.
package reference

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Generator is the part of *generator.Generator's API the reference
// generators offer.
type Generator interface {
	// NextContext returns one ID.
	NextContext(ctx context.Context) (generator.ID, error)
	// NextNContext fills dst; n < len(dst) only with an error.
	NextNContext(ctx context.Context, dst []generator.ID) (int, error)
	// Close ends the generator; later calls fail with generator.ErrClosed.
	Close() error
}

// MaxStall bounds any wait inside a reference generator (a spin for the
// next tick under a frozen clock, say): past it the call fails with
// ErrStalled. The safe generator bounds its waits by Settings.MaxWait; the
// bad ones would spin for ever.
const MaxStall = time.Minute

// ErrStalled reports a reference generator call that waited MaxStall for
// its clock and gave up.
var ErrStalled = errors.New("reference: clock did not advance within the stall bound")

// Names of the reference generators, as the harness targets know them.
const (
	NameNoRewindCheck    = "bad-no-rewind-check"
	NameSeqResetFirst    = "bad-seq-reset-first"
	NameMemoryOnly       = "bad-memory-only"
	NameUnboundedLogical = "bad-unbounded-logical"
)

// Info describes one reference generator.
type Info struct {
	// Name is the target name ("bad-no-rewind-check").
	Name string
	// Bug says in one sentence what is wrong with it.
	Bug string
	// CaughtBy names the invariant that exposes it.
	CaughtBy string
}

var infos = []Info{
	{NameNoRewindCheck, "uses the clock's reading even when it is behind the last issued tick, restarting the sequence", "duplicates after any step back"},
	{NameSeqResetFirst, "resets its sequence before checking the clock, then waits out a rewind and re-issues the last tick from sequence 0", "duplicates after any step back"},
	{NameMemoryOnly, "keeps its last tick only in memory: no checkpoint, no start fence", "duplicates and restart_violations after a restart in the same millisecond or after a rewind"},
	{NameUnboundedLogical, "runs its logical clock ahead of the wall clock without bound (like CPython's uuid7)", "lead beyond any bound under overload or after a rewind"},
	{NameNarrowWorker, "keeps the worker ID in one bit fewer than the layout's node field: the top half of the worker range issues the bottom half's IDs", "duplicates between a node in the top half of the worker range and its twin in the bottom half"},
}

// All returns the reference generators' descriptions, in a fixed order.
func All() []Info { return append([]Info(nil), infos...) }

// New returns the named reference generator over s (Layout, Node, Clock
// and, for MemoryOnly, MaxWait are used; everything else is ignored, as the
// bugs require).
func New(name string, s generator.Settings) (Generator, error) {
	switch name {
	case NameNoRewindCheck:
		return NewNoRewindCheck(s)
	case NameSeqResetFirst:
		return NewSeqResetFirst(s)
	case NameMemoryOnly:
		return NewMemoryOnly(s)
	case NameUnboundedLogical:
		return NewUnboundedLogical(s)
	case NameNarrowWorker:
		return NewNarrowWorker(s)
	}
	names := make([]string, len(infos))
	for i, in := range infos {
		names[i] = in.Name
	}
	sort.Strings(names)
	return nil, fmt.Errorf("reference: unknown generator %q (known: %v)", name, names)
}

// core is the state and plumbing the four share; each supplies its own
// next function, called with the lock held.
type core struct {
	layout  generator.Layout
	node    int64
	clock   generator.Clock
	maxWait time.Duration
	tickNs  int64

	mu struct {
		sync.Mutex
		last   int64 // last issued tick; -1 before the first
		seq    int64
		closed bool
	}
}

func newCore(s generator.Settings) (*core, error) {
	l := s.Layout
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	if l.Epoch.IsZero() {
		l.Epoch = generator.DefaultEpoch
	}
	if l.Tick == 0 {
		l.Tick = time.Millisecond
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if s.Node < 0 || s.Node > l.MaxNode() {
		return nil, fmt.Errorf("%w: node = %d, want 0..%d", generator.ErrNodeRange, s.Node, l.MaxNode())
	}
	c := &core{layout: l, node: s.Node, clock: s.Clock, maxWait: s.MaxWait, tickNs: int64(l.Tick)}
	if c.clock == nil {
		c.clock = generator.SystemClock()
	}
	if c.maxWait <= 0 {
		c.maxWait = time.Second
	}
	c.mu.last = -1
	return c, nil
}

// now returns the current tick and monotonic reading.
func (c *core) now() (tick, mono int64) {
	wall, mono := c.clock.Now()
	return c.layout.TickOf(wall), mono
}

// untilTick sleeps until the clock reads a tick >= want, bounded by
// deadline (monotonic ns); it returns the tick reached.
func (c *core) untilTick(want, deadline int64) (int64, error) {
	for {
		wall, mono := c.clock.Now()
		tick := c.layout.TickOf(wall)
		if tick >= want {
			return tick, nil
		}
		if mono >= deadline {
			return tick, ErrStalled
		}
		// Sleep to the start of the wanted tick, at least a microsecond so
		// a clock that moves in coarse steps is not spun on.
		d := want*c.tickNs + c.layout.Epoch.UnixNano() - wall
		d = max(min(d, deadline-mono), int64(time.Microsecond))
		c.clock.Sleep(time.Duration(d))
	}
}

func (c *core) compose(tick, seq int64) (generator.ID, error) {
	return c.layout.Compose(tick, c.node, seq)
}

// run issues len(dst) IDs with next, under the lock.
func (c *core) run(ctx context.Context, dst []generator.ID, next func() (generator.ID, error)) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range dst {
		if c.mu.closed {
			return i, generator.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return i, err
		}
		id, err := next()
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

func (c *core) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	return nil
}

// NoRewindCheck is the classic snowflake without its clock guard: it takes
// the tick the clock reads, starts the sequence over whenever that tick
// differs from the last one (even when it is smaller) and so re-issues IDs
// after any step back. On sequence exhaustion it spins for the next tick.
type NoRewindCheck struct{ c *core }

// NewNoRewindCheck returns a NoRewindCheck generator.
func NewNoRewindCheck(s generator.Settings) (*NoRewindCheck, error) {
	c, err := newCore(s)
	if err != nil {
		return nil, err
	}
	return &NoRewindCheck{c}, nil
}

// next issues one ID; c.mu is held.
func (g *NoRewindCheck) next() (generator.ID, error) {
	c := g.c
	tick, mono := c.now()
	if tick == c.mu.last {
		c.mu.seq++
		if c.mu.seq > c.layout.MaxSeq() {
			t, err := c.untilTick(c.mu.last+1, mono+int64(MaxStall))
			if err != nil {
				return 0, err
			}
			tick, c.mu.seq = t, 0
		}
	} else {
		c.mu.seq = 0 // BUG: also when tick < last
	}
	c.mu.last = tick
	return c.compose(tick, c.mu.seq)
}

// NextContext implements Generator.
func (g *NoRewindCheck) NextContext(ctx context.Context) (generator.ID, error) {
	var b [1]generator.ID
	_, err := g.c.run(ctx, b[:], g.next)
	return b[0], err
}

// NextNContext implements Generator.
func (g *NoRewindCheck) NextNContext(ctx context.Context, dst []generator.ID) (int, error) {
	return g.c.run(ctx, dst, g.next)
}

// Close implements Generator.
func (g *NoRewindCheck) Close() error { return g.c.close() }

// SeqResetFirst decides whether to reset its sequence before it checks
// which way the clock moved: a tick that differs from the last one resets
// the sequence, a tick behind the last one is then waited out, and the
// generator carries on in the last tick from sequence 0, re-issuing its
// first IDs.
type SeqResetFirst struct{ c *core }

// NewSeqResetFirst returns a SeqResetFirst generator.
func NewSeqResetFirst(s generator.Settings) (*SeqResetFirst, error) {
	c, err := newCore(s)
	if err != nil {
		return nil, err
	}
	return &SeqResetFirst{c}, nil
}

func (g *SeqResetFirst) next() (generator.ID, error) {
	c := g.c
	tick, mono := c.now()
	if tick != c.mu.last {
		c.mu.seq = 0 // BUG: decided before looking at the direction
	} else {
		c.mu.seq++
	}
	if tick < c.mu.last {
		// The clock went back: wait until it reaches the last tick again
		// (but the sequence was already reset).
		t, err := c.untilTick(c.mu.last, mono+int64(MaxStall))
		if err != nil {
			return 0, err
		}
		tick = t
	}
	if c.mu.seq > c.layout.MaxSeq() {
		t, err := c.untilTick(tick+1, mono+int64(MaxStall))
		if err != nil {
			return 0, err
		}
		tick, c.mu.seq = t, 0
	}
	c.mu.last = tick
	return c.compose(tick, c.mu.seq)
}

// NextContext implements Generator.
func (g *SeqResetFirst) NextContext(ctx context.Context) (generator.ID, error) {
	var b [1]generator.ID
	_, err := g.c.run(ctx, b[:], g.next)
	return b[0], err
}

// NextNContext implements Generator.
func (g *SeqResetFirst) NextNContext(ctx context.Context, dst []generator.ID) (int, error) {
	return g.c.run(ctx, dst, g.next)
}

// Close implements Generator.
func (g *SeqResetFirst) Close() error { return g.c.close() }

// MemoryOnly is a correct waiting generator in every respect but one: its
// last tick lives only in memory. It waits out a rewind (bounded by
// Settings.MaxWait, then fails with generator.ErrWaitExceeded) and spins
// for the next tick on exhaustion, but a new instance (a restart) starts
// from nothing, so it re-issues IDs when restarted within the same tick or
// after the clock went back.
type MemoryOnly struct{ c *core }

// NewMemoryOnly returns a MemoryOnly generator.
func NewMemoryOnly(s generator.Settings) (*MemoryOnly, error) {
	c, err := newCore(s)
	if err != nil {
		return nil, err
	}
	return &MemoryOnly{c}, nil
}

func (g *MemoryOnly) next() (generator.ID, error) {
	c := g.c
	tick, mono := c.now()
	deadline := mono + int64(c.maxWait)
	if tick < c.mu.last {
		t, err := c.untilTick(c.mu.last, deadline)
		if err != nil {
			return 0, &generator.RewindError{By: time.Duration((c.mu.last - t) * c.tickNs), Policy: generator.PolicyWait, Err: generator.ErrWaitExceeded}
		}
		tick = t
	}
	if tick == c.mu.last {
		c.mu.seq++
		if c.mu.seq > c.layout.MaxSeq() {
			t, err := c.untilTick(c.mu.last+1, deadline)
			if err != nil {
				return 0, generator.ErrWaitExceeded
			}
			tick, c.mu.seq = t, 0
		}
	} else {
		c.mu.seq = 0
	}
	c.mu.last = tick
	return c.compose(tick, c.mu.seq)
}

// NextContext implements Generator.
func (g *MemoryOnly) NextContext(ctx context.Context) (generator.ID, error) {
	var b [1]generator.ID
	_, err := g.c.run(ctx, b[:], g.next)
	return b[0], err
}

// NextNContext implements Generator.
func (g *MemoryOnly) NextNContext(ctx context.Context, dst []generator.ID) (int, error) {
	return g.c.run(ctx, dst, g.next)
}

// Close implements Generator.
func (g *MemoryOnly) Close() error { return g.c.close() }

// UnboundedLogical issues from max(last tick, clock tick) and, when the
// sequence runs out, moves its logical tick forward instead of waiting. It
// never waits and never refuses, and nothing bounds how far its embedded
// time runs ahead of the wall clock: under a load above the sequence's
// capacity, or after a step back, the lead grows for as long as the cause
// lasts. Like CPython's uuid7 counter it keeps its state only in memory.
type UnboundedLogical struct{ c *core }

// NewUnboundedLogical returns an UnboundedLogical generator.
func NewUnboundedLogical(s generator.Settings) (*UnboundedLogical, error) {
	c, err := newCore(s)
	if err != nil {
		return nil, err
	}
	return &UnboundedLogical{c}, nil
}

func (g *UnboundedLogical) next() (generator.ID, error) {
	c := g.c
	tick, _ := c.now()
	if tick <= c.mu.last {
		tick = c.mu.last
		c.mu.seq++
		if c.mu.seq > c.layout.MaxSeq() {
			tick++ // BUG: no bound on how far ahead this runs
			c.mu.seq = 0
		}
	} else {
		c.mu.seq = 0
	}
	c.mu.last = tick
	return c.compose(tick, c.mu.seq)
}

// NextContext implements Generator.
func (g *UnboundedLogical) NextContext(ctx context.Context) (generator.ID, error) {
	var b [1]generator.ID
	_, err := g.c.run(ctx, b[:], g.next)
	return b[0], err
}

// NextNContext implements Generator.
func (g *UnboundedLogical) NextNContext(ctx context.Context, dst []generator.ID) (int, error) {
	return g.c.run(ctx, dst, g.next)
}

// Close implements Generator.
func (g *UnboundedLogical) Close() error { return g.c.close() }

var (
	_ Generator = (*NoRewindCheck)(nil)
	_ Generator = (*SeqResetFirst)(nil)
	_ Generator = (*MemoryOnly)(nil)
	_ Generator = (*UnboundedLogical)(nil)
)
