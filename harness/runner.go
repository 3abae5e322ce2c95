// Package harness runs scenario scripts against targets and decides, per
// invariant, pass, fail or unknown.
//
// A run puts one scenario's nodes, built by one target, under the
// scenario's load and timed faults, feeds every request to the verify
// package's Verifier as it is answered, confirms that each fault took
// effect by reading the node's clock offset, and evaluates the scenario's
// invariants and expectations. Run runs a whole suite (every scenario
// against every target it lists) and returns a Report; the report package
// renders it.
//
// Simulated mode (the default) runs on virtual time with a discrete-event
// scheduler (see sim.go): deterministic, so the same seed and scenario
// give the same Report, and fast, because quiet periods are sampled (see
// plan). Real mode runs on the wall clock with real goroutines.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/telemetry"
)

// Options tunes a suite run. The zero value runs every scenario against
// every target it lists, in each scenario's own mode.
type Options struct {
	// Mode, when set, overrides every scenario's mode.
	Mode scenario.Mode
	// Seed, when non-nil, overrides every scenario's seed.
	Seed *int64
	// SeedOffset is added to every scenario's seed (after Seed): the i-th
	// repetition of a suite runs with offset i.
	SeedOffset int64
	// Targets, when non-empty, runs only the targets with these names.
	Targets []string
	// FailFast stops a run at its first duplicate (unless the target is
	// expected to issue duplicates) and the suite at its first failed run.
	FailFast bool
	// History, when set, receives an NDJSON line per request (see
	// historyWriter), run after run in suite order.
	History io.Writer
	// HistoryGzip compresses History: one gzip member per run, together
	// one gzip stream.
	HistoryGzip bool
	// Timeline collects the per-bucket series the HTML report plots.
	Timeline bool
	// Progress, when set, receives live snapshots; it is called from the
	// runs' goroutines and must be safe for concurrent use.
	Progress func(Progress)
	// Metrics, when set, receives the snowchaos_* series; runs then go one
	// at a time so the series describe one run.
	Metrics *metrics.Collector
	// Generators, when set, receives the snowflake_* series of in-process
	// generator nodes while they run.
	Generators *telemetry.GeneratorCollector
	// Parallel bounds the simulated runs at once; zero means GOMAXPROCS.
	// Real-mode runs always go one at a time.
	Parallel int
	// AllowNA opts every target in to the n/a outcome (as not_applicable:
	// ok does for one): a target that cannot take a scenario is reported
	// n/a with the reason instead of the suite being rejected. A scenario
	// no target can take is still an error.
	AllowNA bool
	// Calibration, for real-mode runs, is the machine's measured jitter
	// whose tolerance widens timing bounds. Run measures it (Calibrate)
	// before the first real-mode run when it is nil; tests set it.
	Calibration *Calibration
	// StallTimeout fails a run whose driver has made no progress for this
	// long of wall time once its nodes are up: a call into the target
	// that never returns (a generator that loops or blocks without
	// bound). Zero means DefaultStallTimeout.
	StallTimeout time.Duration
}

// DefaultStallTimeout is Options.StallTimeout's default: far beyond any
// bounded call (the longest MaxWait a scenario may set is a minute).
const DefaultStallTimeout = 2 * time.Minute

// stallTeardown bounds each step of a stalled run's teardown: closing its
// nodes, then waiting for the driver to return.
const stallTeardown = 10 * time.Second

// stallTimeout returns StallTimeout with its default.
func (o *Options) stallTimeout() time.Duration {
	if o.StallTimeout > 0 {
		return o.StallTimeout
	}
	return DefaultStallTimeout
}

