// Package survival runs the peer scenarios (scenarios/peers) through the
// snowchaos harness with the peers registered as targets, and renders the
// fault-survival table: per peer and fault, the duplicates, the longest
// wait, the refusals and the largest embedded-time lead, or "n/a" with the
// reason when the fault cannot reach the peer.
package survival

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/snowchaos/snowchaos/bench/internal/mdwrite"
	"github.com/snowchaos/snowchaos/bench/peers"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Load parses the scenario files named by paths; a directory gives its
// *.yaml and *.yml files in name order. Every parse error is reported.
func Load(paths ...string) ([]*scenario.Scenario, error) {
	var files []string
	for _, a := range paths {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, _ := filepath.Glob(filepath.Join(a, pat))
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml scenario files", a)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	var suite []*scenario.Scenario
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := scenario.Parse(f, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		suite = append(suite, s)
	}
	return suite, errors.Join(errs...)
}

// Run validates the suite and runs it with the harness (the peer targets
// are registered by importing package peers).
func Run(ctx context.Context, suite []*scenario.Scenario, o harness.Options) (*harness.Report, error) {
	if err := harness.Prepare(suite, o); err != nil {
		return nil, err
	}
	return harness.Run(ctx, suite, o)
}

// Cell is one peer under one scenario.
type Cell struct {
	// Run is the harness's result, nil when the peer did not run.
	Run *harness.Result
	// NA says why the scenario's faults cannot reach the peer ("" when
	// they can, or the row is not a peer).
	NA string
}

// Table is the survival matrix: one row per target, one column per
// scenario.
type Table struct {
	Scenarios []*harness.ScenarioResult
	Rows      []string
	Cells     map[string][]Cell // row: one cell per scenario
}

// Build assembles the table from a report: the peers first (every one of
// them, run or not), then the other targets in order of appearance.
func Build(rep *harness.Report) *Table {
	t := &Table{Scenarios: rep.Scenarios, Cells: map[string][]Cell{}}
	seen := map[string]bool{}
	for _, p := range peers.All() {
		t.Rows = append(t.Rows, p.Name)
		seen[p.Name] = true
	}
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			if !seen[r.Target] {
				seen[r.Target] = true
				t.Rows = append(t.Rows, r.Target)
			}
		}
	}
	for _, row := range t.Rows {
		cells := make([]Cell, len(rep.Scenarios))
		for i, sr := range rep.Scenarios {
			for _, r := range sr.Runs {
				if r.Target == row {
					cells[i].Run = r
				}
			}
			if p, ok := peers.Lookup(row); ok && cells[i].Run == nil && sr.Scenario != nil {
				cells[i].NA = NotApplicable(p, sr.Scenario)
			}
		}
		t.Cells[row] = cells
	}
	return t
}

// NotApplicable returns why some fault of s cannot reach peer p, or ""
// when every fault can.
func NotApplicable(p *peers.Peer, s *scenario.Scenario) string {
	for _, f := range s.Faults {
		if why := p.NotApplicable(f); why != "" {
			return fmt.Sprintf("%s: %s", f.Kind, why)
		}
	}
	return ""
}

// cell renders one cell: "dups · max wait · refusals · max lead", with
// duplicates in bold and an expected failure marked.
func (c Cell) String() string {
	switch {
	case c.Run == nil && c.NA != "":
		return "n/a"
	case c.Run == nil:
		return "—"
	case c.Run.Error != "":
		return "error (" + string(c.Run.Verdict) + ")"
	}
	f := c.Run.Figures
	dups := fmt.Sprintf("%d", f.Duplicates)
	if f.Duplicates > 0 {
		dups = "**" + dups + " dup**"
	}
	s := fmt.Sprintf("%s · %s · %d · %s", dups, f.MaxWait, f.Refusals, f.MaxLead)
	if c.Run.Verdict != harness.Pass {
		s += " (" + strings.ToUpper(string(c.Run.Verdict)) + ")"
	}
	return s
}

// Markdown writes the table, the notes on every n/a cell, and one line
// per peer on the clock it reads.
func (t *Table) Markdown(w io.Writer) error {
	ew := &mdwrite.Writer{W: w}
	ew.Printf("Cells: duplicates · longest wait · refusals (failed calls, including calls while a restarted node was down) · largest embedded-time lead over true time. Real-mode waits include the host's scheduling noise: compare with the baseline column. **dup**: IDs issued twice (expected for the peers that have no defence: the scenario states it, so the run passes while showing them). n/a: the fault cannot reach the peer (notes below). —: not run.\n\n")
	ew.Printf("| peer |")
	for _, sr := range t.Scenarios {
		ew.Printf(" %s |", strings.TrimPrefix(sr.Name, "peers-"))
	}
	ew.Printf("\n|---|")
	for range t.Scenarios {
		ew.Printf("---|")
	}
	ew.Printf("\n")
	type note struct{ row, scen, why string }
	var notes []note
	for _, row := range t.Rows {
		ew.Printf("| %s |", row)
		for i, c := range t.Cells[row] {
			ew.Printf(" %s |", c.String())
			if c.Run == nil && c.NA != "" {
				notes = append(notes, note{row, strings.TrimPrefix(t.Scenarios[i].Name, "peers-"), c.NA})
			}
		}
		ew.Printf("\n")
	}
	if len(notes) > 0 {
		ew.Printf("\nNot applicable:\n\n")
		for _, n := range notes {
			ew.Printf("- %s / %s: %s\n", n.row, n.scen, n.why)
		}
	}
	ew.Printf("\nClocks the peers read:\n\n")
	for _, p := range peers.All() {
		ew.Printf("- %s — %s (%s): %s\n", p.Name, p.Module, p.Licence, p.Clock)
	}
	return ew.Err
}
