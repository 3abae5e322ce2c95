package generator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Settings configures a Generator. The zero value of every field is the
// safe default, so Settings{Node: 7} is a complete configuration.
type Settings struct {
	// Layout is the bit layout, epoch and tick. Zero: DefaultLayout().
	Layout Layout
	// Node is this generator's node (worker) ID, in [0, Layout.MaxNode()].
	// Two generators with the same layout, epoch and node must never run at
	// once; a Fence (for example a lease) can enforce that.
	Node int64
	// Policy is what to do when the wall clock is behind the last issued
	// tick. Zero: PolicyWait.
	Policy Policy
	// MaxWait bounds each call: one deadline on the monotonic clock, taken
	// at the call's first clock reading, covers rewind waits, start-fence
	// waits and sequence-exhaustion waits alike. Zero: 1s.
	MaxWait time.Duration
	// MaxLead bounds how far PolicyLogical may run the embedded time ahead
	// of the wall clock. Zero: 1s.
	MaxLead time.Duration
	// Clock supplies wall time, monotonic time and sleeping. Nil:
	// SystemClock().
	Clock Clock
	// Checkpoint persists the reserved high-water mark. Nil: no
	// persistence (a restart in the same tick, or after a rewind, could
	// then repeat IDs).
	Checkpoint Checkpointer
	// Reserve is how far ahead of the issuing tick the persisted mark is
	// reserved; a new mark is written when issuing passes half of it, so
	// one Save happens about every Reserve/2 while issuing steadily, and a
	// restart waits at most about Reserve. Zero: 1s. NoReserve: no
	// reservation ahead, the mark names the issuing tick itself (a Save
	// at every new tick; for tests of the start fence's boundary).
	Reserve time.Duration
	// Fence gates every call; nil means always open.
	Fence Fence
	// Observer receives rare events (rewinds, waits, exhaustion, refusals,
	// lead changes, checkpoints). Nil: none.
	Observer Observer
}

// NoReserve is the Settings.Reserve that reserves nothing ahead: each
// mark names the tick about to be issued in, so a restart finds a mark
// equal to the last issued tick. It costs one Save per tick.
const NoReserve time.Duration = -1

// Defaults for zero Settings fields.
const (
	defaultMaxWait = time.Second
	defaultMaxLead = time.Second
	defaultReserve = time.Second
	// maxSleepStep bounds one Clock.Sleep while waiting, so a clock that
	// jumps forward, a cancelled context or a closing fence is noticed
	// promptly.
	maxSleepStep = 5 * time.Millisecond
	// saveWaitStep is how long a call sleeps while another call's
	// checkpoint write is in flight.
	saveWaitStep = 100 * time.Microsecond
)

// Stats is a snapshot of a generator's counters. Each field is read
// atomically; the snapshot as a whole is not one instant (Issued may lag
// calls in flight).
type Stats struct {
	// Issued is the number of IDs issued.
	Issued uint64
	// RewindsWaited, RewindsLogical and RewindsRefused count calls that
	// found the clock behind the last issued tick (or the start fence), by
	// what the policy did.
	RewindsWaited, RewindsLogical, RewindsRefused uint64
	// LastRewindWall is the wall reading (Unix ns) of the last detected
	// rewind, 0 if none.
	LastRewindWall int64
	// LastRewindBy is how far the clock stood behind at the last rewind.
	LastRewindBy time.Duration
	// Exhaustions counts ticks whose sequence ran out while a call still
	// wanted an ID in them.
	Exhaustions uint64
	// Refusals counts calls that returned an error.
	Refusals uint64
	// Lead is the logical lead over the wall clock (PolicyLogical), in
	// whole ticks, as of the last ID issued.
	Lead time.Duration
	// MaxLead is the largest lead seen.
	MaxLead time.Duration
	// MarkMs is the persisted reserved high-water mark, Unix ms (0 without
	// a checkpoint).
	MarkMs int64
	// CheckpointWrites and CheckpointErrors count Save calls that
	// succeeded and failed.
	CheckpointWrites, CheckpointErrors uint64
	// LastTick is the last issued tick (0 before the first ID).
	LastTick int64
}

// slowBit in the state word sends every call to the slow path (fresh
// start, logical lead, closed, or a call that lost fastTries races). It is
// the sign bit, never part of an ID; the slow path decides from the
// mutex-guarded fields, so a slowBit set for contention alone is cleared
// by the next ID it issues.
const slowBit = uint64(1) << 63

// fastTries is how many compare-and-swaps a fast-path call tries before it
// takes the slow path; it yields 1, 2, 4, ... times between tries.
const fastTries = 6