// Prepare validates the suite against the options: every target exists
// and can run its scenario in the chosen mode, or is opted in to n/a (see
// Options.AllowNA). Errors name file and line.
func Prepare(suite []*scenario.Scenario, o Options) error {
	var errs []error
	names := map[string]string{}
	for _, s := range suite {
		if prev, dup := names[s.Name]; dup {
			errs = append(errs, &scenario.Error{File: s.File, Line: s.Line, Key: "name", Msg: fmt.Sprintf("scenario %q is also defined in %s", s.Name, prev)})
		}
		names[s.Name] = s.File
		if err := validate(s, o.modeOf(s), o.AllowNA); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// modeOf is the mode scenario s runs in under the options.
func (o *Options) modeOf(s *scenario.Scenario) scenario.Mode {
	if o.Mode != "" {
		return o.Mode
	}
	return s.Mode
}

// seedOf is the seed scenario s runs with under the options.
func (o *Options) seedOf(s *scenario.Scenario) int64 {
	if o.Seed != nil {
		return *o.Seed + o.SeedOffset
	}
	return s.Seed + o.SeedOffset
}

// job is one scenario x target run of a suite, resolved once: its mode
// and seed (the options' overrides applied) and its bound target.
type job struct {
	si   int
	s    *scenario.Scenario
	b    binding
	err  error // the target did not bind (Prepare reports it)
	mode scenario.Mode
	seed int64
	res  *Result
	hist *os.File
}

// newJob resolves scenario s's target t under the options.
func newJob(s *scenario.Scenario, t scenario.Target, o *Options) *job {
	b, err := bind(t)
	if err != nil {
		b.t = t
	}
	return &job{s: s, b: b, err: err, mode: o.modeOf(s), seed: o.seedOf(s)}
}

// wanted reports whether the target passes the options' filter.
func (o *Options) wanted(name string) bool {
	return len(o.Targets) == 0 || slices.Contains(o.Targets, name)
}

// Run runs every scenario of the suite against each of its targets and
// returns the report. Call Prepare first: Run assumes a valid suite (a run
// that cannot start has an unknown verdict and says why). It returns an
// error only when the history cannot be written or the real-mode
// calibration fails.
func Run(ctx context.Context, suite []*scenario.Scenario, o Options) (*Report, error) {
	mode := scenario.ModeSimulated
	rep := &Report{Verdict: Pass}
	var jobs []*job
	for si, s := range suite {
		sr := &ScenarioResult{Name: s.Name, File: s.File, Description: s.Description, Seed: o.seedOf(s), Duration: Duration(s.Duration), Verdict: Pass, Scenario: s}
		for _, f := range s.Faults {
			_, end := f.Observed(s.Duration)
			sr.Faults = append(sr.Faults, FaultSpec{Name: f.Name, Kind: string(f.Kind), At: Duration(f.At), End: Duration(end), Nodes: f.Nodes})
		}
		rep.Scenarios = append(rep.Scenarios, sr)
		if o.modeOf(s) == scenario.ModeReal {
			mode = scenario.ModeReal
		}
		for _, t := range s.Targets {
			if o.wanted(t.Name) {
				j := newJob(s, t, &o)
				j.si = si
				jobs = append(jobs, j)
			}
		}
	}
	rep.Mode = mode
	if o.Mode != "" {
		rep.Mode = o.Mode
	}
	if mode == scenario.ModeReal && len(jobs) > 0 && ctx.Err() == nil {
		if o.Calibration == nil {
			cal, err := Calibrate(SystemProber(), CalibrationSamples)
			if err != nil {
				return nil, err
			}
			o.Calibration = cal
		}
		rep.Calibration = o.Calibration
	}

	workers := o.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if o.Metrics != nil || o.Generators != nil || mode == scenario.ModeReal {
		workers = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		pool   errgroup.Group
		failed atomic.Bool // a run failed under FailFast
	)
	pool.SetLimit(workers)
	for _, j := range jobs {
		if ctx.Err() != nil {
			break // stopped (fail-fast or cancelled): the rest are skipped
		}
		pool.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			jo := o
			if o.History != nil {
				f, err := os.CreateTemp("", "snowchaos-history-*.ndjson")
				if err == nil {
					j.hist = f
					jo.History = f
				} else {
					jo.History = nil
				}
			}
			j.res = runJob(ctx, j, jo)
			if o.FailFast && j.res.Verdict == Fail {
				failed.Store(true)
				cancel()
			}
			return nil
		})
	}
	pool.Wait()
	stopped := failed.Load()

	var herr error
	for _, j := range jobs {
		sr := rep.Scenarios[j.si]
		if j.hist != nil {
			if _, err := j.hist.Seek(0, io.SeekStart); err == nil {
				if _, err := io.Copy(o.History, j.hist); err != nil && herr == nil {
					herr = err
				}
			}
			j.hist.Close()
			os.Remove(j.hist.Name())
		}
		rep.Summary.Runs++
		if j.res == nil {
			rep.Summary.Skipped++
			continue
		}
		if stopped && j.res.Error != "" && ctx.Err() != nil && !(j.res.Verdict == Fail && failStands(j.res)) {
			// Interrupted by fail-fast: counts as skipped, unless it had
			// failed for good before the interruption.
			rep.Summary.Skipped++
			continue
		}
		sr.Runs = append(sr.Runs, j.res)
		sr.Verdict = worse(sr.Verdict, j.res.Verdict)
		switch j.res.Verdict {
		case Pass:
			rep.Summary.Passed++
		case Fail:
			rep.Summary.Failed++
		case NA:
			rep.Summary.NotApplicable++
		default:
			rep.Summary.Unknown++
		}
	}
	for _, sr := range rep.Scenarios {
		na := 0
		for _, r := range sr.Runs {
			if r.Verdict == NA {
				na++
			}
		}
		switch {
		case len(sr.Runs) == 0:
			sr.Verdict = Unknown
		case na == len(sr.Runs):
			sr.Verdict = NA // every selected target n/a: no verdict to give
		}
		rep.Verdict = worse(rep.Verdict, sr.Verdict)
	}
	if stopped {
		rep.Stopped = true
		rep.Verdict = worse(rep.Verdict, Fail)
	}
	if ctx.Err() != nil && !stopped {
		rep.Verdict = worse(rep.Verdict, Unknown)
	}
	if len(jobs) == 0 {
		rep.Verdict = Unknown
	}
	return rep, herr
}

