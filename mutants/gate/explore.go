package main

// The explore gate: each mutant faces `snowchaos explore` instead of the
// built-in suite. Explore draws schedules with a fixed seed against the
// in-process generator (the nodes' policies drawn per node) until the
// first failure or the per-mutant budget; a failure kills the mutant. The
// shrunk YAML of the kill must fail on the mutant's build (exit 1) and
// pass on the clean build (exit 0). A mutant that weakens the verifier
// makes failures vanish instead: the controls catch it. They are the
// schedules explore found, on the clean build, against each known-bad
// reference (original and shrunk): on a mutant, a control that no longer
// fails every check it failed on the clean build kills the mutant.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/reference"
)

// exploreConfig bounds the explore gate.
type exploreConfig struct {
	seed      int64
	schedules int
	budget    time.Duration
	target    string
}

// referenceSpace is the space the known-bad references are explored in.
const referenceSpace = "kinds: [step, freeze, leap, smear, slew, drift, pause, revert, restart]\n"

// exploreFind is the part of explore's JSON report the gate reads.
type exploreFind struct {
	Schedule  int      `json:"schedule"`
	Target    string   `json:"target"`
	Failed    []string `json:"failed"`
	Invariant string   `json:"invariant"`
	Original  string   `json:"original_yaml"`
	Shrunk    string   `json:"shrunk_yaml"`
	Faults    int      `json:"shrunk_faults"`
	Lines     int      `json:"shrunk_lines"`
}

type exploreReport struct {
	Schedules int           `json:"schedules"`
	Runs      int           `json:"runs"`
	Failed    int           `json:"failed"`
	Unknown   int           `json:"unknown"`
	Finds     []exploreFind `json:"finds"`
}

// exploreKill is what the explore gate says of one mutant or reference.
type exploreKill struct {
	Name, Class string
	Outcome     string // killed, survived, invalid, unknown; for a reference: found, missed
	By          string // the first failure, or the control that escaped
	Schedules   int    // schedules drawn up to the first failure
	Lines       int    // the shrunk YAML's lines
	Faults      int    // the shrunk YAML's faults
	Repro       string // what the shrunk YAML did on the mutant and the clean build
	Duration    time.Duration
}

// control is a schedule explore found against a known-bad reference, with
// the checks it failed on the clean build.
type control struct {
	name   string
	path   string
	failed []string // subjects
}

// runExploreGate runs the explore gate and returns its rows: the known-bad
// references first, then the mutants.
func runExploreGate(ctx context.Context, work string, ms []*Mutant, cfg exploreConfig, jobs int) ([]exploreKill, int) {
	base := filepath.Join(work, "baseline")
	if err := build(ctx, base, nil); err != nil {
		fatal(1, "baseline build: %v", err)
	}
	// The clean build must find nothing in the budget.
	began := time.Now()
	rep, code, err := explore(ctx, base, cfg, cfg.target, filepath.Join(work, "baseline-explore"))
	if err != nil {
		fatal(1, "baseline explore: %v", err)
	}
	if rep.Failed > 0 {
		f := rep.Finds[0]
		fatal(1, "baseline: explore found a failure on the clean build (exit %d): schedule %d: %s\n%s", code, f.Schedule, strings.Join(f.Failed, ", "), f.Shrunk)
	}
	fmt.Fprintf(os.Stderr, "baseline: explore --target %s: %d schedules, nothing found, %d unknown (%s)\n", cfg.target, rep.Schedules, rep.Unknown, time.Since(began).Round(time.Second))

	// The known-bad references, on the clean build: each must be found,
	// and its shrunk YAML must fail it and pass the safe generator.
	var rows []exploreKill
	var controls []control
	worst := 0
	for _, ref := range reference.All() {
		k, cs := exploreReference(ctx, base, work, ref, cfg)
		rows = append(rows, k)
		controls = append(controls, cs...)
		fmt.Fprintf(os.Stderr, "%-40s %-8s %-6s %s\n", k.Name, k.Outcome, k.Duration.Round(time.Second), k.By)
		if k.Outcome != "found" {
			worst = 1
		}
	}

	kills := make([]exploreKill, len(ms))
	eachAtOnce(len(ms), jobs, func(i int) string {
		k := exploreMutant(ctx, base, work, ms[i], cfg, controls)
		kills[i] = k
		return fmt.Sprintf("%-40s %-8s %-6s %s", k.Name, k.Outcome, k.Duration.Round(time.Second), k.By)
	})
	for _, k := range kills {
		worst = max(worst, exitFor(k.Outcome))
	}
	return append(rows, kills...), worst
}