// Generator issues strictly increasing, unique IDs for one node. It is safe
// for concurrent use. The fast path (the clock in the same or a later
// tick, no rewind, no lead, mark not due) costs one clock reading and one
// compare-and-swap, and allocates nothing; everything else takes a mutex.
//
// A dependency that panics never leaves the generator locked. Where the
// generator holds its mutex, has a checkpoint write in flight or calls the
// Observer, the panic is recovered and the call fails with a *PanicError
// (ErrPanic); the next call runs normally. The fast path holds nothing and
// calls Clock.Now and Fence.Check without a deferred recover, which would
// almost double its cost (6.3 to 12.0 ns per ID, measured): a panic there
// reaches the caller unchanged and leaves the generator as it was.
type Generator struct {
	// Read-only after New; the fast path reads these, so they share no
	// cache line with state, which every issue writes.
	clock     Clock
	fence     Fence
	fenceWord *atomic.Int64 // Check is needed at readings from it up (see FenceWord)
	epochNs   int64
	tickNs    int64
	timeShift uint
	seqMask   uint64
	nodePart  uint64
	obs       Observer
	cp        Checkpointer
	maxSeq    int64
	maxTick   int64
	maxWait   int64
	maxLead   int64
	reserve   int64
	policy    Policy
	settings  Settings

	_ [64]byte
	// state is the last issued ID without its node bits
	// (tick<<timeShift | seq), plus slowBit. Every issue moves it forward
	// by compare-and-swap, which makes IDs unique and increasing.
	state atomic.Uint64
	_     [56]byte
	// limit is the highest tick the fast path may move to (the checkpoint
	// renewal point, or the end of the layout's lifetime).
	limit atomic.Int64
	// issuedBase counts IDs issued in ticks before state's tick.
	issuedBase atomic.Int64

	st struct {
		issuedAny                                     atomic.Bool
		rewindsWaited, rewindsLogical, rewindsRefused atomic.Uint64
		lastRewindWall, lastRewindBy                  atomic.Int64
		exhaustions, refusals                         atomic.Uint64
		lead, maxLead                                 atomic.Int64
		markMs                                        atomic.Int64
		cpWrites, cpErrors                            atomic.Uint64
		// withheld counts IDs the fast path claimed but did not hand
		// out because the fence refused the call.
		withheld atomic.Uint64
	}

	mu struct {
		sync.Mutex
		// fresh: nothing issued yet; the first ID must be at a tick after
		// startTick (-1 when there is no start fence).
		fresh     bool
		startTick int64
		closed    bool
		// leadTicks is the current logical lead; prevWall is the wall tick
		// seen by the last issue while leading.
		leadTicks int64
		prevWall  int64
		// exhaustedTick is the last tick counted in Stats.Exhaustions.
		exhaustedTick int64
		// markMs / markTick: persisted mark and the last tick it covers
		// (math.MaxInt64 without a checkpoint); renewAt: a tick past it
		// writes a new mark first.
		markMs   int64
		markTick int64
		renewAt  int64
		saving   bool
		saveErr  error
		// The wait queue. A call that has to wait takes a place in it
		// and keeps it until it returns: every call, waiting or new,
		// leaves the IDs the calls queued before it still want to them,
		// so calls are served in the order they began to wait and none
		// can be overtaken until its deadline. qLen counts the queued
		// calls, qEnq the IDs they ever asked for (at the time they
		// queued), qDone those issued to them or given up. While the
		// queue is not empty the state carries slowBit, so the fast path
		// cannot take IDs past it.
		qLen        int
		qEnq, qDone int64
	}
}

// New validates s and returns a generator. It reads the clock once and,
// with a Checkpoint, loads the stored mark: the first ID will be at a tick
// after it, so the policy waits for (or refuses, or leads past) a clock
// that has not yet passed it, reported as a rewind with Start set.
//
// New returns an error wrapping one of: ErrInvalidLayout (bad field, epoch
// in the future), ErrLifetime (the time field overflowed), ErrNodeRange,
// ErrInvalidPolicy, ErrInvalidSettings (negative MaxWait, MaxLead or
// Reserve), ErrCheckpoint (the mark could not be loaded), ErrPanic (the
// Clock or the Checkpointer panicked).
func New(s Settings) (*Generator, error) {
	s.Layout = s.Layout.Normalize()
	if err := s.Layout.Validate(); err != nil {
		return nil, err
	}
	l := s.Layout
	if s.Node < 0 || s.Node > l.MaxNode() {
		return nil, fmt.Errorf("%w: Node = %d, want 0..%d for layout %s", ErrNodeRange, s.Node, l.MaxNode(), l.Name)
	}
	if s.Policy > PolicyLogical {
		return nil, fmt.Errorf("%w: Policy = %d", ErrInvalidPolicy, uint8(s.Policy))
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"MaxWait", &s.MaxWait, defaultMaxWait}, {"MaxLead", &s.MaxLead, defaultMaxLead}, {"Reserve", &s.Reserve, defaultReserve}} {
		if f.v == &s.Reserve && *f.v == NoReserve {
			continue
		}
		if *f.v < 0 {
			return nil, fmt.Errorf("%w: %s = %v, want >= 0", ErrInvalidSettings, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if s.Clock == nil {
		s.Clock = SystemClock()
	}
	wall, _, err := clockNow(s.Clock)
	if err != nil {
		return nil, err
	}
	if err := l.ValidateAt(wall); err != nil {
		return nil, err
	}

	g := &Generator{
		clock:     s.Clock,
		fence:     s.Fence,
		fenceWord: fenceWordOf(s.Fence),
		obs:       s.Observer,
		cp:        s.Checkpoint,
		epochNs:   l.Epoch.UnixNano(),
		tickNs:    int64(l.Tick),
		timeShift: l.NodeBits + l.SeqBits,
		seqMask:   uint64(l.MaxSeq()),
		maxSeq:    l.MaxSeq(),
		maxTick:   l.MaxTicks(),
		nodePart:  uint64(s.Node) << l.SeqBits,
		maxWait:   int64(s.MaxWait),
		maxLead:   int64(s.MaxLead),
		reserve:   max(int64(s.Reserve), 0),
		policy:    s.Policy,
		settings:  s,
	}
	g.mu.fresh = true
	g.mu.startTick = -1
	g.mu.exhaustedTick = -1
	g.mu.markTick = math.MaxInt64
	g.mu.renewAt = math.MaxInt64
	if g.cp != nil {
		markMs, err := checkpointLoad(g.cp)
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				err = fmt.Errorf("%w: load: %w", ErrCheckpoint, err)
			}
			return nil, err
		}
		if markMs < 0 || markMs > math.MaxInt64/int64(time.Millisecond) {
			return nil, fmt.Errorf("%w: stored mark %d ms is out of range", ErrCheckpoint, markMs)
		}
		g.mu.markMs = markMs
		g.mu.markTick = -1
		if markMs > 0 {
			g.mu.markTick = floorDiv(markMs*int64(time.Millisecond)-g.epochNs, g.tickNs)
			g.mu.startTick = max(g.mu.markTick, -1)
		}
		g.mu.renewAt = g.mu.markTick
		g.st.markMs.Store(markMs)
	}
	g.state.Store(slowBit | uint64(max(g.mu.startTick, 0))<<g.timeShift | g.seqMask)
	g.limit.Store(min(g.mu.renewAt, g.maxTick))
	return g, nil
}

