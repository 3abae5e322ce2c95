package soak

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// series returns 10 minutes of samples every 2 s from incarnations of a
// minute each: rss(inc, age) in MiB, plus up to noise MiB of seeded
// noise, and goroutines(inc, age).
func series(seed uint64, noise float64, rss func(inc int, age time.Duration) float64, gor func(inc int, age time.Duration) int) []Sample {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []Sample
	for at := time.Duration(0); at < 10*time.Minute; at += 2 * time.Second {
		inc, age := int(at/time.Minute), at%time.Minute
		mib := rss(inc, age) + noise*(2*r.Float64()-1)
		out = append(out, Sample{At: at, Age: age, Incarnation: inc, RSS: int64(mib * (1 << 20)), Goroutines: gor(inc, age)})
	}
	return out
}

func steady(int, time.Duration) int { return 14 }

// warmingUp is a process that grows to 30 MiB in its first 10 s.
func warmingUp(_ int, age time.Duration) float64 { return 30 - 20*math.Max(0, 1-age.Seconds()/10) }

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		flat    bool
		why     string
	}{
		{"flat, restarts every minute", series(1, 2, warmingUp, steady), true, ""},
		{"a leak of 12 MiB/min in every process", series(2, 2, func(i int, a time.Duration) float64 { return warmingUp(i, a) + 12*a.Minutes() }, steady),
			false, "within incarnations"},
		{"still warming up at 3.5 MiB/min when killed, as serve", series(9, 1, func(i int, a time.Duration) float64 { return warmingUp(i, a) + 3.5*a.Minutes() }, steady),
			true, ""},
		{"each process 1.5 MiB larger than the last", series(10, 1, func(i int, a time.Duration) float64 { return warmingUp(i, a) + 1.5*float64(i) }, steady),
			false, "from one incarnation to the next"},
		{"each process 5 MiB larger than the last", series(3, 1, func(i int, a time.Duration) float64 { return warmingUp(i, a) + 5*float64(i) }, steady),
			false, "from one incarnation to the next"},
		{"a goroutine leak in the sixth process", series(4, 1, warmingUp, func(i int, a time.Duration) int {
			if i == 5 {
				return 14 + int(a.Seconds()) // one more every second
			}
			return 14
		}), false, "goroutines moved by 28 in incarnation 5"},
		{"the warm-up of every process is left out", series(5, 0, func(_ int, a time.Duration) float64 {
			if a < 15*time.Second {
				return 100 * a.Seconds() // wild while warming up
			}
			return 30
		}, func(_ int, a time.Duration) int {
			if a < 15*time.Second {
				return int(a.Seconds()) * 10
			}
			return 14
		}), true, ""},
		{"too short", series(6, 0, warmingUp, steady)[:70], false, "warm samples"},
	} {
		f := Judge(tc.samples, DefaultLimits)
		if f.Flat != tc.flat || !strings.Contains(strings.Join(f.Why, "; "), tc.why) {
			t.Errorf("%s: flat %v (%v), within %.2f, between %.2f, spread %d; want flat %v, %q", tc.name, f.Flat, f.Why, f.Within, f.Between, f.GoroutineSpread, tc.flat, tc.why)
		}
	}
}

// TestJudgeAgainstReference: with one incarnation the within slope is
// the plain least-squares slope, and with several whose own slopes are
// equal it is that slope whatever their offsets.
func TestJudgeAgainstReference(t *testing.T) {
	l := Limits{MaxWithin: 100, MaxBetween: 100, MaxGoroutineSpread: 100}
	one := series(7, 3, func(_ int, a time.Duration) float64 { return 20 + a.Seconds() }, steady)
	var xs, ys []float64
	for i := range one {
		one[i].Incarnation, one[i].Age = 0, one[i].At
		xs, ys = append(xs, one[i].At.Minutes()), append(ys, float64(one[i].RSS)/(1<<20))
	}
	if f := Judge(one, l); math.Abs(f.Within-slope(xs, ys)) > 1e-9 || !math.IsNaN(f.Between) {
		t.Errorf("one incarnation: within %v, plain slope %v, between %v", f.Within, slope(xs, ys), f.Between)
	}
	shifted := series(8, 0, func(i int, a time.Duration) float64 { return 50*float64(i%3) + 3*a.Minutes() }, steady)
	if f := Judge(shifted, l); math.Abs(f.Within-3) > 1e-6 {
		t.Errorf("offset incarnations of slope 3 MiB/min: within %v", f.Within)
	}
}
