package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness"
)

// reportOf builds a report of the named scenarios (1 s each), each run
// given as target -> figures.
func reportOf(scenarios map[string]map[string]harness.Figures) *harness.Report {
	rep := &harness.Report{}
	for _, name := range []string{"exec-baseline", "exec-step-back-small", "exec-go-leap-second"} {
		runs, ok := scenarios[name]
		if !ok {
			continue
		}
		sr := &harness.ScenarioResult{Name: name, Duration: harness.Duration(time.Second)}
		for _, t := range []string{"mvp", "mvp-bare", "broken", "uuid-v7", "uuid-v7-bare", "uuid-v7-stateless", "sonyflake"} {
			if f, ok := runs[t]; ok {
				v := harness.Pass
				if f.IDs == 0 {
					v = harness.Unknown
				}
				sr.Runs = append(sr.Runs, &harness.Result{Target: t, Verdict: v, Figures: f})
			}
		}
		rep.Scenarios = append(rep.Scenarios, sr)
		rep.Summary.Runs += len(sr.Runs)
	}
	return rep
}

var testLibs = []library{
	{Target: "mvp", Package: "mvp", ID: "decimal", Promise: "no duplicate", Checks: []string{"unique", "ordered"}},
	{Target: "broken", Package: "broken", ID: "decimal", Promise: "nothing", Control: "duplicates or order"},
	{Target: "uuid-v7", Package: "uuid", ID: "uuidv7", Promise: "uniqueness", Checks: []string{"unique"}},
	{Target: "uuid-v7-stateless", Package: "uuid", ID: "uuidv7", Promise: "nothing", Control: "order"},
	{Target: "sonyflake", Package: "sonyflake", ID: "decimal", Promise: "unique", Checks: []string{"unique"}},
}