// Settings returns the generator's settings with every default filled in.
func (g *Generator) Settings() Settings { return g.settings }

// Next returns the next ID: unique for this generator's layout and node,
// and greater than every ID it issued before. It blocks at most MaxWait (a
// monotonic deadline covering rewind and exhaustion waits). Errors wrap
// one of: ErrClockBackwards, ErrWaitExceeded, ErrLeadExceeded (all three in
// a *RewindError when a rewind or the start fence caused them),
// ErrBeforeEpoch, ErrLifetime, ErrFenced, ErrCheckpoint, ErrClosed,
// ErrPanic (see Generator for where a dependency's panic is recovered). On
// the fast path it costs one clock reading, one compare-and-swap and the
// fence check.
func (g *Generator) Next() (ID, error) { return g.next(nil) }

// NextContext is Next with a context: ctx is handed to the Observer, and
// when it is done, a call that is waiting stops (within one sleep step)
// with an error wrapping ErrWaitExceeded and the context's error.
func (g *Generator) NextContext(ctx context.Context) (ID, error) { return g.next(&ctx) }

// next is Next's fast path: while the clock stays in the state's tick and
// its sequence has room, it is a load, a clock reading, a compare-and-swap
// and the fence check, straight-line in a function small enough to keep
// its values in registers. ctx is passed by pointer (nil for
// context.Background) so that it does not take two registers across the
// two dependency calls, which measurably slowed every ID. The fence is
// checked after the compare-and-swap, with the reading of the call: when
// it refuses, the claimed ID is never handed out (nor counted as issued).
// A reading below the fence's word (FenceWord) needs no call to Check.
func (g *Generator) next(ctx *context.Context) (ID, error) {
	s := g.state.Load()
	wall, mono := g.clock.Now()
	// s&(slowBit|seqMask) < seqMask: no slowBit and the sequence has room.
	lost := false
	if s&(slowBit|g.seqMask) < g.seqMask && uint64(wall-g.epochNs-int64(s>>(g.timeShift&63))*g.tickNs) < uint64(g.tickNs) {
		if g.state.CompareAndSwap(s, s+1) {
			if !g.fenceOpen(mono) {
				if err := g.fence.Check(mono); err != nil {
					g.st.withheld.Add(1)
					return 0, g.fenced(contextOf(ctx), err)
				}
			}
			return ID(s + 1 | g.nodePart), nil
		}
		lost = true
	}
	return g.nextSlow(contextOf(ctx), s, lost, wall, mono)
}

// contextOf returns *ctx, or context.Background when ctx is nil.
func contextOf(ctx *context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return *ctx
}

