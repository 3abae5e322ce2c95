// Command gate is the mutation gate: it builds snowchaos once per planted
// bug (a mutant, one YAML file in mutants/) with the bug compiled in
// through `go build -overlay`, runs the built-in scenario suite against
// each, and fails unless the suite kills every mutant (exits 1). It prints
// the kill matrix: each mutant and the scenario, target and invariant
// that caught it.
//
// Usage (from the module root; make mutants runs it):
//
//	go run ./mutants/gate [-run REGEXP] [-matrix FILE] [-keep] [-timeout D]
//
// Before the mutants it runs the unmutated build, which must pass: a gate
// whose baseline fails proves nothing. Exit codes: 0 every mutant killed,
// 1 a mutant survived (or the baseline failed), 2 a mutant is invalid (its
// find text is not in its file exactly once, or it does not build).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/harness"
)

// Mutant is one planted bug.
type Mutant struct {
	// Name is the mutant's file name without .yaml.
	Name string `yaml:"-"`
	// Class is the class of bug the suite claims to catch.
	Class string `yaml:"class"`
	// Doc says in a sentence what the bug is.
	Doc string `yaml:"doc"`
	// Edits change the source; each find must occur exactly once in its file.
	Edits []Edit `yaml:"edits"`
	// Suite is what the mutant is run against: empty for the built-in
	// suite (snowchaos run), else arguments of snowchaos run (a directory
	// or files, and flags).
	Suite []string `yaml:"suite"`
}

// Edit replaces whole lines of source: the find lines must match
// consecutive source lines exactly once, compared without their leading
// and trailing white space (so YAML needs no tabs); the replacement lines
// take the indentation of the first matched line.
type Edit struct {
	File    string `yaml:"file"`
	Find    string `yaml:"find"`
	Replace string `yaml:"replace"`
}

// Kill is what one run of the suite said about a mutant.
type Kill struct {
	Mutant   *Mutant
	Outcome  string   // killed, survived, unknown, invalid
	By       []string // scenario / target: invariant, for a kill
	Detail   string
	Duration time.Duration
}

func main() {
	run := flag.String("run", "", "only mutants whose name matches this regular expression")
	matrix := flag.String("matrix", "", "also write the kill matrix as Markdown to this file")
	keep := flag.Bool("keep", false, "keep the work directory (mutated sources and binaries)")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on one suite run")
	dir := flag.String("dir", "mutants", "directory holding the mutants")
	jobs := flag.Int("j", 2, "mutants built and run at once (1-16)")
	exp := flag.Bool("explore", false, "the explore gate: each mutant faces snowchaos explore (fixed seed, per-mutant budget) instead of the built-in suite, and the known-bad references too")
	var cfg exploreConfig
	flag.Int64Var(&cfg.seed, "explore-seed", 1, "with -explore: the seed")
	flag.IntVar(&cfg.schedules, "explore-schedules", 400, "with -explore: at most this many schedules per mutant (1-100000)")
	flag.DurationVar(&cfg.budget, "explore-budget", 20*time.Second, "with -explore: at most this long exploring per mutant")
	flag.StringVar(&cfg.target, "explore-target", "inprocess", "with -explore: the target explored (inprocess draws each node's policy)")
	flag.Parse()
	if *jobs < 1 || *jobs > 16 {
		fatal(2, "-j %d: want 1 to 16", *jobs)
	}
	if *timeout <= 0 || *timeout > time.Hour {
		fatal(2, "-timeout %v: want a duration in (0, 1h]", *timeout)
	}
	var filter *regexp.Regexp
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fatal(2, "-run %q: %v", *run, err)
		}
		filter = re
	}
	ms, err := load(*dir, filter)
	if err != nil {
		fatal(2, "%v", err)
	}
	if len(ms) == 0 {
		fatal(2, "no mutants in %s match", *dir)
	}
	work, err := os.MkdirTemp("", "snowchaos-mutants-")
	if err != nil {
		fatal(2, "%v", err)
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "work directory: %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	ctx := context.Background()

	if *exp {
		if cfg.schedules < 1 || cfg.schedules > 100_000 || cfg.budget <= 0 || cfg.budget > time.Hour {
			fatal(2, "-explore-schedules %d -explore-budget %s: want 1 to 100000 schedules and a budget in (0, 1h]", cfg.schedules, cfg.budget)
		}
		began := time.Now()
		rows, worst := runExploreGate(ctx, work, ms, cfg, *jobs)
		md := renderExplore(rows, cfg)
		fmt.Print(md)
		fmt.Fprintf(os.Stderr, "explore gate: %s\n", time.Since(began).Round(time.Second))
		if *matrix != "" {
			if err := writeBetween(*matrix, md, exploreBegin, exploreEnd); err != nil {
				fatal(2, "%v", err)
			}
		}
		os.Exit(worst)
	}

	// The baseline: the suites the mutants use must pass unmutated.
	suites := map[string][]string{}
	for _, m := range ms {
		suites[strings.Join(m.Suite, " ")] = m.Suite
	}
	base := filepath.Join(work, "baseline")
	if err := build(ctx, base, nil); err != nil {
		fatal(1, "baseline build: %v", err)
	}
	for _, key := range sortedKeys(suites) {
		k := runSuite(ctx, base, suites[key], *timeout)
		if k.Outcome != "survived" {
			fatal(1, "baseline: the unmutated build does not pass `snowchaos run %s` (%s: %s %s)", key, k.Outcome, strings.Join(k.By, "; "), k.Detail)
		}
		fmt.Fprintf(os.Stderr, "baseline: snowchaos run %s passes (%s)\n", key, k.Duration.Round(time.Second))
	}

	kills := tryAll(ctx, work, ms, *timeout, *jobs)
	worst := 0
	for _, k := range kills {
		worst = max(worst, exitFor(k.Outcome))
	}
	md := render(kills)
	fmt.Print(md)
	if *matrix != "" {
		if err := writeMatrix(*matrix, md); err != nil {
			fatal(2, "%v", err)
		}
	}
	os.Exit(worst)
}

