package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/scenarios"
	"github.com/snowchaos/snowchaos/telemetry"
)

func init() {
	register(command{name: "run", summary: "run chaos scenarios (default: the built-in suite, simulated)", run: runRun})
}

const runUsage = `usage: snowchaos run [flags] [FILE|DIR ...] [flags]

Runs scenario scripts against their targets and prints the matrix of
scenario x target with a verdict per invariant. Without arguments it runs
the built-in suite (embedded in the binary) in simulated mode. Flags may
come before or after the files; "--" ends the flags.

Exit status: 0 when every verdict is as expected, 1 when any check failed,
2 when any is unknown (an unconfirmed fault, an interrupted run) or the
input is invalid. A target that cannot take a scenario (a fault kind, a
lease) is invalid input unless it is opted in to "n/a" (not_applicable: ok
in the scenario, or --allow-na): its row is then n/a with the reason, and
counts as neither pass nor fail.

With --metrics-addr the snowchaos_* and snowflake_* series are served while
the scenarios run (an in-process node's snowflake_* series stay, with their
final values, until the next run starts); --metrics-linger keeps serving
after the report, so that a scraper collects the final counters, the last
run's generator series and the verdicts: e.g.
--metrics-linger 30s with Prometheus scraping every 15s. An interrupt ends
the linger at once.

flags:
`

// runFlags are the parsed flags of snowchaos run.
type runFlags struct {
	mode, seed, targets, reportFmt string
	junit, history, html, metrics  string
	failFast, list, allowNA        bool
	timeout, linger, stall         time.Duration
	parallel, repeat               int
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f runFlags
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.StringVar(&f.mode, "mode", "", "simulated or real: override every scenario's mode")
	fl.StringVar(&f.seed, "seed", "", "override every scenario's seed")
	fl.StringVar(&f.targets, "target", "", "run only these targets (comma-separated names, e.g. wait,bad-no-rewind-check)")
	fl.BoolVar(&f.failFast, "fail-fast", false, "stop at the first unexpected duplicate and the first failed run")
	fl.StringVar(&f.reportFmt, "report", "text", "stdout format: text (the matrix) or json")
	fl.StringVar(&f.junit, "junit", "", "write a JUnit XML file: one test case per scenario x target x invariant")
	fl.StringVar(&f.history, "history", "", "write every ID request as NDJSON (reference time, node, IDs, outcome; see docs/history.md) to this file, gzip-compressed when the name ends in .gz (the built-in suite: about 60 MB gzipped, 700 MB plain)")
	fl.StringVar(&f.html, "html", "", "write a self-contained HTML report with an SVG timeline per scenario")
	fl.StringVar(&f.metrics, "metrics-addr", "", "serve snowchaos_* and snowflake_* metrics on this address while running (e.g. 127.0.0.1:9464)")
	fl.DurationVar(&f.linger, "metrics-linger", 0, "with --metrics-addr: keep serving the final metrics this long after the report (until interrupted), so a scraper collects them; 0 stops at once")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop after this long (unfinished runs are unknown: exit 2); 0 means none")
	fl.DurationVar(&f.stall, "stall-timeout", harness.DefaultStallTimeout, "fail a run that makes no progress for this long of wall time (a call into the target that never returns); 1s to 1h")
	fl.IntVar(&f.parallel, "parallel", 0, "simulated runs at once (0: one per CPU)")
	fl.BoolVar(&f.list, "list", false, "list the scenarios and targets that would run, and exit")
	fl.BoolVar(&f.allowNA, "allow-na", false, "report a target that cannot take a scenario as n/a (with the reason) instead of rejecting the suite")
	fl.IntVar(&f.repeat, "repeat", 1, "run the suite this many times (1 to 1000), the i-th with every seed plus i, and print per scenario and target how many repetitions gave each verdict and found duplicates (text report only)")
	files, code, ok := parseArgs(fl, args, stderr, runUsage)
	if !ok {
		return code
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
		return exitInvalid
	}
	suite, err := loadSuite(files)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos run: invalid scenario:\n%v\n", err)
		return exitInvalid
	}
	if err := harness.Prepare(suite, opts); err != nil {
		fmt.Fprintf(stderr, "snowchaos run: invalid scenario:\n%v\n", err)
		return exitInvalid
	}
	runs := 0
	for _, s := range suite {
		for _, t := range s.Targets {
			if len(opts.Targets) == 0 || runContains(opts.Targets, t.Name) {
				runs++
			}
		}
	}
	if runs == 0 {
		fmt.Fprintf(stderr, "snowchaos run: no scenario runs any of the targets %s\n", f.targets)
		return exitInvalid
	}
	if f.list {
		for _, s := range suite {
			var names []string
			for _, t := range s.Targets {
				names = append(names, t.Name)
			}
			fmt.Fprintf(stdout, "%-28s %-40s %s\n", s.Name, s.File, strings.Join(names, " "))
		}
		return exitOK
	}

	lingerCtx := ctx // the linger ends on an interrupt, not at --timeout
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	var hist *os.File
	if f.history != "" {
		if hist, err = createFile(f.history); err != nil {
			fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
			return exitInvalid
		}
		defer hist.Close()
		opts.History = hist
		opts.HistoryGzip = strings.HasSuffix(f.history, ".gz")
	}
	opts.Timeline = f.html != ""
	var metricsSrv *telemetry.Server
	if f.metrics != "" {
		reg := telemetry.NewRegistry()
		opts.Metrics = metrics.New()
		opts.Generators = telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true})
		reg.MustRegister(opts.Metrics, opts.Generators)
		srv, err := telemetry.Listen(f.metrics, reg)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos run: metrics: %v\n", err)
			return exitInvalid
		}
		fmt.Fprintf(stderr, "snowchaos run: metrics at %s\n", srv.URL())
		metricsSrv = srv
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownGrace)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	var prog *report.Progress
	if runIsTTY(stderr) {
		prog = report.NewProgress(stderr, runs, time.Now)
		opts.Progress = prog.Update
	}

	began := time.Now()
	if f.repeat > 1 {
		return runRepeats(ctx, suite, opts, f.repeat, stdout, stderr, prog)
	}
	rep, err := harness.Run(ctx, suite, opts)
	elapsed := time.Since(began)
	if prog != nil {
		prog.Clear()
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos run: history: %v\n", err)
		return exitInvalid
	}
	code = rep.ExitCode()
	switch f.reportFmt {
	case "json":
		err = report.JSON(stdout, rep)
	default:
		err = report.Terminal(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
		return exitInvalid
	}
	// On stderr, so that stdout is the report alone: byte-identical for a
	// simulated run with the same seed.
	fmt.Fprintf(stderr, "snowchaos run: ran in %s\n", elapsed.Round(time.Millisecond))
	if err := writeReports(rep, f.junit, f.html); err != nil {
		fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
		return exitInvalid
	}
	if hist != nil {
		if err := hist.Close(); err != nil {
			fmt.Fprintf(stderr, "snowchaos run: history: %v\n", err)
			return exitInvalid
		}
		if st, err := os.Stat(f.history); err == nil {
			fmt.Fprintf(stderr, "snowchaos run: history: %s\n", historyNote(f.history, st.Size(), opts.HistoryGzip))
		}
	}
	if metricsSrv != nil && f.linger > 0 {
		fmt.Fprintf(stderr, "snowchaos run: serving the final metrics at %s for %s (interrupt to stop)\n", metricsSrv.URL(), f.linger)
		t := time.NewTimer(f.linger)
		select {
		case <-t.C:
		case <-lingerCtx.Done():
		case <-metricsSrv.Done():
		}
		t.Stop()
	}
	return code
}