// nextSlow is the rest of Next after the fast path's first try: the fence
// check, a move to a later tick below the limit, retries after a lost race
// (lost: the first try's compare-and-swap failed), and the slow path.
func (g *Generator) nextSlow(ctx context.Context, s uint64, lost bool, wall, mono int64) (ID, error) {
	if !g.fenceOpen(mono) {
		if err := g.fence.Check(mono); err != nil {
			return 0, g.fenced(ctx, err)
		}
	}
	// stale: wall was read before s was loaded (after a lost race), so it
	// may be older than the tick another call moved the state to.
	stale := false
	tries := 0
	for s&slowBit == 0 {
		if lost {
			// Another call got in first, so the state's cache line is
			// moving between cores at every ID. Back off, longer each
			// time, so the winner issues on with the line (and the
			// clock's) in its own cache; after fastTries, stop the fast
			// path of every call (slowBit, which the slow path clears) so
			// this one is served under the mutex in bounded time. Our
			// reading is still good for the state's tick or a later one;
			// it only needs renewing if the state has moved past it.
			lost, stale = false, true
			if tries++; tries == fastTries {
				s = g.state.Or(slowBit) | slowBit
				break
			}
			for range 1 << (tries - 1) {
				runtime.Gosched()
			}
			s = g.state.Load()
			continue
		}
		off := wall - g.epochNs - int64(s>>g.timeShift)*g.tickNs
		if uint64(off) < uint64(g.tickNs) {
			// Same tick as the last ID.
			if s&g.seqMask == g.seqMask {
				break
			}
			if g.state.CompareAndSwap(s, s+1) {
				return ID(s + 1 | g.nodePart), nil
			}
		} else if off > 0 {
			// A later tick.
			t := (wall - g.epochNs) / g.tickNs
			if t > g.limit.Load() {
				break
			}
			ns := uint64(t) << g.timeShift
			if g.state.CompareAndSwap(s, ns) {
				g.issuedBase.Add(int64(s&g.seqMask) + 1)
				return ID(ns | g.nodePart), nil
			}
		} else if stale {
			// Another call moved to a later tick than our reading: read
			// the clock again (after the load), so that is not mistaken
			// for a rewind.
			wall, _ = g.clock.Now()
			stale = false
			continue
		} else {
			break // behind: a rewind
		}
		lost = true
	}
	var one [1]ID
	_, err := g.issue(ctx, one[:], s, !stale, wall, mono)
	return one[0], err
}

// NextN fills dst with strictly increasing IDs and returns how many it
// wrote; n < len(dst) only together with an error (the IDs written are
// valid, even when an Observer that panicked after a whole batch makes
// the error come with n == len(dst)). It returns Next's errors. A batch that fits in the current tick costs one clock reading
// and one compare-and-swap in all; a larger one takes the lock once and
// may wait for later ticks, all within one MaxWait deadline.
func (g *Generator) NextN(dst []ID) (int, error) { return g.nextN(context.Background(), dst) }

// NextNContext is NextN with a context, as NextContext.
func (g *Generator) NextNContext(ctx context.Context, dst []ID) (int, error) {
	return g.nextN(ctx, dst)
}

func (g *Generator) nextN(ctx context.Context, dst []ID) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	s := g.state.Load()
	wall, mono := g.clock.Now()
	if !g.fenceOpen(mono) {
		if err := g.fence.Check(mono); err != nil {
			return 0, g.fenced(ctx, err)
		}
	}
	if s&slowBit == 0 {
		var ns uint64
		first := uint64(0)
		off := wall - g.epochNs - int64(s>>g.timeShift)*g.tickNs
		if uint64(off) < uint64(g.tickNs) {
			first = s&g.seqMask + 1
			ns = s&^g.seqMask | first
		} else if off > 0 {
			if t := (wall - g.epochNs) / g.tickNs; t <= g.limit.Load() {
				ns = uint64(t) << g.timeShift
			}
		}
		if ns != 0 && uint64(len(dst)) <= g.seqMask-first+1 {
			last := ns + uint64(len(dst)) - 1
			if g.state.CompareAndSwap(s, last) {
				if s>>g.timeShift != ns>>g.timeShift {
					g.issuedBase.Add(int64(s&g.seqMask) + 1)
				}
				fill(dst, ns|g.nodePart)
				return len(dst), nil
			}
		}
	}
	return g.issue(ctx, dst, s, true, wall, mono)
}

// fill writes consecutive IDs starting at first.
func fill(dst []ID, first uint64) {
	for i := range dst {
		dst[i] = ID(first + uint64(i))
	}
}

// events collects what one slow-path call reports to the Observer and the
// counters, so the Observer is called after the lock is released.
type events struct {
	rewind      bool
	rewindBy    int64
	rewindStart bool
	waits       [2]struct {
		on         bool
		start, end int64
	}
	exhausted bool
	lead      bool
	leadD     int64
}

