// Command exectable runs the exec target's fault table (scenarios/exec)
// and prints it as Markdown: one row per generator, one column per fault,
// each cell survived / N duplicates / refused / n/a with the reason.
//
//	go run ./cmd/exectable [-libraries bench/js/libraries.json] [DIR|FILE ...]
//
// Whatever a library does wrong is shown as found; the exit status judges
// only the harness and its controls: 2 when a fault could not be confirmed
// (or a run failed to start), 1 when the MVP generator issued a duplicate
// under a running clock step or the deliberately broken generator escaped
// one, 0 otherwise.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target/exec"
)

// library is one row's description (bench/js/libraries.json).
type library struct {
	Target  string `json:"target"`
	Package string `json:"package"`
	ID      string `json:"id"`
	Promise string `json:"promise"`
}

// clockSteps are the columns where the MVP must issue no duplicate and the
// broken generator must be caught.
var clockSteps = []string{"step-back-small", "step-back-large", "leap-second"}

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
	if err := fl.Parse(args); err != nil {
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
	suite, err := load(paths)
	if err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	began := time.Now()
	if err := exec.Registered().Prebuild(ctx, suite); err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	o := harness.Options{}
	if err := harness.Prepare(suite, o); err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	rep, err := harness.Run(ctx, suite, o)
	if err != nil {
		fmt.Fprintf(stderr, "exectable: %v\n", err)
		return 2
	}
	load1 := loadAvg()
	fmt.Fprintf(stdout, "Exec-target fault table: %d scenarios, ran in %s, load average %s.\n\n", len(suite), time.Since(began).Round(time.Second), load1)
	return render(stdout, stderr, rep, libs)
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

// render prints the table and returns the exit status.
func render(w, stderr io.Writer, rep *harness.Report, libs []library) int {
	var cols []string
	cells := map[string]map[string]*harness.Result{}
	for _, sr := range rep.Scenarios {
		c := column(sr.Name)
		if !contains(cols, c) {
			cols = append(cols, c)
		}
		for _, r := range sr.Runs {
			if cells[r.Target] == nil {
				cells[r.Target] = map[string]*harness.Result{}
			}
			cells[r.Target][c] = r
		}
	}
	fmt.Fprintf(w, "| generator |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|")
	for range cols {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	code := 0
	var notes []string
	for _, l := range libs {
		fmt.Fprintf(w, "| %s |", l.Target)
		for _, c := range cols {
			r := cells[l.Target][c]
			cell := "—"
			switch {
			case r != nil:
				cell = describe(r)
				if r.Verdict == harness.Unknown || r.Error != "" || r.Figures.IDs == 0 {
					code = 2
					fmt.Fprintf(stderr, "exectable: %s / %s: %s %s\n", l.Target, c, r.Verdict, r.Error)
				}
				step := contains(clockSteps, c)
				if l.Target == "mvp" && step && r.Figures.Duplicates > 0 && code == 0 {
					code = 1
					fmt.Fprintf(stderr, "exectable: the MVP generator issued %d duplicates under %s\n", r.Figures.Duplicates, c)
				}
				if l.Target == "broken" && step && r.Figures.Duplicates == 0 && code == 0 {
					code = 1
					fmt.Fprintf(stderr, "exectable: the broken generator escaped %s (0 duplicates)\n", c)
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nCells: survived (0 duplicates, every call answered), refused N (0 duplicates, N calls refused or unanswered: availability paid instead), **N dup** (IDs issued twice). Every fault was confirmed by the clock probe unless marked UNKNOWN.\n\n")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintf(w, "\nGenerators and what their docs promise:\n\n")
	for _, l := range libs {
		fmt.Fprintf(w, "- %s: %s; promises %s\n", l.Target, l.Package, l.Promise)
	}
	return code
}

// describe renders one cell.
func describe(r *harness.Result) string {
	f := r.Figures
	var s string
	switch {
	case f.Duplicates > 0:
		s = fmt.Sprintf("**%d dup**", f.Duplicates)
	case f.IDs == 0:
		s = "no IDs"
	case f.Refusals > 0:
		s = fmt.Sprintf("refused %d", f.Refusals)
	default:
		s = "survived"
	}
	if r.Verdict == harness.Unknown {
		s += " (UNKNOWN)"
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
