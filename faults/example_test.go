package faults_test

import (
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// A leap second on a simulated clock: at midnight the wall steps back and
// 23:59:59 repeats, while the monotonic reading carries on.
func ExampleClock_Leap() {
	base := faults.NewVirtual(time.Date(2016, 12, 31, 23, 59, 58, 0, time.UTC), true)
	clk := faults.New(base)
	clk.Leap(time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC))
	for range 7 {
		wall, mono := clk.Now()
		fmt.Println(time.Unix(0, wall).UTC().Format("15:04:05.0"), time.Duration(mono))
		clk.Sleep(500 * time.Millisecond)
	}
	fmt.Println("offset", clk.Offset())
	// Output:
	// 23:59:58.0 0s
	// 23:59:58.5 500ms
	// 23:59:59.0 1s
	// 23:59:59.5 1.5s
	// 23:59:59.0 2s
	// 23:59:59.5 2.5s
	// 00:00:00.0 3s
	// offset -1s
}

// A VM pause: both readings stand still, then the wall catches up with the
// base while the monotonic clock keeps the time it lost.
func ExampleClock_Pause() {
	base := faults.NewVirtual(time.Unix(0, 0), true)
	clk := faults.New(base)
	clk.Pause(2 * time.Second)
	for range 4 {
		wall, mono := clk.Now()
		fmt.Println(time.Duration(wall), time.Duration(mono))
		base.Advance(time.Second)
	}
	fmt.Println("mono offset", clk.MonoOffset())
	// Output:
	// 0s 0s
	// 0s 0s
	// 2s 0s
	// 3s 1s
	// mono offset -2s
}

// A manual virtual clock: a test advances time only once the code under
// test is blocked in Sleep.
func ExampleVirtual_BlockUntilWaiters() {
	v := faults.NewVirtual(time.Unix(0, 0), false)
	done := make(chan struct{})
	go func() {
		v.Sleep(time.Minute)
		close(done)
	}()
	if v.BlockUntilWaiters(1, 10*time.Second) {
		v.Advance(time.Minute)
	}
	<-done
	fmt.Println(v.Elapsed(), v.Waiters())
	// Output: 1m0s 0
}