// issue is the slow path: it fills dst under the lock, waiting, leading or
// refusing as the policy says, all within one deadline. The wall reading
// is used only while the state is still seen, the state loaded before it
// was taken (seenOK false: no such state); otherwise the clock is read
// again, so a fast-path call that moved the state meanwhile is never
// mistaken for a rewind.
func (g *Generator) issue(ctx context.Context, dst []ID, seen uint64, seenOK bool, wall, mono int64) (int, error) {
	deadline := mono + g.maxWait
	var ev events
	var err error
	var q queuePlace
	n := 0
	triedSave := false
	g.mu.Lock()
	for n < len(dst) {
		if g.mu.closed {
			err = ErrClosed
			break
		}
		s := g.state.Load()
		if !seenOK || s != seen {
			if wall, mono, err = clockNow(g.clock); err != nil {
				break
			}
			seen, seenOK = s, true
		}
		if wall < g.epochNs {
			err = fmt.Errorf("%w: wall clock reads %s, epoch is %s", ErrBeforeEpoch,
				time.Unix(0, wall).UTC().Format(time.RFC3339Nano), time.Unix(0, g.epochNs).UTC().Format(time.RFC3339Nano))
			break
		}
		tick := int64((s &^ slowBit) >> g.timeShift)
		seq := int64(s & g.seqMask)
		wt := (wall - g.epochNs) / g.tickNs

		// need/needSeq: the smallest tick and sequence the next ID may use.
		need, needSeq := tick, seq+1
		start := false
		if g.mu.fresh {
			need, needSeq = g.mu.startTick+1, 0
			start = g.mu.startTick >= 0
		} else if seq >= g.maxSeq {
			need, needSeq = tick+1, 0
		}
		t, first := need, needSeq
		if wt > need {
			t, first = wt, 0
		}
		if wt < need {
			// The clock is behind what the next ID needs: a rewind, the
			// start fence, a logical lead being kept, or the sequence ran
			// out in the current tick.
			prev := tick
			if g.mu.leadTicks > 0 {
				prev = g.mu.prevWall
			}
			rewind := start || (!g.mu.fresh && wt < prev)
			if rewind && !ev.rewind {
				ev.rewind, ev.rewindStart = true, start
				ev.rewindBy = g.tickStart(tick) - wall
				if start || ev.rewindBy <= 0 {
					ev.rewindBy = g.tickStart(need) - wall
				}
				g.st.lastRewindWall.Store(wall)
				g.st.lastRewindBy.Store(ev.rewindBy)
			}
			if !g.mu.fresh && seq >= g.maxSeq && g.mu.exhaustedTick != tick {
				g.mu.exhaustedTick = tick
				g.st.exhaustions.Add(1)
				ev.exhausted = true
			}
			if g.policy != PolicyLogical {
				if rewind && g.policy == PolicyRefuse {
					err = &RewindError{By: time.Duration(ev.rewindBy), Policy: g.policy, Err: ErrClockBackwards}
					break
				}
				reason := WaitExhausted
				if rewind {
					reason = WaitRewind
				}
				g.enqueueLocked(&q, int64(len(dst)-n))
				// The calls queued before this one are served first, from
				// tick need on.
				until := g.tickStart(g.turnTick(need, g.maxSeq+1, g.aheadLocked(&q))) - wall
				if werr := g.waitLocked(ctx, &ev, reason, until, deadline, &wall, &mono); werr != nil {
					if rewind {
						err = &RewindError{By: time.Duration(ev.rewindBy), Policy: g.policy, Err: werr}
					} else {
						err = fmt.Errorf("%w: sequence of tick %d exhausted", werr, tick)
					}
					break
				}
				continue
			}
		}
		// IDs of this tick the calls queued before this one still want
		// are theirs: take only the rest, or wait for a later tick.
		avail := g.maxSeq - first + 1
		if ahead := g.aheadLocked(&q); ahead > 0 {
			if ahead >= avail {
				g.enqueueLocked(&q, int64(len(dst)-n))
				until := g.tickStart(g.turnTick(t, avail, ahead)) - wall
				if werr := g.waitLocked(ctx, &ev, WaitExhausted, until, deadline, &wall, &mono); werr != nil {
					err = fmt.Errorf("%w: sequence of tick %d promised to calls waiting before this one", werr, t)
					break
				}
				continue
			}
			avail -= ahead
		}
		lead := t - wt
		if lead > 0 && lead*g.tickNs > g.maxLead {
			err = &RewindError{By: time.Duration(g.tickStart(t) - wall), Policy: g.policy, Err: ErrLeadExceeded}
			break
		}
		if t > g.maxTick {
			err = fmt.Errorf("%w: tick %d exceeds the layout's maximum %d (%s)", ErrLifetime, t, g.maxTick, g.settings.Layout.Name)
			break
		}
		if g.cp != nil && t > g.mu.renewAt {
			if !g.mu.saving && (!triedSave || t > g.mu.markTick) {
				triedSave = true
				g.renewLocked(ctx, t, deadline-mono)
				if g.mu.saveErr != nil && t > g.mu.markTick {
					err = g.mu.saveErr
					if !errors.Is(err, ErrCheckpoint) {
						err = fmt.Errorf("%w: cannot reserve past tick %d: %w", ErrCheckpoint, g.mu.markTick, err)
					}
					break
				}
				// seen is still s, loaded before. A clock that moved past
				// the new mark while it was written does not send the call
				// back for another write: it issues at tick t, which the
				// mark covers (a lag of one write, instead of a write per
				// tick that never catches up when a write takes longer
				// than a tick, as with NoReserve).
				w, m, cerr := clockNow(g.clock)
				if cerr != nil {
					err = cerr
					break
				}
				if wt2 := (w - g.epochNs) / g.tickNs; !(t <= g.mu.markTick && wt2 > g.mu.markTick && wt2 >= wt) {
					wall, mono = w, m
				}
				continue
			}
			if t > g.mu.markTick {
				// Another call is writing the mark this ID needs.
				if werr := g.sleepLocked(ctx, saveWaitStep, deadline, &wall, &mono); werr != nil {
					err = fmt.Errorf("%w: waiting for the checkpoint write: %w", ErrCheckpoint, werr)
					break
				}
				continue
			}
			// Below the mark: issue; a failed early renewal is retried
			// by a later call.
		}
		k := min(int64(len(dst)-n), avail)
		ns := uint64(t)<<g.timeShift | uint64(first+k-1)
		// Queued calls that stay queued after this issue keep slowBit.
		stay := g.mu.qLen
		if q.queued && n+int(k) == len(dst) {
			stay--
		}
		if lead > 0 || stay > 0 {
			ns |= slowBit
		}
		if !g.state.CompareAndSwap(s, ns) {
			continue // a fast-path call moved the state: read both again
		}
		if g.mu.fresh {
			g.mu.fresh = false
			g.st.issuedAny.Store(true)
		} else if t != tick {
			g.issuedBase.Add(seq + 1)
		}
		fill(dst[n:n+int(k)], uint64(t)<<g.timeShift|g.nodePart|uint64(first))
		n += int(k)
		g.servedLocked(&q, k)
		if lead != g.mu.leadTicks {
			g.mu.leadTicks = lead
			d := lead * g.tickNs
			g.st.lead.Store(d)
			if d > g.st.maxLead.Load() {
				g.st.maxLead.Store(d)
			}
			ev.lead, ev.leadD = true, d
		}
		if lead > 0 {
			g.mu.prevWall = wt
		}
		if n < len(dst) {
			seen = ns
			if wall, mono, err = clockNow(g.clock); err != nil {
				break
			}
		}
	}
	g.leaveLocked(&q)
	g.mu.Unlock()
	return n, g.finish(ctx, &ev, err)
}

