package generator

import (
	"sync"
	"testing"
	"time"
)

// TestTimerSleep: on Linux the system clock's sleep is a timer file; it
// never returns early, from many goroutines at once (each takes its own
// file from the pool), and a sleep of 1 ns or less is served too.
func TestTimerSleep(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				d := time.Duration(g*37+i*101) * time.Microsecond
				start := time.Now()
				if !timerSleep(d) {
					errs <- "no timer file"
					return
				}
				if got := time.Since(start); got < d {
					errs <- "slept " + got.String() + " of " + d.String()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, d := range []time.Duration{-time.Second, 0, 1} {
		if !timerSleep(d) {
			t.Errorf("timerSleep(%v) found no timer file", d)
		}
	}
}

// TestPreciseTimerFails: when the timer file fails, a goroutine sleeping
// on it wakes at once with false (its caller sleeps another way), and
// later sleeps report false without waiting.
func TestPreciseTimerFails(t *testing.T) {
	var pt preciseTimer
	pt.once.Do(pt.open)
	if pt.f == nil {
		t.Fatal("no timer file")
	}
	res := make(chan bool)
	start := time.Now()
	go func() { res <- pt.sleep(10 * time.Second) }()
	for {
		pt.mu.Lock()
		n := len(pt.waiters)
		pt.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = pt.f.Close()
	select {
	case ok := <-res:
		if ok {
			t.Error("a sleep cut short by the failure reported true")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sleeper did not wake when the timer failed")
	}
	if pt.sleep(time.Second) {
		t.Error("a sleep on a failed timer reported true")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestBatchWaitersNotStarved: four goroutines each asking for a whole
// tick's worth of IDs (4,096) at once, on the system clock, for 3 s: with
// the wait queue each is served in its turn, so none runs into its
// 1-second wait bound. Before the queue, a call that woke a little late
// lost its tick to a later one again and again: 9 of about 4,600 calls
// failed after 1 s in 8 s (calls waiting 72 ms to 1 s; measured with
// the precise timer, GOMAXPROCS 1).
func TestBatchWaitersNotStarved(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s on the real clock")
	}
	g := mustNew(t, Settings{Node: 1, MaxWait: time.Second})
	var mu sync.Mutex
	var worst time.Duration
	calls := 0
	var wg sync.WaitGroup
	end := time.Now().Add(3 * time.Second)
	for range 4 {
		wg.Go(func() {
			dst := make([]ID, 4096)
			for time.Now().Before(end) {
				start := time.Now()
				n, err := g.NextN(dst)
				d := time.Since(start)
				mu.Lock()
				worst, calls = max(worst, d), calls+1
				mu.Unlock()
				if err != nil || n != len(dst) {
					t.Errorf("NextN = %d, %v after %v", n, err, d)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls, longest %v", calls, worst)
	// Four calls a tick apart wait about 4 ms; half a second is only
	// reached by a call overtaken hundreds of times.
	if worst > 500*time.Millisecond {
		t.Errorf("a call waited %v", worst)
	}
}

// TestPreciseTimerOrder: the waiters stay latest deadline first, ties in
// any order, so run wakes from the end every sleeper whose time has come.
func TestPreciseTimerOrder(t *testing.T) {
	var pt preciseTimer
	for i, d := range []int64{5, 1, 9, 5, 3, 9, 0, 7} {
		pt.insertLocked(&sleeper{deadline: d})
		for k := 1; k < len(pt.waiters); k++ {
			if pt.waiters[k-1].deadline < pt.waiters[k].deadline {
				t.Fatalf("after %d inserts: deadlines %d before %d", i+1, pt.waiters[k-1].deadline, pt.waiters[k].deadline)
			}
		}
	}
}
