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