// queuePlace is one call's place in the wait queue.
type queuePlace struct {
	queued bool
	// before is qEnq when the call queued: the IDs asked for by the calls
	// queued before it. own is what the call itself has had issued or
	// given up since (counted in qDone), left what it still wants.
	before, own, left int64
}

// enqueueLocked queues the call, if it is not queued yet, wanting demand
// IDs, and sends every call to the slow path while it is queued.
func (g *Generator) enqueueLocked(q *queuePlace, demand int64) {
	if q.queued {
		return
	}
	*q = queuePlace{queued: true, before: g.mu.qEnq, left: demand}
	g.mu.qEnq += demand
	g.mu.qLen++
	g.state.Or(slowBit)
}

// turnTick returns the first tick in which a call can be served when the
// calls before it are owed ahead IDs, served first from tick from, which
// has room IDs left.
func (g *Generator) turnTick(from, room, ahead int64) int64 {
	return from + (ahead+g.maxSeq+1-room)/(g.maxSeq+1)
}

// aheadLocked returns how many IDs the calls queued before q still want
// (all queued calls, for a call not queued). It counts what later calls
// gave up as if earlier ones had, so it may be low, never high: a call
// that expects its turn too early only wakes and waits again.
func (g *Generator) aheadLocked(q *queuePlace) int64 {
	if !q.queued {
		return g.mu.qEnq - g.mu.qDone
	}
	return max(q.before-(g.mu.qDone-q.own), 0)
}

// servedLocked counts k IDs issued to q.
func (g *Generator) servedLocked(q *queuePlace, k int64) {
	if q.queued {
		g.mu.qDone += k
		q.own += k
		q.left -= k
	}
}

// leaveLocked takes q out of the queue, giving up what it still wanted.
func (g *Generator) leaveLocked(q *queuePlace) {
	if q.queued {
		g.mu.qDone += q.left
		g.mu.qLen--
		q.queued = false
	}
}

// tickStart returns the wall time (Unix ns) at which tick t begins.
func (g *Generator) tickStart(t int64) int64 { return g.epochNs + t*g.tickNs }

// waitLocked sleeps one bounded step toward the wall time at which the
// call can expect to issue (until ns from now: the tick its turn in the
// wait queue comes), releasing the lock while it sleeps. It fails at once
// with ErrWaitExceeded when the wait cannot finish before the deadline,
// so a call never blocks past its budget. The estimate only decides when
// to wake; a call that wakes early waits again.
func (g *Generator) waitLocked(ctx context.Context, ev *events, reason WaitReason, until, deadline int64, wall, mono *int64) error {
	if until > deadline-*mono {
		return ErrWaitExceeded
	}
	w := &ev.waits[reason]
	if !w.on {
		w.on, w.start = true, *mono
	}
	err := g.sleepLocked(ctx, min(time.Duration(until), maxSleepStep), deadline, wall, mono)
	w.end = *mono
	return err
}

// sleepLocked releases the lock, sleeps d on the clock (at least 1 ns),
// reads the clock and takes the lock again. It checks the context and,
// after sleeping, the fence.
func (g *Generator) sleepLocked(ctx context.Context, d time.Duration, deadline int64, wall, mono *int64) error {
	if d > time.Duration(deadline-*mono) {
		return ErrWaitExceeded
	}
	if err := contextDone(ctx); err != nil {
		return err
	}
	g.mu.Unlock()
	err := g.pause(d, wall, mono)
	g.mu.Lock()
	return err
}

// pause is sleepLocked's part outside the lock: sleep, read the clock,
// check the fence.
func (g *Generator) pause(d time.Duration, wall, mono *int64) error {
	if err := clockSleep(g.clock, max(d, 1)); err != nil {
		return err
	}
	w, m, err := clockNow(g.clock)
	if err != nil {
		return err
	}
	*wall, *mono = w, m
	if !g.fenceOpen(m) {
		return fenceCheck(g.fence, m)
	}
	return nil
}