// runRepeats runs the suite n times, the i-th with every seed plus i, and
// prints the repetitions' summary; the exit code is the worst of them.
func runRepeats(ctx context.Context, suite []*scenario.Scenario, opts harness.Options, n int, stdout, stderr io.Writer, prog *report.Progress) int {
	var reps []*harness.Report
	code := exitOK
	began := time.Now()
	for i := range n {
		opts.SeedOffset = int64(i)
		rep, err := harness.Run(ctx, suite, opts)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
			return exitInvalid
		}
		if prog != nil {
			prog.Clear()
		}
		s := rep.Summary
		fmt.Fprintf(stderr, "snowchaos run: repetition %d of %d: %d passed, %d failed, %d unknown\n", i+1, n, s.Passed, s.Failed, s.Unknown)
		reps = append(reps, rep)
		code = max(code, rep.ExitCode())
		if ctx.Err() != nil {
			break
		}
	}
	if err := report.Repeats(stdout, reps); err != nil {
		fmt.Fprintf(stderr, "snowchaos run: %v\n", err)
		return exitInvalid
	}
	fmt.Fprintf(stderr, "snowchaos run: %d repetitions ran in %s\n", len(reps), time.Since(began).Round(time.Millisecond))
	return code
}

// options converts the flags.
func (f *runFlags) options() (harness.Options, error) {
	var o harness.Options
	switch f.mode {
	case "":
	case string(scenario.ModeSimulated), string(scenario.ModeReal):
		o.Mode = scenario.Mode(f.mode)
	default:
		return o, fmt.Errorf("--mode %q: want simulated or real", f.mode)
	}
	if f.seed != "" {
		var s int64
		if _, err := fmt.Sscan(f.seed, &s); err != nil {
			return o, fmt.Errorf("--seed %q: want an integer", f.seed)
		}
		o.Seed = &s
	}
	if f.targets != "" {
		for _, t := range strings.Split(f.targets, ",") {
			if t = strings.TrimSpace(t); t != "" {
				o.Targets = append(o.Targets, t)
			}
		}
	}
	switch f.reportFmt {
	case "text", "json":
	default:
		return o, fmt.Errorf("--report %q: want text or json", f.reportFmt)
	}
	o.FailFast = f.failFast
	if f.repeat < 1 || f.repeat > 1000 {
		return o, fmt.Errorf("--repeat %d: want 1 to 1000", f.repeat)
	}
	if f.repeat > 1 && (f.reportFmt != "text" || f.junit != "" || f.html != "" || f.history != "") {
		return o, errors.New("--repeat prints the repetitions' summary: it takes no --report json, --junit, --html or --history")
	}
	if f.parallel < 0 || f.parallel > 256 {
		return o, fmt.Errorf("--parallel %d: want 0 (one per CPU) to 256", f.parallel)
	}
	o.Parallel = f.parallel
	if f.stall < time.Second || f.stall > time.Hour {
		return o, fmt.Errorf("--stall-timeout %s: want 1s to 1h", f.stall)
	}
	o.StallTimeout = f.stall
	o.AllowNA = f.allowNA
	switch {
	case f.linger < 0:
		return o, fmt.Errorf("--metrics-linger %s: want a duration >= 0", f.linger)
	case f.linger > 0 && f.metrics == "":
		return o, errors.New("--metrics-linger needs --metrics-addr")
	}
	return o, nil
}

