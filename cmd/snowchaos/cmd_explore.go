package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/explore"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

func init() {
	register(command{name: "explore", summary: "search random fault schedules for a failure and shrink it to a minimal scenario", run: runExplore})
}

const exploreUsage = `usage: snowchaos explore [flags] --seed N (--budget D | --schedules N)

Draws fault schedules at random from a space (every fault kind, restarts
and crash points, clones, handoffs, lease store faults, rates, bursts at
and past the sequence limit, batch calls, layouts, one to three nodes),
runs each against the targets in simulated time, judges the invariants
run judges (no duplicate, no order or restart violation, no ID outside a
lease, the logical policy's lead bound), and shrinks the first failures
to the smallest schedule that still fails the same invariant. Each find
is written as an ordinary scenario file: snowchaos run FILE reproduces it.

Schedule i depends on the seed and i alone: --schedule i runs it again.

Exit status: 0 nothing found, 1 a failure found, 2 unknown runs only, or
invalid input.

flags:
`

func runExplore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("explore", flag.ContinueOnError)
	spaceFile := fl.String("space", "", "a space file (YAML) narrowing what is drawn; default: everything the targets take")
	targets := fl.String("target", "wait,refuse,logical", "targets to run every schedule against (comma-separated): wait, refuse, logical, inprocess (the nodes' own policies), or a known-bad reference")
	seed := fl.Int64("seed", 1, "the exploration's seed")
	budget := fl.Duration("budget", 0, "explore for this long of wall time (shrinking comes after it)")
	schedules := fl.Int("schedules", 0, "draw this many schedules (each runs against every target); 1 to 10000000")
	only := fl.Int("schedule", -1, "run only schedule i of the seed (to reproduce a find)")
	out := fl.String("out", "", "write each find's original and shrunk YAML and the shrunk run's HTML timeline into this directory")
	asJSON := fl.Bool("json", false, "print the report as JSON")
	first := fl.Bool("first", false, "stop at the first failure")
	shrink := fl.Int("shrink", 3, "shrink this many finds (0: none)")
	shrinkRuns := fl.Int("shrink-runs", explore.DefaultShrinkRuns, "bound on the runs one shrink makes (1 to 100000)")
	shrinkBudget := fl.Duration("shrink-budget", 0, "bound on one shrink's wall time (0: none); a shrink cut short keeps the smallest failing schedule so far")
	parallel := fl.Int("parallel", 0, "schedules run at once (0: one per CPU)")
	stall := fl.Duration("stall-timeout", 15*time.Second, "fail a run that makes no progress for this long of wall time")
	if code, ok := parseFlags(fl, args, stderr, exploreUsage); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "snowchaos explore: "+format+"\n", a...)
		return exitInvalid
	}
	o := explore.Options{Seed: *seed, Budget: *budget, Schedules: *schedules, First: *first, Shrink: *shrink,
		ShrinkRuns: *shrinkRuns, ShrinkBudget: *shrinkBudget, Parallel: *parallel, StallTimeout: *stall}
	switch {
	case *only >= 0:
		o.Only, o.Schedules, o.Budget = []int{*only}, 0, 0
	case *budget <= 0 && *schedules <= 0:
		return fail("give --budget D or --schedules N")
	case *schedules < 0 || *schedules > 10_000_000:
		return fail("--schedules %d: want 1 to 10000000", *schedules)
	case *budget < 0 || *budget > 24*time.Hour:
		return fail("--budget %s: want up to 24h", *budget)
	}
	if *shrink < 0 || *shrinkRuns < 1 || *shrinkRuns > 100_000 {
		return fail("--shrink %d --shrink-runs %d: want shrink >= 0 and 1 to 100000 runs", *shrink, *shrinkRuns)
	}
	if *parallel < 0 || *parallel > 256 {
		return fail("--parallel %d: want 0 to 256", *parallel)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Targets = append(o.Targets, t)
		}
	}
	if *spaceFile != "" {
		data, err := os.ReadFile(*spaceFile)
		if err != nil {
			return fail("%v", err)
		}
		sp, err := explore.ParseSpace(*spaceFile, data)
		if err != nil {
			return fail("invalid space:\n%v", err)
		}
		o.Space = sp
	}
	prog := newExploreProgress(stderr)
	o.Progress = prog.update
	rep, err := explore.Run(ctx, o)
	prog.done()
	if err != nil {
		return fail("%v", err)
	}
	if *out != "" {
		if err := writeFinds(ctx, *out, rep, stderr); err != nil {
			return fail("%v", err)
		}
	}
	if *asJSON {
		err = explore.JSON(stdout, rep)
	} else {
		err = explore.Text(stdout, rep)
	}
	if err != nil {
		return fail("%v", err)
	}
	return rep.ExitCode()
}

// writeFinds writes each find's YAML files and the shrunk run's HTML
// timeline into dir.
func writeFinds(ctx context.Context, dir string, rep *explore.Report, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, f := range rep.Finds {
		base := filepath.Join(dir, fmt.Sprintf("find-%d-%s", i+1, f.Target))
		if err := os.WriteFile(base+"-original.yaml", []byte(f.Original.YAML()), 0o644); err != nil {
			return err
		}
		if f.Shrunk == nil {
			continue
		}
		if err := os.WriteFile(base+"-shrunk.yaml", []byte(f.Shrunk.YAML()), 0o644); err != nil {
			return err
		}
		sc, err := f.Shrunk.Scenario(base + "-shrunk.yaml")
		if err != nil {
			return err
		}
		hr, err := harness.Run(ctx, []*scenario.Scenario{sc}, harness.Options{Mode: scenario.ModeSimulated, Timeline: true})
		if err != nil {
			return err
		}
		if err := runWriteFile(base+"-shrunk.html", hr, report.HTML); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "snowchaos explore: wrote %s-{original,shrunk}.yaml and %s-shrunk.html\n", base, base)
	}
	return nil
}

// exploreProgress prints "N schedules, M runs, R/s, F found, U unknown"
// on stderr: rewritten in place on a terminal, a line every 10 s
// otherwise.
type exploreProgress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last time.Time
	line string
}

func newExploreProgress(w io.Writer) *exploreProgress {
	return &exploreProgress{w: w, tty: runIsTTY(w), last: time.Now()}
}

func (p *exploreProgress) update(pr explore.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rate := 0.0
	if s := pr.Elapsed.Seconds(); s > 0 {
		rate = float64(pr.Runs) / s
	}
	p.line = fmt.Sprintf("explore: %d schedules, %d runs, %.1f runs/s, %d found, %d unknown", pr.Schedules, pr.Runs, rate, pr.Failed, pr.Unknown)
	switch {
	case p.tty && time.Since(p.last) > 100*time.Millisecond:
		fmt.Fprintf(p.w, "\r%s\x1b[K", p.line)
		p.last = time.Now()
	case !p.tty && time.Since(p.last) > 10*time.Second:
		fmt.Fprintln(p.w, p.line)
		p.last = time.Now()
	}
}

func (p *exploreProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line == "" {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", p.line)
	} else {
		fmt.Fprintln(p.w, p.line)
	}
}