// renewLocked writes a new mark reserved ahead of tick t, within budget
// (ns left of the call's MaxWait). The lock is released during the write,
// so calls below the current mark go on.
func (g *Generator) renewLocked(ctx context.Context, t, budget int64) {
	markMs := ceilMs(g.tickStart(t) + g.reserve)
	if markMs < g.mu.markMs {
		markMs = g.mu.markMs
	}
	g.mu.saving = true
	g.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, time.Duration(budget))
	err := g.save(sctx, markMs)
	cancel()
	g.mu.Lock()
	g.mu.saving = false
	if err != nil {
		g.st.cpErrors.Add(1)
		g.mu.saveErr = err
		return
	}
	g.st.cpWrites.Add(1)
	g.mu.saveErr = nil
	if markMs >= g.mu.markMs {
		g.mu.markMs = markMs
		g.mu.markTick = floorDiv(markMs*int64(time.Millisecond)-g.epochNs, g.tickNs)
		g.mu.renewAt = g.mu.markTick - g.reserve/g.tickNs/2
		g.st.markMs.Store(markMs)
		g.limit.Store(min(g.mu.renewAt, g.maxTick))
	}
}

// ceilMs rounds Unix ns up to Unix ms.
func ceilMs(ns int64) int64 { return -floorDiv(-ns, int64(time.Millisecond)) }

// Fence words of fences that have none: open forever (no fence: Check is
// never needed) and closed (Check is needed at every reading). Never
// written.
var wordOpen, wordClosed = constWord(math.MaxInt64), constWord(math.MinInt64)

// constWord returns a fence word holding v.
func constWord(v int64) *atomic.Int64 {
	w := new(atomic.Int64)
	w.Store(v)
	return w
}

// fenceOpen reports whether the fence's word vouches for reading mono, so
// that Check need not be called (always, without a fence).
func (g *Generator) fenceOpen(mono int64) bool { return mono < g.fenceWord.Load() }

// fenceWordOf returns the word below which f needs no Check: f's own when
// it is a FenceWord with one, else wordOpen for no fence and wordClosed
// for any other.
func fenceWordOf(f Fence) *atomic.Int64 {
	if f == nil {
		return wordOpen
	}
	if fw, ok := f.(FenceWord); ok {
		if w := fw.OpenUntil(); w != nil {
			return w
		}
	}
	return wordClosed
}

// fenceError wraps a fence's error in ErrFenced unless it already is.
func fenceError(err error) error {
	if errors.Is(err, ErrFenced) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrFenced, err)
}

// fenced reports a call refused by the fence.
func (g *Generator) fenced(ctx context.Context, err error) error {
	err = fenceError(err)
	g.st.refusals.Add(1)
	if g.obs != nil {
		if perr := observe("Observer.Refused", func() { g.obs.Refused(ctx, err) }); perr != nil {
			return withPanic(err, perr)
		}
	}
	return err
}

// finish updates the counters and calls the Observer for one slow-path
// call, outside the lock. It returns the call's error, with the
// Observer's panic added if it panicked.
func (g *Generator) finish(ctx context.Context, ev *events, err error) error {
	outcome := OutcomeWaited
	if ev.rewind {
		switch {
		case err != nil:
			outcome = OutcomeRefused
			g.st.rewindsRefused.Add(1)
		case g.policy == PolicyLogical:
			outcome = OutcomeLogical
			g.st.rewindsLogical.Add(1)
		default:
			g.st.rewindsWaited.Add(1)
		}
	}
	if err != nil {
		g.st.refusals.Add(1)
	}
	if g.obs == nil {
		return err
	}
	if perr := g.report(ctx, ev, outcome, err); perr != nil {
		if err == nil {
			g.st.refusals.Add(1)
		}
		return withPanic(err, perr)
	}
	return err
}

// report calls the Observer for one slow-path call's events; it stops at
// the first call that panics and returns its *PanicError.
func (g *Generator) report(ctx context.Context, ev *events, outcome Outcome, err error) error {
	o := g.obs
	if ev.rewind {
		e := RewindEvent{By: time.Duration(ev.rewindBy), Policy: g.policy, Outcome: outcome, Start: ev.rewindStart}
		if perr := observe("Observer.Rewind", func() { o.Rewind(ctx, e) }); perr != nil {
			return perr
		}
	}
	if ev.exhausted {
		if perr := observe("Observer.Exhausted", func() { o.Exhausted(ctx) }); perr != nil {
			return perr
		}
	}
	for r, w := range ev.waits {
		if w.on {
			if perr := observe("Observer.Wait", func() { o.Wait(ctx, WaitReason(r), w.start, time.Duration(w.end-w.start)) }); perr != nil {
				return perr
			}
		}
	}
	if ev.lead {
		if perr := observe("Observer.Lead", func() { o.Lead(time.Duration(ev.leadD)) }); perr != nil {
			return perr
		}
	}
	if err != nil {
		return observe("Observer.Refused", func() { o.Refused(ctx, err) })
	}
	return nil
}