// TestRender: the table's cells, throughput columns and promises, and the
// exit status: 0 when the controls are caught and the MVP holds, 1 when
// the MVP repeats an ID under a clock step or a control escapes, 2 when a
// run issued nothing.
func TestRender(t *testing.T) {
	good := map[string]map[string]harness.Figures{
		"exec-baseline": {"mvp": {IDs: 120_000}, "mvp-bare": {IDs: 1_250_000}, "uuid-v7": {IDs: 30_000}, "uuid-v7-bare": {IDs: 300_000}, "broken": {IDs: 100_000}},
		"exec-step-back-small": {
			"mvp":               {IDs: 900, Requests: 100, Refusals: 24, Refused: 24},
			"broken":            {IDs: 1000, Duplicates: 12, OrderViolations: 2},
			"uuid-v7":           {IDs: 1000},
			"uuid-v7-stateless": {IDs: 1000, OrderViolations: 3307},
		},
		"exec-go-leap-second": {"sonyflake": {IDs: 1000, Duplicates: 5, RestartViolations: 7}},
	}
	var out, errs bytes.Buffer
	if code := render(&out, &errs, []*harness.Report{reportOf(good)}, testLibs); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{
		"| generator | IDs/s | IDs/s bare | bare ÷ route | baseline | step-back-small | leap-second |",
		"| mvp | 120,000 | 1,250,000 | 10.4× | survived | refused 24 | — |",
		"| broken | 100,000 | — | — | survived | **12 dup**, **2 order** | — |",
		"| uuid-v7 | 30,000 | 300,000 | 10.0× | survived | survived | — |",
		"| uuid-v7-stateless | — | — | — | — | **3307 order** | — |",
		"| sonyflake | — | — | — | — | — | **5 dup**, **7 restart** |",
		"- mvp: mvp (IDs: decimal); promises no duplicate. unique: held in all 3 runs. in order within a process: held in all 3 runs.",
		"- uuid-v7: uuid (IDs: uuidv7); promises uniqueness. unique: held in all 3 runs.",
		"- sonyflake: sonyflake (IDs: decimal); promises unique. unique: **broken** in leap-second (5).",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	for _, c := range []struct {
		name     string
		scenario string
		target   string
		f        harness.Figures
		code     int
		stderr   string
	}{
		{"mvp repeats under a step", "exec-step-back-small", "mvp", harness.Figures{IDs: 900, Duplicates: 1}, 1, "MVP generator issued 1 duplicates"},
		{"broken escapes", "exec-step-back-small", "broken", harness.Figures{IDs: 1000}, 1, "broken escaped step-back-small"},
		{"broken caught by order alone", "exec-step-back-small", "broken", harness.Figures{IDs: 1000, OrderViolations: 1}, 0, ""},
		{"stateless UUIDv7 escapes", "exec-step-back-small", "uuid-v7-stateless", harness.Figures{IDs: 1000, Duplicates: 3}, 1, "uuid-v7-stateless escaped"},
		{"a run without IDs", "exec-baseline", "uuid-v7-bare", harness.Figures{}, 2, "uuid-v7 / bare: unknown"},
	} {
		sc := map[string]map[string]harness.Figures{}
		for k, v := range good {
			sc[k] = map[string]harness.Figures{}
			for t, f := range v {
				sc[k][t] = f
			}
		}
		sc[c.scenario][c.target] = c.f
		var out, errs bytes.Buffer
		if code := render(&out, &errs, []*harness.Report{reportOf(sc)}, testLibs); code != c.code || !strings.Contains(errs.String(), c.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", c.name, code, errs.String(), c.code, c.stderr)
		}
	}
}

// TestStability: over several runs, a cell whose verdict words differ
// (not its counts) is listed with every run's cell; down calls and
// refusals are told apart.
func TestStability(t *testing.T) {
	a := map[string]map[string]harness.Figures{
		"exec-step-back-small": {
			"mvp":    {IDs: 900, Requests: 100, Refusals: 30, Refused: 24, Down: 6},
			"broken": {IDs: 1000, Duplicates: 12},
		},
	}
	b := map[string]map[string]harness.Figures{
		"exec-step-back-small": {
			"mvp":    {IDs: 900, Requests: 100, Refusals: 20, Refused: 17, Down: 3},
			"broken": {IDs: 1000, OrderViolations: 2},
		},
	}
	var out, errs bytes.Buffer
	render(&out, &errs, []*harness.Report{reportOf(a), reportOf(b)}, testLibs)
	table := out.String()
	for _, want := range []string{
		"| mvp | — | — | — | — | refused 24, down 6 |",
		"- broken / step-back-small: **12 dup** | **2 order**",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "- mvp / step-back-small") {
		t.Errorf("mvp's cell differs only in counts, yet is listed:\n%s", table)
	}
}

// TestReplaceTable: the table goes between the markers, again and again
// (the doc around it untouched); a doc without both markers is an error
// before any run.
func TestReplaceTable(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "doc.md")
	head, tail := "# Title\n\nbefore\n\n", "\n\nafter\n"
	os.WriteFile(doc, []byte(head+beginMarker+"\nold table\n"+endMarker+tail), 0o644)
	for _, table := range []string{"| a |\n|---|\n| 1 |\n", "| b |\n"} {
		if _, err := replaceTable(doc, table); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(doc)
		if want := head + beginMarker + "\n\n" + strings.TrimSpace(table) + "\n\n" + endMarker + tail; string(b) != want {
			t.Fatalf("doc:\n%s\nwant:\n%s", b, want)
		}
	}
	for _, bad := range []string{"no markers", endMarker + "\n" + beginMarker, beginMarker + beginMarker + endMarker} {
		os.WriteFile(doc, []byte(bad), 0o644)
		if _, err := replaceTable(doc, ""); err == nil || !strings.Contains(err.Error(), "exec-table begin") {
			t.Errorf("doc %q: %v, want an error naming the markers", bad, err)
		}
	}
}

// TestDocHasMarkers: docs/exec-target.md is where make exec-table writes
// its table.
func TestDocHasMarkers(t *testing.T) {
	if _, err := replaceTable("../../docs/exec-target.md", ""); err != nil {
		t.Fatal(err)
	}
}
