package faults

import (
	"container/heap"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Virtual is a generator.Clock whose time moves only when advanced, for
// deterministic simulation. Its monotonic reading is the virtual time
// elapsed since NewVirtual (0 at start) and its wall reading is the start
// instant plus that; virtual time never goes backwards (wrap it in a Clock to
// fault the wall). It reads no real clock and never sleeps for real. It is
// safe for concurrent use.
//
// In auto mode Sleep(d) advances virtual time by d and returns at once, so a
// single-threaded simulation never blocks. In manual mode Sleep(d) blocks
// until Advance carries virtual time past now+d, which may be never: unlike
// generator.Clock's real clocks, a manual Virtual bounds no sleep in real
// time. Tests step time only once the code under test is blocked, which
// Waiters and BlockUntilWaiters report.
type Virtual struct {
	start int64 // wall at mono 0, Unix ns
	auto  bool

	mu struct {
		sync.Mutex
		now      int64       // virtual mono, ns
		seq      uint64      // sleepers so far, for FIFO ties
		sleepers sleeperHeap // manual-mode sleepers, earliest deadline first
		changed  chan struct{}
		onWake   func(deadline int64, seq uint64) // test hook, called under mu
	}
}

// sleeper is one goroutine blocked in a manual-mode Sleep.
type sleeper struct {
	deadline int64 // virtual mono
	seq      uint64
	wake     chan struct{}
}

// sleeperHeap orders sleepers by deadline, then arrival.
type sleeperHeap []*sleeper

func (h sleeperHeap) Len() int { return len(h) }
func (h sleeperHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].seq < h[j].seq
}
func (h sleeperHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sleeperHeap) Push(x any)   { *h = append(*h, x.(*sleeper)) }
func (h *sleeperHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}

var _ generator.Clock = (*Virtual)(nil)

// NewVirtual returns a virtual clock whose wall reads start (a zero start
// means the Unix epoch) and whose monotonic clock reads 0. auto selects
// auto mode (Sleep advances time) over manual mode (Sleep waits for
// Advance).
func NewVirtual(start time.Time, auto bool) *Virtual {
	var s int64
	if !start.IsZero() {
		s = start.UnixNano()
	}
	v := &Virtual{start: s, auto: auto}
	v.mu.changed = make(chan struct{})
	return v
}

// Now returns the virtual wall (Unix ns) and monotonic readings.
func (v *Virtual) Now() (wall, mono int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return satAdd(v.start, v.mu.now), v.mu.now
}

// Auto reports whether the clock is in auto mode.
func (v *Virtual) Auto() bool { return v.auto }

// Elapsed returns the virtual time elapsed since NewVirtual.
func (v *Virtual) Elapsed() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return time.Duration(v.mu.now)
}

// Sleep waits for d of virtual time; d <= 0 returns at once. In auto mode
// it advances virtual time by d (waking any sleepers that passes) and
// returns at once. In manual mode it counts as a waiter and blocks until
// Advance reaches its deadline.
func (v *Virtual) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	v.mu.Lock()
	if v.auto {
		v.advanceLocked(int64(d))
		v.mu.Unlock()
		return
	}
	v.mu.seq++
	s := &sleeper{deadline: satAdd(v.mu.now, int64(d)), seq: v.mu.seq, wake: make(chan struct{})}
	heap.Push(&v.mu.sleepers, s)
	v.notifyLocked()
	v.mu.Unlock()
	<-s.wake
}

// Advance moves virtual time forward by d (d <= 0 does nothing) and wakes
// every sleeper whose deadline it reaches, earliest deadline first and, on
// equal deadlines, in the order they began to sleep. Woken sleepers are no
// longer counted by Waiters when Advance returns; they observe the new time.
func (v *Virtual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.advanceLocked(int64(d))
}

// AdvanceToNext moves virtual time to the earliest sleeper's deadline and
// wakes the sleepers due then, returning how far time moved; with no
// sleepers it does nothing and returns false.
func (v *Virtual) AdvanceToNext() (time.Duration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.mu.sleepers) == 0 {
		return 0, false
	}
	d := max(v.mu.sleepers[0].deadline-v.mu.now, 0)
	v.advanceLocked(d)
	return time.Duration(d), true
}

// Waiters returns how many goroutines are blocked in a manual-mode Sleep.
func (v *Virtual) Waiters() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.mu.sleepers)
}

// BlockUntilWaiters waits until at least n goroutines are blocked in Sleep
// and reports whether they are; it gives up after timeout measured on the
// real monotonic clock (a timer), the one place this package uses real
// time. timeout <= 0 checks once without waiting.
func (v *Virtual) BlockUntilWaiters(n int, timeout time.Duration) bool {
	v.mu.Lock()
	if len(v.mu.sleepers) >= n {
		v.mu.Unlock()
		return true
	}
	ch := v.mu.changed
	v.mu.Unlock()
	if timeout <= 0 {
		return false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ch:
		case <-t.C:
			return v.Waiters() >= n
		}
		v.mu.Lock()
		if len(v.mu.sleepers) >= n {
			v.mu.Unlock()
			return true
		}
		ch = v.mu.changed
		v.mu.Unlock()
	}
}

// advanceLocked moves time forward by d >= 0 and wakes the sleepers due.
func (v *Virtual) advanceLocked(d int64) {
	v.mu.now = satAdd(v.mu.now, d)
	woke := false
	for len(v.mu.sleepers) > 0 && v.mu.sleepers[0].deadline <= v.mu.now {
		s := heap.Pop(&v.mu.sleepers).(*sleeper)
		if v.mu.onWake != nil {
			v.mu.onWake(s.deadline, s.seq)
		}
		close(s.wake)
		woke = true
	}
	if woke {
		v.notifyLocked()
	}
}

// notifyLocked wakes BlockUntilWaiters callers to recount.
func (v *Virtual) notifyLocked() {
	close(v.mu.changed)
	v.mu.changed = make(chan struct{})
}
