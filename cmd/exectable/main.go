// Command exectable runs the exec target's fault table (scenarios/exec)
// and prints it as Markdown: one row per generator; two throughput
// columns (IDs/s at full speed under the clock route, and bare, with no
// route: the same-run reference); one column per fault, each cell what
// the run found (duplicates, IDs out of order, IDs after a restart below
// earlier ones, refused calls) or survived; then, per generator, whether
// what its docs promise (unique, in order) held.
//
//	go run ./cmd/exectable [-libraries bench/js/libraries.json] [-doc docs/exec-target.md] [-repeat N] [DIR|FILE ...]
//
// With -doc the table replaces the lines between the markers
// "<!-- exec-table begin -->" and "<!-- exec-table end -->" in that file.
// With -repeat N the table is run N times (the i-th with every seed plus
// i): the cells show the first run, and under the table every cell whose
// verdict words (survived, dup, order, restart, refused, no IDs, UNKNOWN:
// report.CellWords) differed between the runs is listed with each run's
// cell.
//
// Whatever a library does wrong is shown as found; the exit status judges
// only the harness and its controls: 2 when a fault could not be confirmed
// (or a run failed, or issued nothing), 1 when the MVP generator issued a
// duplicate under a running clock step, or a negative control escaped one
// (the broken generator: no duplicate and no ID out of order; the
// stateless UUIDv7: no ID out of order), 0 otherwise.
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
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target/exec"
)

// library is one row's description (bench/js/libraries.json).
type library struct {
	Target  string `json:"target"`
	Package string `json:"package"`
	ID      string `json:"id"`
	// Promise says what the library's docs promise, quoting them.
	Promise string `json:"promise"`
	// Checks lists the promises the table checks: "unique" (no
	// duplicate), "ordered" (no ID below its predecessor from the same
	// process).
	Checks []string `json:"checks"`
	// Control names a deliberately broken generator and what must catch
	// it: "duplicates or order" or "order".
	Control string `json:"control,omitempty"`
	// Unknown lists the columns whose runs cannot show what happened for
	// a reason of the generator's own (UnknownWhy): an unknown there is
	// reported, not a failure of the table.
	Unknown    []string `json:"unknown,omitempty"`
	UnknownWhy string   `json:"unknown_why,omitempty"`
}

// Column names with a special meaning: the baseline scenario runs each
// generator at full speed under its clock route (IDs/s and a cell), then
// its twin named with bareSuffix without a route (IDs/s bare).
const (
	colBaseline = "baseline"
	colBare     = "bare"
	bareSuffix  = "-bare"
)

// clockSteps are the columns where the MVP must issue no duplicate and the
// negative controls must be caught.
var clockSteps = []string{"step-back-small", "step-back-5ms", "step-back-large", "leap-second", "http-step-back-large"}

