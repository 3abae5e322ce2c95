package generator

import (
	"cmp"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// precise is the process's one precise timer: a timer file (timerfd on
// CLOCK_MONOTONIC, non-blocking, so the runtime's network poller waits on
// it) armed for the earliest deadline of the goroutines sleeping on it,
// and one goroutine that reads it and wakes them. However many goroutines
// wait, the process holds one file descriptor, no thread blocks, nothing
// spins, and the kernel's high-resolution timer, which has no timer slack,
// ends each wait.
var precise preciseTimer

type preciseTimer struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File // nil: no timer file (the system refused one)
	rc   syscall.RawConn
	// armed is the deadline (monotonic ns, see monoNow) the file is armed
	// for; 0 when disarmed.
	armed int64
	// waiters are the sleepers, latest deadline first.
	waiters []*sleeper
}

// sleeper is one goroutine's wait. wake is buffered, so the timer
// goroutine never blocks on a sleeper that gave up.
type sleeper struct {
	deadline int64
	wake     chan bool   // true: the deadline passed; false: the timer broke
	backstop *time.Timer // stopped while the sleeper is idle
}

// insertLocked adds s to the waiters, which are kept latest deadline
// first, so the next to wake is the last.
func (t *preciseTimer) insertLocked(s *sleeper) {
	i, _ := slices.BinarySearchFunc(t.waiters, s.deadline, func(w *sleeper, d int64) int { return cmp.Compare(d, w.deadline) })
	t.waiters = slices.Insert(t.waiters, i, s)
}

// sleepers recycles sleepers whose wait ended normally.
var sleepers = sync.Pool{New: func() any {
	s := &sleeper{wake: make(chan bool, 1), backstop: time.NewTimer(time.Hour)}
	s.backstop.Stop()
	return s
}}

// backstopLate is how long past its deadline a sleeper waits for the
// timer goroutine before it stops waiting on its own (a runtime timer):
// the bound on a wait should the precise timer ever fail to fire.
const backstopLate = 20 * time.Millisecond

// open creates the timer file and starts the goroutine that reads it.
func (t *preciseTimer) open() {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return
	}
	f := os.NewFile(fd, "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return
	}
	t.f, t.rc = f, rc
	go t.run()
}

// itimerspec is struct itimerspec of timerfd_settime(2).
type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

// armLocked arms the file to expire at deadline (relative to now), or
// reports false when the system refuses.
func (t *preciseTimer) armLocked(deadline, now int64) bool {
	spec := itimerspec{value: syscall.NsecToTimespec(max(deadline-now, 1))}
	var errno syscall.Errno
	err := t.rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	})
	if err != nil || errno != 0 {
		return false
	}
	t.armed = deadline
	return true
}

// run reads the timer file (parking in the poller until it expires) and
// wakes every sleeper whose deadline has passed, for the life of the
// process. If the file fails, it wakes every sleeper with false and the
// timer is no longer used.
func (t *preciseTimer) run() {
	var buf [8]byte
	for {
		_, err := t.f.Read(buf[:])
		now := monoNow()
		t.mu.Lock()
		if err != nil {
			t.failLocked()
			t.mu.Unlock()
			return
		}
		for k := len(t.waiters) - 1; k >= 0 && t.waiters[k].deadline <= now; k-- {
			t.waiters[k].wake <- true
			t.waiters[k] = nil
			t.waiters = t.waiters[:k]
		}
		t.armed = 0
		if k := len(t.waiters) - 1; k >= 0 && !t.armLocked(t.waiters[k].deadline, now) {
			t.failLocked()
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
}

// failLocked retires the timer: every sleeper wakes with false and the
// file is closed.
func (t *preciseTimer) failLocked() {
	for _, s := range t.waiters {
		s.wake <- false
	}
	t.waiters = nil
	t.rc = nil
	_ = t.f.Close()
}

// timerSleep parks the calling goroutine, not its thread, until d has
// passed, on the process's precise timer. It reports false, having slept
// less than d or not at all, when the timer is not to be had (no timer
// file, or it failed); the caller then sleeps another way.
func timerSleep(d time.Duration) bool { return precise.sleep(d) }

// sleep is timerSleep on t.
func (t *preciseTimer) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t.once.Do(t.open)
	s := sleepers.Get().(*sleeper)
	now := monoNow()
	deadline := now + int64(d)
	s.deadline = deadline
	t.mu.Lock()
	if t.rc == nil || (t.armed == 0 || deadline < t.armed) && !t.armLocked(deadline, now) {
		t.mu.Unlock()
		sleepers.Put(s)
		return false
	}
	t.insertLocked(s)
	t.mu.Unlock()
	s.backstop.Reset(d + backstopLate)
	select {
	case ok := <-s.wake:
		s.backstop.Stop()
		sleepers.Put(s)
		return ok && monoNow() >= deadline
	case <-s.backstop.C:
		// The timer goroutine still holds s and will send to its buffered
		// channel; s is left to the garbage collector.
		return true
	}
}