// exploreReference explores a known-bad reference on the clean build and
// returns its row and its controls.
func exploreReference(ctx context.Context, base, work string, ref reference.Info, cfg exploreConfig) (exploreKill, []control) {
	start := time.Now()
	k := exploreKill{Name: ref.Name, Class: "reference"}
	dir := filepath.Join(work, "ref-"+ref.Name)
	// Clock faults and restarts only: every reference ignores leases, so
	// a clone would find them all the same way; these find each one's
	// own bug, and make controls that fail as many checks as it can.
	space := filepath.Join(work, "reference-space.yaml")
	if err := os.WriteFile(space, []byte(referenceSpace), 0o644); err != nil {
		k.Outcome, k.By = "unknown", err.Error()
		return k, nil
	}
	rep, _, err := explore(ctx, base, cfg, ref.Name, dir, "--space", space)
	k.Duration = time.Since(start)
	if err != nil {
		k.Outcome, k.By = "unknown", err.Error()
		return k, nil
	}
	if len(rep.Finds) == 0 {
		k.Outcome, k.By, k.Schedules = "missed", fmt.Sprintf("nothing in %d schedules", rep.Schedules), rep.Schedules
		return k, nil
	}
	f := rep.Finds[0]
	k.Outcome, k.By, k.Schedules, k.Lines, k.Faults = "found", f.Failed[0], f.Schedule+1, f.Lines, f.Faults
	var cs []control
	for _, y := range []struct{ kind, text string }{{"original", f.Original}, {"shrunk", f.Shrunk}} {
		if y.text == "" {
			continue
		}
		path := filepath.Join(dir, ref.Name+"-"+y.kind+".yaml")
		if err := os.WriteFile(path, []byte(y.text), 0o644); err != nil {
			k.Outcome, k.By = "unknown", err.Error()
			return k, nil
		}
		code, failed, _ := runFile(ctx, base, path)
		if code != 1 {
			k.Outcome, k.By = "unknown", fmt.Sprintf("its %s YAML exits %d on the clean build, want 1", y.kind, code)
			return k, nil
		}
		cs = append(cs, control{name: ref.Name + " " + y.kind, path: path, failed: failed})
	}
	// The shrunk YAML against the safe generator must pass: the failure
	// is the reference's bug, not the schedule's.
	safe := filepath.Join(dir, ref.Name+"-shrunk-as-wait.yaml")
	text := strings.Replace(f.Shrunk, "targets: ["+ref.Name+"]", "targets: [wait]", 1)
	if err := os.WriteFile(safe, []byte(text), 0o644); err != nil {
		k.Outcome, k.By = "unknown", err.Error()
		return k, nil
	}
	code, _, _ := runFile(ctx, base, safe)
	k.Repro = fmt.Sprintf("run: exit 1 on %s, exit %d on wait", ref.Name, code)
	if code != 0 {
		k.Outcome = "unknown"
		k.By += fmt.Sprintf("; its shrunk YAML with target wait exits %d, want 0", code)
	}
	return k, cs
}

// exploreMutant builds mutant m, explores it, and checks the controls.
func exploreMutant(ctx context.Context, base, work string, m *Mutant, cfg exploreConfig, controls []control) (k exploreKill) {
	start := time.Now()
	k = exploreKill{Name: m.Name, Class: m.Class}
	defer func() { k.Duration = time.Since(start) }()
	bin, err := buildMutant(ctx, work, m)
	if err != nil {
		k.Outcome, k.By = "invalid", err.Error()
		return k
	}
	dir := filepath.Join(work, m.Name, "explore")
	rep, _, err := explore(ctx, bin, cfg, cfg.target, dir)
	if err != nil {
		k.Outcome, k.By = "unknown", err.Error()
		return k
	}
	if len(rep.Finds) > 0 {
		f := rep.Finds[0]
		k.Outcome, k.By, k.Schedules, k.Lines, k.Faults = "killed", f.Failed[0], f.Schedule+1, f.Lines, f.Faults
		if f.Shrunk == "" {
			// A call that never returned: explore shrinks nothing then.
			k.Repro = "not shrunk: a call never returned"
			return k
		}
		path := filepath.Join(dir, "shrunk.yaml")
		if err := os.WriteFile(path, []byte(f.Shrunk), 0o644); err != nil {
			k.Outcome, k.By = "unknown", err.Error()
			return k
		}
		mc, _, _ := runFile(ctx, bin, path)
		bc, _, _ := runFile(ctx, base, path)
		k.Repro = fmt.Sprintf("run: exit %d planted, exit %d clean", mc, bc)
		if mc != 1 || bc != 0 {
			k.Outcome = "unknown"
			k.By += " (the shrunk YAML does not reproduce: want exit 1 planted, 0 clean)"
		}
		return k
	}
	// Nothing found: the controls must still fail as they did.
	for _, c := range controls {
		code, failed, _ := runFile(ctx, bin, c.path)
		var lost []string
		for _, s := range c.failed {
			if !slices.Contains(failed, s) {
				lost = append(lost, s)
			}
		}
		if code != 1 || len(lost) > 0 {
			k.Outcome = "killed"
			k.By = fmt.Sprintf("control %s escaped (exit %d; no longer fails %s)", c.name, code, strings.Join(lost, ", "))
			k.Schedules = rep.Schedules
			k.Repro = "control"
			return k
		}
	}
	k.Outcome, k.By, k.Schedules = "survived", fmt.Sprintf("nothing in %d schedules, controls held", rep.Schedules), rep.Schedules
	return k
}