// Doc markers around the generated table.
const (
	beginMarker = "<!-- exec-table begin -->"
	endMarker   = "<!-- exec-table end -->"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("exectable", flag.ContinueOnError)
	fl.SetOutput(stderr)
	libsPath := fl.String("libraries", "bench/js/libraries.json", "the rows' descriptions")
	doc := fl.String("doc", "", "replace the table between the exec-table markers in this Markdown file")
	repeat := fl.Int("repeat", 1, "run the table this many times (1 to 20) and list the cells whose verdict words differed")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *repeat < 1 || *repeat > 20 {
		fmt.Fprintf(stderr, "exectable: -repeat %d: want 1 to 20\n", *repeat)
		return 2
	}
	paths := fl.Args()
	if len(paths) == 0 {
		paths = []string{"scenarios/exec"}
	}
	var libs []library
	b, err := os.ReadFile(*libsPath)
	if err == nil {
		err = json.Unmarshal(b, &libs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "exectable: %s: %v\n", *libsPath, err)
		return 2
	}
	if *doc != "" {
		// Fail before the runs, not after them.
		if _, err := replaceTable(*doc, ""); err != nil {
			fmt.Fprintf(stderr, "exectable: %v\n", err)
			return 2
		}
	}
	suite, err := load(paths)
	if err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	began := time.Now()
	load0 := loadAvg()
	if err := exec.Registered().Prebuild(ctx, suite); err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	o := harness.Options{}
	if err := harness.Prepare(suite, o); err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	var reps []*harness.Report
	for i := range *repeat {
		o.SeedOffset = int64(i)
		rep, err := harness.Run(ctx, suite, o)
		if err != nil {
			fmt.Fprintf(stderr, "exectable: %v\n", err)
			return 2
		}
		reps = append(reps, rep)
		if ctx.Err() != nil {
			break
		}
	}
	var out bytes.Buffer
	cmd := "go run ./cmd/exectable -doc docs/exec-target.md scenarios/exec"
	if *repeat > 1 {
		cmd = fmt.Sprintf("go run ./cmd/exectable -doc docs/exec-target.md -repeat %d scenarios/exec", *repeat)
	}
	fmt.Fprintf(&out, "Generated by `%s` at commit %s: %d scenarios, %d runs, %s, ran in %s, one run at a time in real mode on %d CPUs, load average (1 min) %s at the start and %s at the end.\n\n",
		cmd, commit(), len(suite), reps[0].Summary.Runs, repetitions(len(reps)), time.Since(began).Round(time.Second), runtime.NumCPU(), load0, loadAvg())
	code := render(&out, stderr, reps, libs)
	stdout.Write(out.Bytes())
	if *doc != "" {
		if _, err := replaceTable(*doc, out.String()); err != nil {
			fmt.Fprintf(stderr, "exectable: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "exectable: wrote the table into %s\n", *doc)
	}
	return code
}

// replaceTable replaces the lines between the markers in the Markdown
// file with table, returning the new content; an empty table only checks
// that the markers are there, once each, in order.
func replaceTable(path, table string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i || strings.Count(s, beginMarker) != 1 || strings.Count(s, endMarker) != 1 {
		return nil, fmt.Errorf("%s: want one line %q and, after it, one line %q around the table", path, beginMarker, endMarker)
	}
	if table == "" {
		return b, nil
	}
	out := []byte(s[:i+len(beginMarker)] + "\n\n" + strings.TrimSpace(table) + "\n\n" + s[j:])
	return out, os.WriteFile(path, out, 0o644)
}

// load parses the scenario files (a directory gives its *.yaml files).
func load(paths []string) ([]*scenario.Scenario, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, _ := filepath.Glob(filepath.Join(p, "*.yaml"))
		sort.Strings(m)
		files = append(files, m...)
	}
	var suite []*scenario.Scenario
	var errs []error
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		suite = append(suite, s)
	}
	return suite, errors.Join(errs...)
}

// column names a scenario's fault column: exec-go-leap-second: leap-second.
func column(name string) string {
	return strings.TrimPrefix(strings.TrimPrefix(name, "exec-"), "go-")
}

// cell is one run and its scenario's duration.
type cell struct {
	r   *harness.Result
	dur time.Duration
}

// repetitions says how many times the table ran.
func repetitions(n int) string {
	if n == 1 {
		return "run once"
	}
	return fmt.Sprintf("run %d times over (the cells show the first; the cells that differed are listed under the table)", n)
}

// commit returns the checkout's short commit, with "+changes" when the
// tree differs from it (go run stamps no build information); "unknown"
// outside a git checkout.
func commit() string {
	out, err := osexec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := osexec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += "+changes"
	}
	return rev
}

// cellsOf indexes a report's runs by library and column, and lists the
// columns in scenario order.
func cellsOf(rep *harness.Report) (map[string]map[string]cell, []string) {
	var cols []string
	cells := map[string]map[string]cell{}
	for _, sr := range rep.Scenarios {
		c := column(sr.Name)
		if c != colBaseline && !contains(cols, c) {
			cols = append(cols, c)
		}
		for _, r := range sr.Runs {
			lib, col := r.Target, c
			if name, ok := strings.CutSuffix(lib, bareSuffix); ok && c == colBaseline {
				lib, col = name, colBare
			}
			if cells[lib] == nil {
				cells[lib] = map[string]cell{}
			}
			cells[lib][col] = cell{r, time.Duration(sr.Duration)}
		}
	}
	return cells, cols
}