// loadSuite parses the scenario files named by args (directories give
// their *.yaml and *.yml files, sorted); no args means the built-in suite.
// All parse errors are reported together.
func loadSuite(args []string) ([]*scenario.Scenario, error) {
	type src struct {
		name string
		data []byte
	}
	var srcs []src
	if len(args) == 0 {
		entries, err := fs.Glob(scenarios.FS, "*.yaml")
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			b, err := fs.ReadFile(scenarios.FS, e)
			if err != nil {
				return nil, err
			}
			srcs = append(srcs, src{"scenarios/" + e, b})
		}
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		var files []string
		if st.IsDir() {
			for _, pat := range []string{"*.yaml", "*.yml"} {
				m, _ := filepath.Glob(filepath.Join(a, pat))
				files = append(files, m...)
			}
			sort.Strings(files)
			if len(files) == 0 {
				return nil, fmt.Errorf("%s: no *.yaml scenario files", a)
			}
		} else {
			files = []string{a}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			srcs = append(srcs, src{f, b})
		}
	}
	var suite []*scenario.Scenario
	var errs []string
	for _, s := range srcs {
		sc, err := scenario.Parse(s.name, s.data)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		suite = append(suite, sc)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return suite, nil
}

// writeReports writes the JUnit and HTML reports to their files, each
// when its path is set.
func writeReports(rep *harness.Report, junit, html string) error {
	for _, out := range []struct {
		path   string
		render func(io.Writer, *harness.Report) error
	}{{junit, report.JUnit}, {html, report.HTML}} {
		if out.path == "" {
			continue
		}
		if err := runWriteFile(out.path, rep, out.render); err != nil {
			return err
		}
	}
	return nil
}

func runWriteFile(path string, rep *harness.Report, render func(io.Writer, *harness.Report) error) error {
	f, err := createFile(path)
	if err != nil {
		return err
	}
	if err := render(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// historyNote describes a written history file: its name, size and
// format, with a hint to compress a large plain one.
func historyNote(path string, size int64, gzipped bool) string {
	mb := fmt.Sprintf("%.1f MB", float64(size)/1e6)
	if gzipped {
		return fmt.Sprintf("%s, %s (gzip-compressed NDJSON: zcat %s)", path, mb, path)
	}
	note := fmt.Sprintf("%s, %s (NDJSON)", path, mb)
	if size >= 10e6 {
		note += "; a name ending in .gz writes it gzip-compressed, about 11 times smaller"
	}
	return note
}

// runIsTTY reports whether w is a terminal.
func runIsTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// createFile creates (or truncates) path, making its parent directories
// first, so `--junit out/junit.xml` works on a fresh checkout.
func createFile(path string) (*os.File, error) {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	return os.Create(path)
}