// RunOne runs one scenario against one of its targets. It never panics:
// a panic in a target ends the run with an unknown verdict and the stack
// in Error.
func RunOne(ctx context.Context, s *scenario.Scenario, t scenario.Target, o Options) *Result {
	return runJob(ctx, newJob(s, t, &o), o)
}

// runJob runs one resolved job.
func runJob(ctx context.Context, j *job, o Options) (res *Result) {
	res = &Result{Target: j.b.t.Name, Use: j.b.t.Use, Verdict: Unknown}
	if _, ok := j.s.ExpectationFor(j.b.t.Name); ok {
		res.Control = true
	}
	if j.err != nil {
		res.Error = j.err.Error()
		return res
	}
	if why := realNA(j.s, j.b.t, j.mode); why != "" {
		res.Verdict, res.NotApplicable = NA, why
		return res
	}
	if why := notApplicable(j.s, j.b, j.mode); why != "" {
		// Prepare let it through only when the target is opted in to n/a;
		// running it could only give a meaningless verdict.
		res.Verdict, res.NotApplicable = NA, why
		return res
	}
	defer func() {
		if p := recover(); p != nil {
			res.Verdict = Unknown
			res.Error = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	r, err := newRun(ctx, j, &o)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.KnownBad = r.info.KnownBad
	if o.History != nil {
		r.mu.hist = newHistoryWriter(o.History, o.HistoryGzip)
		defer func() {
			if err := r.mu.hist.flush(); err != nil && res.Error == "" {
				res.Error = "history: " + err.Error()
			}
		}()
	}
	if stalled := r.drive(res); stalled != nil {
		return stalled
	}
	if res.Error != "" {
		res.Verdict = worse(res.Verdict, Unknown)
	}
	return res
}

// stallCheck is the check a stalled run fails.
const stallCheck = "calls return"

// failStands reports whether a failed run's verdict stands although
// fail-fast interrupted it: the run stalled, or a safety count that only
// grows (duplicates, order and restart violations, lease overruns) broke
// its upper bound, which more of the run could not undo. A negative
// control not yet caught, a ratio or a timing figure could still change
// with the rest of the run: such a run counts as skipped, so that a kill
// is never credited to a half-run.
func failStands(res *Result) bool {
	for _, c := range res.Checks {
		if c.Verdict != Fail || c.Expected || c.Info {
			continue
		}
		if c.Expr == stallCheck {
			return true
		}
		e, err := scenario.ParseExpr(c.Expr)
		if err != nil {
			continue
		}
		if e.Metric.Safety() && (e.Op == scenario.OpLT || e.Op == scenario.OpLE || (e.Op == scenario.OpEQ && e.Value == 0)) {
			return true
		}
	}
	return false
}

// drive runs r's driver into res, watching its heartbeat. When the driver
// makes no progress for the stall timeout it closes the run's nodes and
// returns a failed result in place of res; a driver still stuck after that
// is left behind (nothing can unwind a call that never returns). Else it
// returns nil.
func (r *run) drive(res *Result) *Result {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		if r.simulated() {
			runSimulated(r, res)
		} else {
			runReal(r, res)
		}
	}()
	limit := r.opts.stallTimeout()
	tick := time.NewTicker(min(limit/4, time.Second))
	defer tick.Stop()
	last, since := r.beat.Load(), time.Now()
	for {
		select {
		case p := <-done:
			if p != nil {
				panic(p) // runJob's recover reports it
			}
			return nil
		case <-tick.C:
		}
		b := r.beat.Load()
		if b != last || b == 0 { // moving, or still setting up
			last, since = b, time.Now()
			continue
		}
		if time.Since(since) < limit {
			continue
		}
		// Tear the run's nodes down (a process target's are killed, which
		// ends the calls hung on them), then give the driver a moment to
		// return; if it does not, it is abandoned with what it holds.
		r.abort.Store(true)
		teardown := ""
		if left := r.closeStarted(stallTeardown); left > 0 {
			teardown = fmt.Sprintf("; %d node(s) did not close within %s", left, stallTeardown)
		} else {
			select {
			case <-done:
			case <-time.After(stallTeardown):
				teardown = fmt.Sprintf("; the driver did not return within %s of closing the nodes", stallTeardown)
			}
		}
		return &Result{
			Target: res.Target, Use: res.Use, Control: res.Control, KnownBad: r.info.KnownBad, Verdict: Fail,
			Error:  fmt.Sprintf("stalled: the run made no progress for %s of wall time; a call into the target did not return (a call that blocks or loops without bound)%s", limit, teardown),
			Checks: []Check{{Expr: stallCheck, Verdict: Fail, Observed: "a call did not return within " + limit.String()}},
		}
	}
}