func fatal(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutants: "+format+"\n", args...)
	os.Exit(code)
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// load reads every mutant in dir, sorted by name.
func load(dir string, filter *regexp.Regexp) ([]*Mutant, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var ms []*Mutant
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		if filter != nil && !filter.MatchString(name) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m := &Mutant{Name: name}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(m); err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		switch {
		case m.Class == "" || m.Doc == "":
			return nil, fmt.Errorf("%s: class and doc are required", p)
		case len(m.Edits) == 0:
			return nil, fmt.Errorf("%s: no edits", p)
		}
		for i, e := range m.Edits {
			if e.File == "" || e.Find == "" || e.Find == e.Replace {
				return nil, fmt.Errorf("%s: edits[%d]: want a file, a find text and a different replacement", p, i)
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// tryAll tries every mutant, jobs at a time, and returns their kills in
// the order of ms; each is printed to stderr as it ends.
func tryAll(ctx context.Context, work string, ms []*Mutant, timeout time.Duration, jobs int) []Kill {
	kills := make([]Kill, len(ms))
	eachAtOnce(len(ms), jobs, func(i int) string {
		k := try(ctx, work, ms[i], timeout)
		kills[i] = k
		return fmt.Sprintf("%-40s %-8s %-6s %s", k.Mutant.Name, k.Outcome, k.Duration.Round(time.Second), first(k))
	})
	return kills
}

// exitFor is the gate's exit status for one mutant's outcome: 0 killed,
// 2 invalid (the mutant must follow the code), 1 otherwise (it survived).
func exitFor(outcome string) int {
	switch outcome {
	case "killed":
		return 0
	case "invalid":
		return 2
	}
	return 1
}

// eachAtOnce calls f(i) for every i below n, jobs at a time, and prints
// each call's line to stderr as it ends.
func eachAtOnce(n, jobs int, f func(i int) string) {
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range min(jobs, n) {
		wg.Go(func() {
			for i := range next {
				line := f(i)
				mu.Lock()
				fmt.Fprintln(os.Stderr, line)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// try builds mutant m and runs its suite against it.
func try(ctx context.Context, work string, m *Mutant, timeout time.Duration) Kill {
	dir := filepath.Join(work, m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Kill{Mutant: m, Outcome: "invalid", Detail: err.Error()}
	}
	overlay := map[string]string{}
	for i, e := range m.Edits {
		src, err := os.ReadFile(e.File)
		if err != nil {
			return Kill{Mutant: m, Outcome: "invalid", Detail: err.Error()}
		}
		if abs, ok := overlay[mustAbs(e.File)]; ok { // a second edit of the same file
			if src, err = os.ReadFile(abs); err != nil {
				return Kill{Mutant: m, Outcome: "invalid", Detail: err.Error()}
			}
		}
		mutated, err := apply(src, e)
		if err != nil {
			return Kill{Mutant: m, Outcome: "invalid", Detail: fmt.Sprintf("edits[%d]: %s: %v (the code changed: update the mutant)", i, e.File, err)}
		}
		out := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(e.File)))
		if err := os.WriteFile(out, mutated, 0o644); err != nil {
			return Kill{Mutant: m, Outcome: "invalid", Detail: err.Error()}
		}
		overlay[mustAbs(e.File)] = out
	}
	bin := filepath.Join(dir, "snowchaos")
	if err := build(ctx, bin, overlay); err != nil {
		return Kill{Mutant: m, Outcome: "invalid", Detail: "build: " + err.Error()}
	}
	k := runSuite(ctx, bin, m.Suite, timeout)
	k.Mutant = m
	return k
}

// apply makes edit e on src (see Edit).
func apply(src []byte, e Edit) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	find := trimLines(e.Find)
	at, n := -1, 0
	for i := 0; i+len(find) <= len(lines); i++ {
		match := true
		for j, f := range find {
			if strings.TrimSpace(lines[i+j]) != f {
				match = false
				break
			}
		}
		if match {
			at, n = i, n+1
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("the find lines occur %d times, want exactly once", n)
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " \t"))]
	var repl []string
	for _, r := range trimLines(e.Replace) {
		repl = append(repl, indent+r)
	}
	out := append(append(append([]string{}, lines[:at]...), repl...), lines[at+len(find):]...)
	return []byte(strings.Join(out, "\n")), nil
}

// trimLines splits s into lines without surrounding white space, dropping
// a trailing empty line.
func trimLines(s string) []string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSpace(l)
	}
	return ls
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		fatal(2, "%v", err)
	}
	return a
}

// build builds snowchaos into bin with the overlay (nil: none).
func build(ctx context.Context, bin string, overlay map[string]string) error {
	args := []string{"build", "-o", bin}
	if overlay != nil {
		b, err := json.Marshal(map[string]any{"Replace": overlay})
		if err != nil {
			return err
		}
		p := bin + ".overlay.json"
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		args = append(args, "-overlay", p)
	}
	args = append(args, "./cmd/snowchaos")
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v\n%s", err, stderr.String())
	}
	return nil
}

// runSuite runs snowchaos run with the suite's arguments and reads its
// verdict: exit 1 with failed checks is a kill.
func runSuite(ctx context.Context, bin string, suite []string, timeout time.Duration) Kill {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Fail fast: a kill needs one failed run, and a mutant that hangs its
	// calls fails the run it hangs after the stall timeout, not after the
	// gate's.
	args := append([]string{"run", "--report", "json", "--fail-fast", "--stall-timeout", "15s"}, suite...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	k := Kill{Duration: time.Since(start)}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		k.Outcome, k.Detail = "unknown", err.Error()
		return k
	}
	if ctx.Err() != nil {
		k.Outcome, k.Detail = "unknown", fmt.Sprintf("timed out after %v", timeout)
		return k
	}
	var rep harness.Report
	if jerr := json.NewDecoder(io.LimitReader(&stdout, 1<<30)).Decode(&rep); jerr != nil {
		k.Outcome, k.Detail = "unknown", fmt.Sprintf("exit %d, report unreadable (%v): %s", code, jerr, tail(stderr.String()))
		return k
	}
	k.By = failures(&rep)
	switch code {
	case 0:
		k.Outcome = "survived"
	case 1:
		k.Outcome = "killed"
	default:
		k.Outcome, k.Detail = "unknown", fmt.Sprintf("exit %d: %s", code, tail(stderr.String()))
	}
	return k
}

// failures lists the failed checks of a report as "scenario / target: expr".
func failures(rep *harness.Report) []string {
	var out []string
	for _, s := range rep.Scenarios {
		for _, r := range s.Runs {
			if r.Verdict != harness.Fail {
				continue
			}
			for _, c := range r.Checks {
				if c.Verdict == harness.Fail && !c.Info {
					out = append(out, fmt.Sprintf("%s / %s: %s (%s)", s.Name, r.Target, c.Expr, c.Observed))
				}
			}
		}
	}
	return out
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}

func first(k Kill) string {
	if len(k.By) > 0 {
		more := ""
		if len(k.By) > 1 {
			more = fmt.Sprintf(" (+%d more)", len(k.By)-1)
		}
		return k.By[0] + more
	}
	return k.Detail
}

// render returns the kill matrix as Markdown.
// The kill matrix goes between these markers when the -matrix file has
// them (docs/mutants.md does), else it replaces the whole file.
const (
	matrixBegin = "<!-- kill-matrix: make mutants writes this table -->"
	matrixEnd   = "<!-- /kill-matrix -->"
)

// writeMatrix writes md into path (see matrixBegin).
func writeMatrix(path, md string) error { return writeBetween(path, md, matrixBegin, matrixEnd) }

// writeBetween writes md between the begin and end markers of path, or
// replaces the whole file when it has no markers.
func writeBetween(path, md, matrixBegin, matrixEnd string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	text := string(old)
	i, j := strings.Index(text, matrixBegin), strings.Index(text, matrixEnd)
	if i < 0 || j < i {
		return os.WriteFile(path, []byte(md), 0o644)
	}
	text = text[:i+len(matrixBegin)] + "\n" + md + text[j:]
	return os.WriteFile(path, []byte(text), 0o644)
}

func render(kills []Kill) string {
	var b strings.Builder
	b.WriteString("| mutant | class | outcome | caught by (the first failed check) | failed checks before the suite stopped |\n|---|---|---|---|---|\n")
	killed := 0
	for _, k := range kills {
		if k.Outcome == "killed" {
			killed++
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %d |\n", k.Mutant.Name, k.Mutant.Class, k.Outcome, strings.ReplaceAll(first(k), "|", `\|`), len(k.By))
	}
	fmt.Fprintf(&b, "\n%d of %d mutants killed.\n", killed, len(kills))
	return b.String()
}
