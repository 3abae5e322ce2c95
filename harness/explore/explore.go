// Package explore searches fault schedules nobody wrote: it draws
// scenarios at random from a declared Space, runs them against targets in
// simulated time, and shrinks each failing one to a small scenario that
// still fails the same invariant, written as ordinary scenario YAML that
// `snowchaos run` reproduces.
//
// Schedule i of an exploration seeded with s is drawn from a generator
// seeded with (s, i) alone (Derive), so any one schedule reproduces
// without the others. A run is simulated, hence deterministic: the same
// schedule gives the same verdict, which is what lets shrinking keep a
// change only while the same invariant still fails.
package explore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Options bound and tune an exploration.
type Options struct {
	// Seed seeds every schedule (Derive).
	Seed int64
	// Schedules is how many schedules to draw per target; zero: until the
	// budget runs out.
	Schedules int
	// Budget bounds the exploration's wall time (shrinking not included);
	// zero: none. One of Schedules and Budget must be set.
	Budget time.Duration
	// Targets are the targets each schedule runs against.
	Targets []string
	// Space is what may be drawn.
	Space Space
	// First stops at the first failure found.
	First bool
	// Shrink is how many finds to shrink (the first ones); zero: none.
	Shrink int
	// ShrinkRuns bounds the runs one shrink may make; zero: 400.
	ShrinkRuns int
	// ShrinkBudget bounds one shrink's wall time; zero: none. A shrink cut
	// short keeps the smallest failing schedule found so far.
	ShrinkBudget time.Duration
	// Parallel is how many schedules run at once; zero: one per CPU.
	Parallel int
	// Only, when set, runs these schedules alone (by index).
	Only []int
	// Progress, when set, is called after each schedule.
	Progress func(Progress)
	// StallTimeout is passed to the harness; zero: its default.
	StallTimeout time.Duration
}

// Progress is the state of an exploration while it runs.
type Progress struct {
	Schedules, Runs, Failed, Unknown int
	Elapsed                          time.Duration
}

// Outcome is what one run of one schedule against one target gave.
type Outcome struct {
	// Verdict is the run's verdict (n/a is counted as invalid).
	Verdict harness.Verdict
	// Failed are the failed checks: "expr (observed)".
	Failed []string
	// Key is the subject of the first failed check (its metric, or
	// "calls" for a stalled run): what shrinking must keep failing.
	Key string
	// Why says why a run was unknown or invalid.
	Why string
	// Unconfirmed is true when a check was unknown (a fault not shown to
	// reach its node): such a schedule is no reproduction, whatever else
	// failed.
	Unconfirmed bool
}

// stalled reports whether the run failed because a call never returned:
// the call's goroutine may still be spinning, so no more runs should be
// made in this process.
func (o Outcome) stalled() bool { return o.Key == "calls" }

// Find is a failure explore found.
type Find struct {
	// Index is the schedule's index; Target the target it failed.
	Index  int
	Target string
	// Failed are its failed checks; Key the invariant shrinking keeps.
	Failed []string
	Key    string
	// Original is the schedule drawn; Shrunk the smallest one found that
	// still fails Key (nil when not shrunk), after ShrinkRuns runs.
	Original, Shrunk *Schedule
	ShrinkRuns       int
	// ShrunkFailed are the shrunk schedule's failed checks.
	ShrunkFailed []string
}

// Report is what an exploration did and found.
type Report struct {
	Seed      int64
	Targets   []string
	Schedules int // schedules drawn (per target)
	Runs      int // schedule x target runs
	Passed    int
	Failed    int
	Unknown   int
	Invalid   int // schedules the harness refused (should be none)
	Elapsed   time.Duration
	// Kinds counts the faults drawn of each kind; Combos the schedules
	// with each set of kinds ("restart+step"); Magnitudes the range of
	// each kind's main magnitude.
	Kinds      map[faults.Kind]int
	Combos     map[string]int
	Magnitudes map[faults.Kind]*MagRange
	// UnknownWhy counts the reasons of unknown and invalid runs.
	UnknownWhy map[string]int
	Finds      []*Find
	// Stopped is true when the budget or the context ended it early.
	Stopped bool
	// Stalled is true when a call never returned: the exploration stopped
	// there and shrank nothing.
	Stalled bool
}