// Ready reports whether a call now would issue: nil if so (possibly after
// a wait within MaxWait), else the error it would meet: ErrClosed, a
// fence's ErrFenced, ErrBeforeEpoch, ErrLifetime, a *RewindError (refuse
// policy behind the last tick or the start fence, a wait longer than
// MaxWait, a lead beyond MaxLead), ErrCheckpoint after a failed write, or
// ErrPanic when the Clock or the Fence panicked.
// It reads the clock once and takes the lock briefly; it issues nothing.
func (g *Generator) Ready() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Load the state before reading the clock, so a call that moves the
	// state meanwhile does not look like a rewind.
	s := g.state.Load()
	wall, mono, err := clockNow(g.clock)
	if err != nil {
		return err
	}
	if !g.fenceOpen(mono) {
		if err := fenceCheck(g.fence, mono); err != nil {
			return err
		}
	}
	if g.mu.closed {
		return ErrClosed
	}
	if wall < g.epochNs {
		return ErrBeforeEpoch
	}
	tick := int64((s &^ slowBit) >> g.timeShift)
	seq := int64(s & g.seqMask)
	wt := (wall - g.epochNs) / g.tickNs
	need := tick
	start := false
	if g.mu.fresh {
		need, start = g.mu.startTick+1, g.mu.startTick >= 0
	} else if seq >= g.maxSeq {
		need = tick + 1
	}
	t := max(need, wt)
	if t > g.maxTick {
		return fmt.Errorf("%w: tick %d exceeds the layout's maximum %d", ErrLifetime, t, g.maxTick)
	}
	if g.cp != nil && t > g.mu.markTick && g.mu.saveErr != nil {
		if errors.Is(g.mu.saveErr, ErrCheckpoint) {
			return g.mu.saveErr
		}
		return fmt.Errorf("%w: %w", ErrCheckpoint, g.mu.saveErr)
	}
	if wt >= need || (!start && wt == tick && !g.mu.fresh) {
		return nil // issues now, or after an exhaustion wait of under a tick
	}
	by := time.Duration(g.tickStart(need) - wall)
	switch g.policy {
	case PolicyRefuse:
		return &RewindError{By: by, Policy: g.policy, Err: ErrClockBackwards}
	case PolicyWait:
		if int64(by) > g.maxWait {
			return &RewindError{By: by, Policy: g.policy, Err: ErrWaitExceeded}
		}
	case PolicyLogical:
		if (need-wt)*g.tickNs > g.maxLead {
			return &RewindError{By: by, Policy: g.policy, Err: ErrLeadExceeded}
		}
	}
	return nil
}

// Stats returns the generator's counters. It costs a few atomic loads and
// never takes the lock.
func (g *Generator) Stats() Stats {
	// withheld first: every ID it counts was claimed before, so is
	// counted in the state loaded after it.
	withheld := g.st.withheld.Load()
	base := g.issuedBase.Load()
	s := g.state.Load()
	var st Stats
	if g.st.issuedAny.Load() {
		st.Issued = uint64(base+int64(s&g.seqMask)+1) - withheld
		st.LastTick = int64((s &^ slowBit) >> g.timeShift)
	}
	st.RewindsWaited = g.st.rewindsWaited.Load()
	st.RewindsLogical = g.st.rewindsLogical.Load()
	st.RewindsRefused = g.st.rewindsRefused.Load()
	st.LastRewindWall = g.st.lastRewindWall.Load()
	st.LastRewindBy = time.Duration(g.st.lastRewindBy.Load())
	st.Exhaustions = g.st.exhaustions.Load()
	st.Refusals = g.st.refusals.Load()
	st.Lead = time.Duration(g.st.lead.Load())
	st.MaxLead = time.Duration(g.st.maxLead.Load())
	st.MarkMs = g.st.markMs.Load()
	st.CheckpointWrites = g.st.cpWrites.Load()
	st.CheckpointErrors = g.st.cpErrors.Load()
	return st
}

// Close stops the generator: later calls fail with ErrClosed. With a
// Checkpoint it then saves the final mark (the last issued tick), so a
// restart waits only until the clock passes what was really issued, not
// the whole reservation; that Save is bounded by MaxWait. Close is
// idempotent; it returns the Save error, wrapped in ErrCheckpoint.
func (g *Generator) Close() error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return nil
	}
	g.mu.closed = true
	// Setting slowBit fails every compare-and-swap begun before it and
	// sends every later call to the slow path, where closed is seen.
	var s uint64
	for {
		s = g.state.Load()
		if g.state.CompareAndSwap(s, s|slowBit) {
			break
		}
	}
	fresh := g.mu.fresh
	g.mu.Unlock()
	if g.cp == nil || fresh {
		return nil
	}
	tick := int64((s &^ slowBit) >> g.timeShift)
	markMs := ceilMs(g.tickStart(tick))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g.maxWait))
	err := g.save(ctx, markMs)
	cancel()
	if err != nil {
		g.st.cpErrors.Add(1)
		if !errors.Is(err, ErrCheckpoint) {
			err = fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		return err
	}
	g.st.cpWrites.Add(1)
	g.st.markMs.Store(markMs)
	return nil
}
