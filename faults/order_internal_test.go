package faults

import (
	"slices"
	"testing"
	"time"
)

// TestVirtualWakeOrder checks that one Advance wakes sleepers earliest
// deadline first and, on equal deadlines, in arrival order.
func TestVirtualWakeOrder(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0), false)
	type wake struct {
		deadline int64
		seq      uint64
	}
	var order []wake
	v.mu.Lock()
	v.mu.onWake = func(d int64, s uint64) { order = append(order, wake{d, s}) }
	v.mu.Unlock()
	durs := []time.Duration{5, 3, 5, 1, 3, 5} // arrival order = seq 1..6
	done := make(chan struct{})
	for i, d := range durs {
		go func() { v.Sleep(d); done <- struct{}{} }()
		if !v.BlockUntilWaiters(i+1, 10*time.Second) {
			t.Fatalf("sleeper %d never blocked", i)
		}
	}
	v.Advance(10)
	for range durs {
		<-done
	}
	want := []wake{{1, 4}, {3, 2}, {3, 5}, {5, 1}, {5, 3}, {5, 6}}
	if !slices.Equal(order, want) {
		t.Fatalf("wake order %v, want %v", order, want)
	}
}

func TestMulDiv(t *testing.T) {
	const max = 1<<63 - 1
	tests := []struct{ a, b, c, want int64 }{
		{0, 5, 3, 0},
		{7, 3, 2, 10},
		{-7, 3, 2, -10},
		{7, -3, 2, -10},
		{-7, -3, 2, 10},
		{86_400_000_000_000, 1_000_000_000, 86_400_000_000_000, 1_000_000_000}, // product overflows int64
		{-1_000_000_000, 1, 3, -333333333},
		{max, max, 1, max}, // saturates
		{-max, max, 1, -max},
		{-1 << 63, 1, 1, -max},
	}
	for _, tt := range tests {
		if got := mulDiv(tt.a, tt.b, tt.c); got != tt.want {
			t.Errorf("mulDiv(%d, %d, %d) = %d, want %d", tt.a, tt.b, tt.c, got, tt.want)
		}
	}
}

func TestPPB(t *testing.T) {
	tests := []struct {
		ppm    float64
		lo, hi int64
		want   int64
	}{
		{500, 1, billion, 500_000},
		{12.3456, 1, billion, 12_346},
		{0.0001, 1, billion, 1},
		{2e6, 1, billion, billion},
		{-2e6, -billion, billion, -billion},
	}
	for _, tt := range tests {
		if got := ppb(tt.ppm, tt.lo, tt.hi); got != tt.want {
			t.Errorf("ppb(%v) = %d, want %d", tt.ppm, got, tt.want)
		}
	}
}