// render prints the table of the first report, the cells whose verdict
// words differed in the others, and what each library promised, and
// returns the exit status (the worst over the reports).
func render(w, stderr io.Writer, reps []*harness.Report, libs []library) int {
	cells, cols := cellsOf(reps[0])
	cols = append([]string{colBaseline}, cols...)
	fmt.Fprintf(w, "| generator | IDs/s | IDs/s bare | bare ÷ route |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|--:|--:|--:|")
	for range cols {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	code := 0
	fail := func(c int, format string, args ...any) {
		fmt.Fprintf(stderr, "exectable: "+format+"\n", args...)
		if code == 0 || c == 2 {
			code = c
		}
	}
	var unknowns []string
	for i, rep := range reps {
		rc, _ := cellsOf(rep)
		for _, l := range libs {
			for _, c := range append(cols[:len(cols):len(cols)], colBare) {
				r := rc[l.Target][c].r
				if r == nil {
					continue
				}
				if r.Verdict == harness.Unknown || r.Error != "" || r.Figures.IDs == 0 {
					why := firstReason(r)
					if contains(l.Unknown, c) && r.Verdict == harness.Unknown && r.Figures.IDs > 0 {
						if i == 0 {
							unknowns = append(unknowns, fmt.Sprintf("- %s / %s (every run, expected): %s", l.Target, c, l.UnknownWhy))
						}
						continue
					}
					fail(2, "run %d: %s / %s: %s %s", i+1, l.Target, c, r.Verdict, why)
					unknowns = append(unknowns, fmt.Sprintf("- run %d, %s / %s: %s", i+1, l.Target, c, why))
				}
				if contains(clockSteps, c) {
					judge(l, c, r, fail)
				}
			}
		}
	}
	for _, l := range libs {
		row := cells[l.Target]
		fmt.Fprintf(w, "| %s | %s | %s | %s |", l.Target, rate(row[colBaseline]), rate(row[colBare]), ratio(row[colBare], row[colBaseline]))
		for _, c := range cols {
			cellText := "—"
			if r := row[c].r; r != nil {
				cellText = describe(r)
			}
			fmt.Fprintf(w, " %s |", cellText)
		}
		fmt.Fprintln(w)
	}
	if len(reps) > 1 {
		varied := stability(reps, libs, cols)
		if len(varied) == 0 {
			fmt.Fprintf(w, "\nIn all %d runs every cell had the same verdict words (the counts differ from run to run).\n", len(reps))
		} else {
			fmt.Fprintf(w, "\nCells whose verdict words differed between the %d runs (each run's cell, in order):\n\n%s\n", len(reps), strings.Join(varied, "\n"))
		}
	}
	if len(unknowns) > 0 {
		fmt.Fprintf(w, "\nUNKNOWN cells, and why:\n\n%s\n", strings.Join(unknowns, "\n"))
	}
	fmt.Fprintf(w, "\nIDs/s: IDs issued at full speed (one client asking 1,000 IDs per request as soon as the last answer came) over the 800 ms baseline run, under the clock route the faults use (libfaketime re-reading its file on every clock reading, or the Go runtime overlay); bare: the same with no route (`clock: none`; the Go peers built without the overlay), run right after it as the reference; bare ÷ route is what the route costs that generator (libfaketime's cost per clock reading is measured on its own under Cost above). Real mode on a shared machine: read them as ratios within one run, not as a benchmark.\n\n")
	fmt.Fprintf(w, "Cells: survived (nothing found, every call answered); **N dup** (IDs issued twice); **N order** (IDs not above their predecessor from the same process, per client); **N restart** (IDs after a restart not above every ID before it); refused N (calls the process refused: availability paid instead); down N (calls sent while the process was being started again); error N (calls that failed otherwise: a hung request, a process that exited); no IDs. Every fault was shown to reach the process by its own evidence (its clock reading, or the time its IDs carry) unless marked UNKNOWN.\n\n")
	fmt.Fprintf(w, "Generators, what their docs promise, and whether it held in this run:\n\n")
	for _, l := range libs {
		fmt.Fprintf(w, "- %s: %s (IDs: %s); promises %s.%s\n", l.Target, l.Package, l.ID, l.Promise, held(l, cells[l.Target], cols))
	}
	return code
}

// judge checks a clock-step cell of the MVP and the negative controls.
func judge(l library, c string, r *harness.Result, fail func(int, string, ...any)) {
	f := r.Figures
	switch {
	case l.Target == "mvp" && f.Duplicates > 0:
		fail(1, "the MVP generator issued %d duplicates under %s", f.Duplicates, c)
	case l.Control == "duplicates or order" && f.Duplicates == 0 && f.OrderViolations == 0:
		fail(1, "the negative control %s escaped %s (no duplicate, no ID out of order)", l.Target, c)
	case l.Control == "order" && f.OrderViolations == 0:
		fail(1, "the negative control %s escaped %s (no ID out of order)", l.Target, c)
	}
}

// held says, for each promise the table checks, whether it held in every
// column the library ran.
func held(l library, row map[string]cell, cols []string) string {
	var out []string
	for _, p := range l.Checks {
		var broke []string
		ran := 0
		for _, c := range append(cols[:len(cols):len(cols)], colBare) {
			r := row[c].r
			if r == nil {
				continue
			}
			ran++
			n := r.Figures.Duplicates
			if p == "ordered" {
				n = r.Figures.OrderViolations
			}
			if n > 0 {
				broke = append(broke, fmt.Sprintf("%s (%d)", c, n))
			}
		}
		what := map[string]string{"unique": "unique", "ordered": "in order within a process"}[p]
		if len(broke) == 0 {
			out = append(out, fmt.Sprintf(" %s: held in all %d runs.", what, ran))
		} else {
			out = append(out, fmt.Sprintf(" %s: **broken** in %s.", what, strings.Join(broke, ", ")))
		}
	}
	return strings.Join(out, "")
}

// rate renders a run's IDs per second over its scenario's duration.
func rate(x cell) string {
	if x.r == nil {
		return "—"
	}
	s := thousands(uint64(float64(x.r.Figures.IDs) / x.dur.Seconds()))
	if x.r.Verdict == harness.Unknown {
		s += " (UNKNOWN)"
	}
	return s
}

// ratio renders bare's IDs/s over route's: what the clock route costs.
func ratio(bare, route cell) string {
	if bare.r == nil || route.r == nil || route.r.Figures.IDs == 0 {
		return "—"
	}
	b := float64(bare.r.Figures.IDs) / bare.dur.Seconds()
	r := float64(route.r.Figures.IDs) / route.dur.Seconds()
	return strconv.FormatFloat(b/r, 'f', 1, 64) + "×"
}

// describe renders one cell (report.Cell, in Markdown).
func describe(r *harness.Result) string { return report.Cell(r, true) }

// words returns a cell's verdict words, without counts: what must not
// change from run to run.
func words(r *harness.Result) string { return report.CellWords(r) }

// stability lists the cells whose verdict words differed between the
// reports, with each report's cell.
func stability(reps []*harness.Report, libs []library, cols []string) []string {
	idx := make([]map[string]map[string]cell, len(reps))
	for i, rep := range reps {
		idx[i], _ = cellsOf(rep)
	}
	var out []string
	for _, l := range libs {
		for _, c := range cols {
			var texts []string
			same := true
			first := ""
			for i := range reps {
				r := idx[i][l.Target][c].r
				if r == nil {
					texts = append(texts, "—")
					continue
				}
				texts = append(texts, describe(r))
				if i == 0 {
					first = words(r)
				} else if words(r) != first {
					same = false
				}
			}
			if !same {
				out = append(out, fmt.Sprintf("- %s / %s: %s", l.Target, c, strings.Join(texts, " | ")))
			}
		}
	}
	return out
}

// firstReason is the first thing that explains an unknown run.
func firstReason(r *harness.Result) string {
	switch {
	case r.Error != "":
		return strings.SplitN(r.Error, "\n", 2)[0]
	case len(r.Unknown) > 0:
		return r.Unknown[0]
	case r.Figures.IDs == 0:
		return "no ID was issued"
	}
	for _, f := range r.Faults {
		if !f.Confirmed {
			return fmt.Sprintf("fault %s not confirmed: %s", f.Name, strings.Join(f.Detail, "; "))
		}
	}
	for _, c := range r.Checks {
		if c.Verdict == harness.Unknown {
			return c.Expr + ": " + c.Reason
		}
	}
	return string(r.Verdict)
}

// thousands renders n with comma separators.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// loadAvg returns the 1-minute load average, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
