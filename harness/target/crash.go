package target

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// CrashPointer is implemented by nodes whose host can crash at a point
// inside a call (faults.CrashPoints: a moment of the checkpoint's write of
// a new mark, mid-batch, or a call that issued in a new tick and has not
// answered), placed exactly in simulated mode.
//
// What a crash loses is modelled as a killed process loses it: a mark
// written but not synced is lost, a synced one stays; the call that
// reached the point never answers (its IDs were never handed out); the
// requests in flight at that moment were served and answered first.
type CrashPointer interface {
	// ArmCrash makes the node crash the first time a call reaches point
	// (until the next Stop or Start). At the crash, before the node dies,
	// inFlight is called once to serve the requests in flight at that
	// moment (through Issue, with a context that allows no waiting); then
	// the call that reached the point fails with ErrCrashed and every
	// later call with ErrStopped, until Stop and Start.
	ArmCrash(point string, inFlight func()) error
	// Crashed reports whether an armed crash has struck.
	Crashed() bool
}

// ErrCrashed: the node crashed at an armed point during the call; the
// call's IDs were never handed out.
var ErrCrashed = errors.New("target: node crashed during the call")

// errDead is what the disk answers a write from a process that crashed.
var errDead = errors.New("target: the process crashed before the write")

// crashState is a node's armed crash point and the call it watches.
type crashState struct {
	// watch is set from arm to reset: while it is clear (every run
	// without crash points) a call pays one atomic load, no lock.
	watch    atomic.Bool
	mu       sync.Mutex
	point    string // armed point; "" when none
	inFlight func()
	struck   bool
	depth    int    // calls in progress (a crash strikes only inside one)
	batch    bool   // the outermost call asks for more than one ID
	issued   uint64 // the generator's issued count when it began
	tick     int64  // the generator's last issued tick when it began
	stats    func() generator.Stats
}

// arm sets the point.
func (c *crashState) arm(point string, inFlight func()) error {
	if !slices.Contains(faults.CrashPoints(), point) {
		return fmt.Errorf("%w: crash point %q (known: %v)", ErrUnsupported, point, faults.CrashPoints())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.point, c.inFlight, c.struck = point, inFlight, false
	c.watch.Store(true)
	return nil
}

// reset disarms the point (a stop or start: a new process).
func (c *crashState) reset() {
	c.mu.Lock()
	c.point, c.inFlight, c.struck, c.depth = "", nil, false, 0
	c.watch.Store(false)
	c.mu.Unlock()
}

// dead reports whether the crash has struck.
func (c *crashState) dead() bool {
	if !c.watch.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.struck
}

// Call tokens: how enter saw a call.
const (
	untracked = iota // nothing armed when it began
	outermost        // the call a crash point watches
	nested           // a request in flight, served inside it
)

// enter notes a call of n IDs beginning; stats reads the generator's
// counters (nil: none). Its token goes to leave.
func (c *crashState) enter(n int, stats func() generator.Stats) int {
	if !c.watch.Load() {
		return untracked
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.depth++
	if c.depth > 1 {
		return nested
	}
	if c.point == "" {
		return outermost
	}
	c.batch, c.stats = n > 1, stats
	if stats != nil {
		st := stats()
		c.issued, c.tick = st.Issued, st.LastTick
	}
	return outermost
}

// answered is called when the outermost call has its IDs and is about to
// answer: a crash armed at new_tick strikes now if the call issued in a
// tick later than the last one before it.
func (c *crashState) answered() {
	c.mu.Lock()
	hit := c.point == faults.PointNewTick && c.stats != nil && !c.struck
	if hit {
		st := c.stats()
		hit = st.Issued > c.issued && st.LastTick > c.tick
	}
	c.mu.Unlock()
	if hit {
		c.strike()
	}
}

// leave notes the end of the call enter gave tok; it reports whether the
// crash struck during an outermost call (whose answer is then lost).
func (c *crashState) leave(tok int) bool {
	if tok == untracked {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.depth = max(c.depth-1, 0)
	return tok == outermost && c.struck
}

// reach is called by the host's disk at point p of a write; it reports
// whether the process is dead from now on (the disk then stops). The
// crash strikes at the armed point inside a call: mid_batch at a write's
// start once the call's batch has taken IDs.
func (c *crashState) reach(p string) bool {
	c.mu.Lock()
	if c.struck {
		c.mu.Unlock()
		return true
	}
	hit := c.depth > 0 && c.point != "" && (c.point == p ||
		(c.point == faults.PointMidBatch && p == faults.PointBeforeWrite && c.batch && c.stats != nil && c.stats().Issued > c.issued))
	c.mu.Unlock()
	if !hit {
		return false
	}
	c.strike()
	return true
}

// strike serves the requests in flight, then kills the process.
func (c *crashState) strike() {
	c.mu.Lock()
	f := c.inFlight
	c.point, c.inFlight = "", nil
	c.mu.Unlock()
	if f != nil {
		f() // the requests in flight are answered before the process dies
	}
	c.mu.Lock()
	c.struck = true
	c.mu.Unlock()
}
