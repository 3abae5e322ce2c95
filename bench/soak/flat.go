package soak

import (
	"fmt"
	"math"
	"time"
)

// Sample is one reading of the serve process, taken every SampleEvery.
type Sample struct {
	// At is the time since the soak started; Age since the incarnation
	// (the serve process being read) started.
	At, Age time.Duration
	// Incarnation counts the serve processes: 0 for the first, +1 for
	// each kill -9 restart.
	Incarnation int
	// RSS is the process's resident set (VmRSS), in bytes.
	RSS int64
	// Goroutines is its go_goroutines gauge; -1 when /metrics did not
	// answer (the reading is left out of the goroutine spread).
	Goroutines int
}

// Limits say what "flat" means. A sample counts once the soak has run
// WarmSoak and its incarnation WarmIncarnation (the heap, connection pools
// and caches of a fresh process grow while it warms up).
type Limits struct {
	WarmSoak, WarmIncarnation time.Duration
	// MaxWithin bounds the RSS slope within incarnations, MiB per minute:
	// a leak in the running process. A process killed after a minute is
	// still warming up (its heap grows towards its steady size), so this
	// catches gross leaks only.
	MaxWithin float64
	// MaxBetween bounds, in MiB per minute, the slope of the
	// incarnations' mean RSS (over the same ages of each) across the
	// soak: state that grows across restarts (the checkpoint, the lease
	// table, the store) or a leak that warm-up hides within a minute.
	MaxBetween float64
	// MaxGoroutineSpread bounds, within each incarnation, the largest
	// go_goroutines reading less the smallest.
	MaxGoroutineSpread int
	// MinSamples is the fewest warm samples a verdict needs.
	MinSamples int
}

// DefaultLimits, from a restart-free run of the soak's load (5 minutes,
// docs/soak.md): serve's RSS rises from 26 to 33 MiB in its first 40 s,
// then by 1.5 MiB over the next two minutes (2-4 MiB/min between 30 s
// and 60 s of age), then stays within 0.5 MiB (+0.06 MiB/min). So, on
// the samples after 2 minutes of the soak and 30 s of their process: the
// incarnations' mean RSS may grow by at most 1 MiB per minute of the soak
// (8 MiB over a 10-minute soak), a process's RSS by at most 8 MiB per
// minute (twice its warm-up), and the goroutine count within a process
// may move by at most 20 (the load's connections are fixed; the lease
// store's reconnections and the admin API's requests come and go).
var DefaultLimits = Limits{WarmSoak: 2 * time.Minute, WarmIncarnation: 30 * time.Second, MaxWithin: 8, MaxBetween: 1, MaxGoroutineSpread: 20, MinSamples: 20}

// Flatness is what the warm samples show.
type Flatness struct {
	// Samples is how many samples were warm; Incarnations how many
	// processes they came from.
	Samples, Incarnations int
	// Within is the RSS slope within incarnations, MiB per minute: the
	// least-squares slope of one line per incarnation sharing a slope
	// (each incarnation's own intercept), so that a restart's drop is no
	// trend.
	Within float64
	// Between is the least-squares slope, MiB per minute, of each
	// incarnation's mean warm RSS against the mean time of its samples
	// (NaN with fewer than two incarnations).
	Between float64
	// MaxRSS is the largest warm RSS, in bytes.
	MaxRSS int64
	// GoroutineSpread is the largest, over incarnations, of max - min of
	// the warm go_goroutines readings; SpreadIncarnation is which.
	GoroutineSpread, SpreadIncarnation int
	// Flat is the verdict; Why says what broke it.
	Flat bool
	Why  []string
}

// Judge computes the flatness of samples against l.
func Judge(samples []Sample, l Limits) Flatness {
	type acc struct {
		n          int
		st, sr     float64 // sums of t (minutes) and RSS (MiB)
		ts, rs     []float64
		gmin, gmax int
		haveG      bool
	}
	byInc := map[int]*acc{}
	var order []int
	f := Flatness{Within: math.NaN(), Between: math.NaN()}
	for _, s := range samples {
		if s.At < l.WarmSoak || s.Age < l.WarmIncarnation {
			continue
		}
		a := byInc[s.Incarnation]
		if a == nil {
			a = &acc{}
			byInc[s.Incarnation] = a
			order = append(order, s.Incarnation)
		}
		t, r := s.At.Minutes(), float64(s.RSS)/(1<<20)
		a.n++
		a.st += t
		a.sr += r
		a.ts = append(a.ts, t)
		a.rs = append(a.rs, r)
		if s.Goroutines >= 0 {
			if !a.haveG {
				a.gmin, a.gmax, a.haveG = s.Goroutines, s.Goroutines, true
			}
			a.gmin, a.gmax = min(a.gmin, s.Goroutines), max(a.gmax, s.Goroutines)
		}
		f.Samples++
		f.MaxRSS = max(f.MaxRSS, s.RSS)
	}
	f.Incarnations = len(order)
	// Within: sum over incarnations of (t - mean t)(r - mean r) over
	// sum of (t - mean t)^2.
	var sxy, sxx float64
	var mt, mr []float64
	for _, inc := range order {
		a := byInc[inc]
		ct, cr := a.st/float64(a.n), a.sr/float64(a.n)
		for i := range a.ts {
			sxy += (a.ts[i] - ct) * (a.rs[i] - cr)
			sxx += (a.ts[i] - ct) * (a.ts[i] - ct)
		}
		mt, mr = append(mt, ct), append(mr, cr)
		if a.haveG && a.gmax-a.gmin > f.GoroutineSpread {
			f.GoroutineSpread, f.SpreadIncarnation = a.gmax-a.gmin, inc
		}
	}
	if sxx > 0 {
		f.Within = sxy / sxx
	}
	f.Between = slope(mt, mr)
	switch {
	case f.Samples < l.MinSamples:
		f.Why = append(f.Why, fmt.Sprintf("only %d warm samples (want %d): run longer", f.Samples, l.MinSamples))
	case math.IsNaN(f.Within):
		f.Why = append(f.Why, "no incarnation has two warm samples at different times")
	case f.Within > l.MaxWithin:
		f.Why = append(f.Why, fmt.Sprintf("RSS grows by %.2f MiB/min within incarnations (limit %g)", f.Within, l.MaxWithin))
	}
	if !math.IsNaN(f.Between) && f.Between > l.MaxBetween {
		f.Why = append(f.Why, fmt.Sprintf("RSS grows by %.2f MiB/min from one incarnation to the next (limit %g)", f.Between, l.MaxBetween))
	}
	if f.GoroutineSpread > l.MaxGoroutineSpread {
		f.Why = append(f.Why, fmt.Sprintf("goroutines moved by %d in incarnation %d (limit %d)", f.GoroutineSpread, f.SpreadIncarnation, l.MaxGoroutineSpread))
	}
	f.Flat = len(f.Why) == 0
	return f
}

// slope is the least-squares slope of ys against xs; NaN with fewer
// than two distinct xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 {
		return math.NaN()
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}