// MagRange is the range of one fault kind's magnitude that was covered:
// its shift, span or rate, whichever the kind has.
type MagRange struct {
	Unit string  `json:"unit"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	// Back and Forward count negative and positive shifts or rates.
	Back    int `json:"back"`
	Forward int `json:"forward"`
}

// ExitCode is `run`'s: 0 nothing found, 1 a failure, 2 unknown or
// invalid runs only.
func (r *Report) ExitCode() int {
	switch {
	case r.Failed > 0:
		return 1
	case r.Unknown > 0 || r.Invalid > 0 || r.Runs == 0:
		return 2
	}
	return 0
}

// Run explores: it draws schedules, runs each against every target, and
// shrinks the first finds. It returns an error only for invalid options.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Schedules <= 0 && o.Budget <= 0 && len(o.Only) == 0 {
		return nil, errors.New("explore: give a number of schedules or a budget")
	}
	if len(o.Targets) == 0 {
		return nil, errors.New("explore: no target")
	}
	caps := map[string]Caps{}
	for _, t := range o.Targets {
		c, err := CapsOf(t)
		if err != nil {
			return nil, fmt.Errorf("explore: target %q: %w", t, err)
		}
		if !c.Simulated {
			return nil, fmt.Errorf("explore: target %q runs only in real mode: explore runs simulated targets", t)
		}
		caps[t] = c
	}
	sp := o.Space.WithDefaults()
	rep := &Report{Seed: o.Seed, Targets: o.Targets, Kinds: map[faults.Kind]int{}, Combos: map[string]int{},
		Magnitudes: map[faults.Kind]*MagRange{}, UnknownWhy: map[string]int{}}
	start := time.Now()
	var deadline time.Time
	if o.Budget > 0 {
		deadline = start.Add(o.Budget)
	}
	workers := o.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	hopts := harness.Options{StallTimeout: o.StallTimeout, Parallel: 1}

	type job struct {
		i   int
		tgt string
	}
	type result struct {
		job
		s   *Schedule
		out Outcome
	}
	jobs := make(chan job)
	results := make(chan result)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				s := Generate(Derive(o.Seed, j.i), sp, caps[j.tgt], j.tgt, fmt.Sprintf("explore-%d-%d", o.Seed, j.i))
				results <- result{j, s, RunSchedule(ctx, s, hopts)}
			}
		})
	}
	stop := make(chan struct{})
	var stopOnce sync.Once
	go func() {
		defer close(jobs)
		for n := 0; o.Schedules <= 0 || n < o.Schedules; n++ {
			i := n
			if len(o.Only) > 0 {
				if n >= len(o.Only) {
					return
				}
				i = o.Only[n]
			}
			for _, t := range o.Targets {
				if !deadline.IsZero() && time.Now().After(deadline) {
					return
				}
				select {
				case jobs <- job{i, t}:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var finds []*Find
	seen := map[int]bool{}
	stalled := false
	for r := range results {
		rep.Runs++
		if !seen[r.i] {
			seen[r.i] = true
			rep.Schedules++
			rep.cover(r.s)
		}
		switch r.out.Verdict {
		case harness.Pass:
			rep.Passed++
		case harness.Fail:
			rep.Failed++
			finds = append(finds, &Find{Index: r.i, Target: r.tgt, Failed: r.out.Failed, Key: r.out.Key, Original: r.s})
			if r.out.stalled() {
				// A call that never returned may still hold a goroutine
				// spinning: stop, and shrink nothing.
				stalled = true
				stopOnce.Do(func() { close(stop) })
			}
			if o.First {
				stopOnce.Do(func() { close(stop) })
			}
		case harness.NA, "invalid":
			rep.Invalid++
			rep.UnknownWhy[r.out.Why]++
		default:
			rep.Unknown++
			rep.UnknownWhy[r.out.Why]++
		}
		if o.Progress != nil {
			o.Progress(Progress{Schedules: rep.Schedules, Runs: rep.Runs, Failed: rep.Failed, Unknown: rep.Unknown + rep.Invalid, Elapsed: time.Since(start)})
		}
	}
	rep.Elapsed = time.Since(start)
	rep.Stopped = ctx.Err() != nil || (o.Schedules > 0 && rep.Schedules < o.Schedules && len(o.Only) == 0 && !o.First)
	sort.Slice(finds, func(a, b int) bool {
		if finds[a].Index != finds[b].Index {
			return finds[a].Index < finds[b].Index
		}
		return slices.Index(o.Targets, finds[a].Target) < slices.Index(o.Targets, finds[b].Target)
	})
	if o.First && len(finds) > 1 {
		finds = finds[:1]
	}
	rep.Finds = finds
	rep.Stalled = stalled
	for i, f := range finds {
		if i >= o.Shrink || ctx.Err() != nil || stalled {
			break
		}
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if o.ShrinkBudget > 0 {
			sctx, cancel = context.WithTimeout(ctx, o.ShrinkBudget)
		}
		f.Shrunk, f.ShrinkRuns = Shrink(sctx, f.Original, f.Key, o.ShrinkRuns, hopts)
		cancel()
		f.ShrunkFailed = RunSchedule(ctx, f.Shrunk, hopts).Failed
	}
	return rep, nil
}

// RunSchedule runs schedule s against its target in simulated time.
func RunSchedule(ctx context.Context, s *Schedule, o harness.Options) Outcome {
	sc, err := s.Scenario(s.Name + ".yaml")
	if err != nil {
		return Outcome{Verdict: "invalid", Why: "invalid schedule: " + firstLine(err.Error())}
	}
	o.Mode = scenario.ModeSimulated
	if err := harness.Prepare([]*scenario.Scenario{sc}, o); err != nil {
		return Outcome{Verdict: "invalid", Why: "refused: " + firstLine(err.Error())}
	}
	res := harness.RunOne(ctx, sc, sc.Targets[0], o)
	// An incarnation that never served, an unconfirmed fault: the run
	// has reasons to be unknown, whatever else failed.
	out := Outcome{Verdict: res.Verdict, Unconfirmed: len(res.Unknown) > 0}
	for _, c := range res.Checks {
		if c.Verdict == harness.Unknown {
			out.Unconfirmed = true
		}
		if c.Verdict == harness.Fail && !c.Info {
			out.Failed = append(out.Failed, fmt.Sprintf("%s (%s)", c.Expr, c.Observed))
			if out.Key == "" {
				out.Key = subject(c.Expr)
			}
		}
	}
	switch res.Verdict {
	case harness.Fail:
		if out.Key == "" {
			out.Key = "fail"
		}
	case harness.Pass:
	case harness.NA:
		out.Why = "n/a: " + res.NotApplicable
	default:
		out.Why = firstLine(strings.Join(res.Unknown, "; "))
		if res.Error != "" {
			out.Why = firstLine(res.Error)
		}
		for _, c := range res.Checks {
			if out.Why == "" && c.Verdict == harness.Unknown && c.Reason != "" {
				out.Why = firstLine(c.Reason)
			}
		}
		if out.Why == "" {
			out.Why = "unknown"
		}
	}
	return out
}

// subject is the first word of a check: its metric.
func subject(expr string) string {
	if f := strings.Fields(expr); len(f) > 0 {
		return f[0]
	}
	return expr
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// cover records what schedule s covered.
func (r *Report) cover(s *Schedule) {
	var ks []string
	for _, f := range s.Faults {
		r.Kinds[f.Kind]++
		if !slices.Contains(ks, string(f.Kind)) {
			ks = append(ks, string(f.Kind))
		}
		v, unit := magnitude(f.Fault)
		if unit == "" {
			continue
		}
		m := r.Magnitudes[f.Kind]
		if m == nil {
			m = &MagRange{Unit: unit, Min: abs(v), Max: abs(v)}
			r.Magnitudes[f.Kind] = m
		}
		m.Min, m.Max = min(m.Min, abs(v)), max(m.Max, abs(v))
		if v < 0 {
			m.Back++
		} else {
			m.Forward++
		}
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		ks = []string{"(none)"}
	}
	r.Combos[strings.Join(ks, "+")]++
}

func abs(v float64) float64 { return max(v, -v) }

// magnitude is a fault's main magnitude: seconds of shift or span, or ppm.
func magnitude(f faults.Fault) (float64, string) {
	switch f.Kind {
	case faults.KindStep, faults.KindSmear, faults.KindSlew, faults.KindStoreStep:
		return f.By.Seconds(), "s"
	case faults.KindDrift, faults.KindStoreDrift:
		return f.PPM, "ppm"
	case faults.KindFreeze, faults.KindPause, faults.KindStorePause, faults.KindStoreOutage, faults.KindRestart, faults.KindClone:
		return f.For.Seconds(), "s"
	case faults.KindHandoff:
		return -f.Behind.Seconds(), "s"
	}
	return 0, ""
}