// buildMutant builds m's binary and returns its path.
func buildMutant(ctx context.Context, work string, m *Mutant) (string, error) {
	dir := filepath.Join(work, m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	overlay := map[string]string{}
	for i, e := range m.Edits {
		src, err := os.ReadFile(e.File)
		if err != nil {
			return "", err
		}
		if abs, ok := overlay[mustAbs(e.File)]; ok {
			if src, err = os.ReadFile(abs); err != nil {
				return "", err
			}
		}
		mutated, err := apply(src, e)
		if err != nil {
			return "", fmt.Errorf("edits[%d]: %s: %v (the code changed: update the mutant)", i, e.File, err)
		}
		out := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(e.File)))
		if err := os.WriteFile(out, mutated, 0o644); err != nil {
			return "", err
		}
		overlay[mustAbs(e.File)] = out
	}
	bin := filepath.Join(dir, "snowchaos")
	if err := build(ctx, bin, overlay); err != nil {
		return "", fmt.Errorf("build: %v", err)
	}
	return bin, nil
}

// explore runs snowchaos explore with the gate's bounds and reads its
// JSON report.
func explore(ctx context.Context, bin string, cfg exploreConfig, tgt, dir string, extra ...string) (*exploreReport, int, error) {
	args := []string{"explore", "--json", "--first", "--shrink", "1", "--shrink-budget", "20s", "--stall-timeout", "3s",
		"--seed", strconv.FormatInt(cfg.seed, 10), "--schedules", strconv.Itoa(cfg.schedules), "--budget", cfg.budget.String(),
		"--target", tgt, "--out", dir}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(ctx, cfg.budget+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return nil, 0, err
	}
	var rep exploreReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, code, fmt.Errorf("explore exit %d, report unreadable (%v): %s", code, err, tail(stderr.String()))
	}
	return &rep, code, nil
}

// runFile runs snowchaos run on one file and returns its exit code and
// the subjects of its failed checks.
func runFile(ctx context.Context, bin, path string) (int, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--report", "json", "--stall-timeout", "15s", path)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return -1, nil, err
	}
	var rep harness.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return code, nil, err
	}
	var subjects []string
	for _, s := range rep.Scenarios {
		for _, r := range s.Runs {
			for _, c := range r.Checks {
				if c.Verdict == harness.Fail && !c.Info {
					sub, _, _ := strings.Cut(c.Expr, " ")
					if !slices.Contains(subjects, sub) {
						subjects = append(subjects, sub)
					}
				}
			}
		}
	}
	return code, subjects, nil
}

// renderExplore returns the explore gate's matrix as Markdown.
func renderExplore(rows []exploreKill, cfg exploreConfig) string {
	var b strings.Builder
	b.WriteString("| planted bug or reference | class | explore | first failure (or the control that escaped) | schedules to it | shrunk YAML (lines, faults) | shrunk YAML with `snowchaos run` |\n|---|---|---|---|---|---|---|\n")
	killed, muts, found, refs := 0, 0, 0, 0
	for _, k := range rows {
		if k.Class == "reference" {
			refs++
			if k.Outcome == "found" {
				found++
			}
		} else {
			muts++
			if k.Outcome == "killed" {
				killed++
			}
		}
		size := "-"
		if k.Lines > 0 {
			size = fmt.Sprintf("%d, %d", k.Lines, k.Faults)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %d | %s | %s |\n", k.Name, k.Class, k.Outcome,
			strings.ReplaceAll(k.By, "|", `\|`), k.Schedules, size, k.Repro)
	}
	fmt.Fprintf(&b, "\nexplore (seed %d, target %s, at most %d schedules or %s each, no built-in scenario): %d of %d mutants killed, %d of %d known-bad references found.\n",
		cfg.seed, cfg.target, cfg.schedules, cfg.budget, killed, muts, found, refs)
	return b.String()
}

// The explore matrix goes between these markers in the -matrix file.
const (
	exploreBegin = "<!-- explore-matrix: make explore-gate writes this table -->"
	exploreEnd   = "<!-- /explore-matrix -->"
)
