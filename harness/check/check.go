// Package check is snowchaos check: one generator, given as a command,
// under the exec target's standard fault table (a baseline, steps back
// small and large, a repeated 5 ms step, a leap second, a frozen clock,
// restarts in the same millisecond and after a rewind, a duplicate worker
// ID), one real-mode scenario per fault, and one row per fault in the
// words of the table in docs/exec-target.md.
//
// Detect starts the command once, with no fault, and works out what the
// user did not say: whether it prints a ready line, the kind of its IDs,
// the layout and epoch of a Snowflake, whether it answers the time
// request, how long it takes to start, and whether clock faults can reach
// it at all (libfaketime loaded, no Go binary behind a wrapper). Suite
// writes the scenarios as ordinary YAML, so a user can graduate to
// snowchaos run and edit them; Rows reads the report back as the table's
// row.
package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Config is what check knows of the generator: what the user said, and
// what Detect filled in.
type Config struct {
	// Command is the program and its arguments; Dir its working directory
	// (absolute).
	Command []string
	Dir     string
	// Protocol is scenario.ProtocolStdio or ProtocolHTTP; URL, Format and
	// Field the HTTP request and answer (see scenario.Exec).
	Protocol, URL, Format, Field string
	// TimeURL is where an HTTP process answers the time request.
	TimeURL string
	// Time is the exec block's time setting (auto, on, off).
	Time string
	// Ready is the line a stdio process prints once it takes requests
	// ("" for none).
	Ready string
	// ID is the kind of ID (scenario.IDDecimal or a verify.Kind name).
	ID string
	// Layout and Epoch describe a decimal Snowflake (a preset or T/N/S
	// split, and RFC 3339).
	Layout, Epoch string
	// WorkerEnv is the environment variable the worker ID goes in.
	WorkerEnv string
	// Env adds environment variables, name=value.
	Env []string
	// Clock is how faults reach the process (faketime, go, none); GoBuild
	// the Go package to rebuild for clock: go.
	Clock, GoBuild string
	// Rate is the requests per second each fault scenario sends the node
	// (500 by default); Batch the IDs per request (10).
	Rate, Batch int
	// StartTime is how long the process took to start in Detect: the
	// restart and clone scenarios give each start that long and more.
	StartTime time.Duration
	// Timeout bounds one request (10 s by default).
	Timeout time.Duration
}

// Defaults.
const (
	DefaultRate      = 500
	DefaultBatch     = 10
	DefaultWorkerEnv = "WORKER_ID"
	// Worker is the worker ID the node runs with.
	Worker = 1
)

// Faults are the rows of the standard table, in order: each names a
// scenario of Suite.
var Faults = []string{"baseline", "step-back-small", "step-back-5ms", "step-back-large", "leap-second", "frozen-clock", "restart-same-ms", "restart-after-rewind", "duplicate-worker"}

// faultDoc says what each row does, for the scenario's description and
// the check's legend.
var faultDoc = map[string]string{
	"baseline":             "no fault, at full speed: one client asking 1,000 IDs per request as soon as the last answer came",
	"step-back-small":      "an NTP step of 50 ms backwards while the process runs, calls sent back to back around it",
	"step-back-5ms":        "a step of 5 ms backwards, five times 400 ms apart, calls sent back to back around each",
	"step-back-large":      "an NTP step of 1 s backwards while the process runs",
	"leap-second":          "a leap second inserted without smearing: the wall steps back 1 s at the instant",
	"frozen-clock":         "the wall clock stands still for 300 ms, then resumes where it would have been",
	"restart-same-ms":      "kill -9 and an immediate restart, twice",
	"restart-after-rewind": "kill -9; while the process is down the host clock is stepped back 1 s; then it starts again",
	"duplicate-worker":     "a second process with the same worker ID runs for 2 s alongside the first",
}

// Doc returns what fault row does.
func Doc(fault string) string { return faultDoc[fault] }

// File is one scenario of the suite: its name and YAML text.
type File struct {
	Name, Text string
}

// Suite returns the scenarios of the fault table for cfg, one file per
// fault of only (all when empty), as YAML a person can read and
// snowchaos run can run.
func Suite(cfg Config, only []string) ([]File, error) {
	block, err := execBlock(cfg)
	if err != nil {
		return nil, err
	}
	node := fmt.Sprintf("{name: a, worker: %d", Worker)
	if cfg.ID == scenario.IDDecimal || cfg.ID == "" {
		if cfg.Epoch != "" {
			node += ", epoch: " + cfg.Epoch
		}
		if cfg.Layout != "" {
			node += ", layout: " + quote(cfg.Layout)
		}
	}
	node += "}"
	rate, batch := cfg.Rate, cfg.Batch
	if rate <= 0 {
		rate = DefaultRate
	}
	if batch <= 0 {
		batch = DefaultBatch
	}
	// A restart or a clone needs the process's start time on top of the
	// fault's own schedule to serve.
	start := 3 * max(cfg.StartTime, 300*time.Millisecond)
	ms := func(d time.Duration) string { return scenario.FormatDuration(d.Round(time.Millisecond)) }
	var out []File
	for _, name := range Faults {
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		paced := func(burst string) string {
			return fmt.Sprintf("{per: node, clients: 2, batch: %d, rate: %d/s, fault_burst: %s}", batch, rate, burst)
		}
		load := paced("10ms")
		var dur time.Duration
		var faults []string
		switch name {
		case "baseline":
			dur, load = 800*time.Millisecond, "{per: node, clients: 1, batch: 1000, rate: max}"
		case "step-back-small":
			// The burst spans more than the 50 ms the step replays, so
			// every replayed millisecond got calls both before and after
			// it: a paced rate leaves most of them empty on one side.
			dur, load = 1200*time.Millisecond, paced("60ms")
			faults = []string{"{at: 400ms, kind: step, by: -50ms, nodes: [a]}"}
		case "step-back-5ms":
			dur = 2200 * time.Millisecond
			for _, at := range []string{"300ms", "700ms", "1100ms", "1500ms", "1900ms"} {
				faults = append(faults, "{at: "+at+", kind: step, by: -5ms, nodes: [a]}")
			}
		case "step-back-large":
			dur, faults = 1600*time.Millisecond, []string{"{at: 400ms, kind: step, by: -1s, nodes: [a]}"}
		case "leap-second":
			dur, faults = 1600*time.Millisecond, []string{"{at: 400ms, kind: leap, nodes: [a]}"}
		case "frozen-clock":
			dur, faults = 1200*time.Millisecond, []string{"{at: 400ms, kind: freeze, for: 300ms, nodes: [a]}"}
		case "restart-same-ms":
			second := 500*time.Millisecond + start + 700*time.Millisecond
			dur = second + start + 800*time.Millisecond
			faults = []string{"{at: 500ms, kind: restart, nodes: [a]}", "{at: " + ms(second) + ", kind: restart, nodes: [a]}"}
		case "restart-after-rewind":
			dur = 700*time.Millisecond + start + 1100*time.Millisecond
			faults = []string{"{at: 700ms, kind: restart, nodes: [a], for: 10ms, offset_while_down: -1s}"}
		case "duplicate-worker":
			// Two seconds: a process is often slow to answer for a while
			// after its ready line (a JVM compiling), and the clone shows
			// something only in the ticks both processes issue in.
			dur = 300*time.Millisecond + start + 2700*time.Millisecond
			faults = []string{"{at: 300ms, kind: clone, nodes: [a], for: 2s}"}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# snowchaos check's fault table (docs/check.md): %s.\n", name)
		fmt.Fprintf(&b, "name: check-%s\n", name)
		fmt.Fprintf(&b, "description: %s\n", quote(faultDoc[name]))
		fmt.Fprintf(&b, "seed: 16\nmode: real\nduration: %s\n", ms(dur))
		fmt.Fprintf(&b, "nodes:\n  - %s\n", node)
		fmt.Fprintf(&b, "load: %s\n", load)
		if len(faults) > 0 {
			b.WriteString("faults:\n")
			for _, f := range faults {
				fmt.Fprintf(&b, "  - %s\n", f)
			}
		}
		b.WriteString("invariants:\n  - duplicates == 0\n  - order_violations == 0\n  - restart_violations == 0\n")
		b.WriteString("targets:\n  - name: yours\n    use: exec\n    exec: " + block + "\n")
		out = append(out, File{Name: name, Text: b.String()})
	}
	return out, nil
}

// execBlock renders the target's exec block as one line of YAML flow.
func execBlock(cfg Config) (string, error) {
	if len(cfg.Command) == 0 {
		return "", fmt.Errorf("check: no command")
	}
	type kv = yaml.Node
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(k string, v *yaml.Node) {
		m.Content = append(m.Content, &kv{Kind: yaml.ScalarNode, Value: k}, v)
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s, Tag: "!!str"} }
	cmd := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, a := range cfg.Command {
		cmd.Content = append(cmd.Content, str(a))
	}
	add("command", cmd)
	if cfg.Dir != "" {
		add("dir", str(cfg.Dir))
	}
	env := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	wenv := cfg.WorkerEnv
	if wenv == "" {
		wenv = DefaultWorkerEnv
	}
	env.Content = append(env.Content, str(wenv), str("{worker}"))
	if cfg.Protocol == scenario.ProtocolHTTP {
		env.Content = append(env.Content, str("PORT"), str("{port}"))
	}
	for _, kvs := range cfg.Env {
		k, v, _ := strings.Cut(kvs, "=")
		env.Content = append(env.Content, str(k), str(v))
	}
	add("env", env)
	if cfg.Protocol == scenario.ProtocolHTTP {
		add("protocol", str(cfg.Protocol))
		add("url", str(cfg.URL))
		if cfg.Format != "" {
			add("format", str(cfg.Format))
		}
		if cfg.Field != "" {
			add("field", str(cfg.Field))
		}
		if cfg.TimeURL != "" {
			add("time_url", str(cfg.TimeURL))
		}
	} else if cfg.Ready != "" {
		add("ready", str(cfg.Ready))
	}
	if cfg.ID != "" && cfg.ID != scenario.IDDecimal {
		add("id", str(cfg.ID))
	}
	if cfg.Clock != "" && cfg.Clock != scenario.ClockFaketime {
		add("clock", str(cfg.Clock))
	}
	if cfg.GoBuild != "" {
		add("go_build", str(cfg.GoBuild))
	}
	if cfg.Time != "" && cfg.Time != scenario.TimeAuto {
		add("time", str(cfg.Time))
	}
	if cfg.Timeout > 0 {
		add("timeout", str(scenario.FormatDuration(cfg.Timeout)))
	}
	if s := cfg.StartTime; s > 0 {
		add("start_timeout", str(scenario.FormatDuration(max(20*time.Second, 5*s).Round(time.Second))))
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// quote renders s as a YAML double-quoted string.
func quote(s string) string {
	b, _ := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Value: s, Style: yaml.DoubleQuotedStyle})
	return strings.TrimSpace(string(b))
}

// Row is one fault's outcome.
type Row struct {
	// Fault names the row; Cell is its outcome in the table's words
	// (report.Cell); Verdict the run's verdict.
	Fault   string
	Cell    string
	Verdict harness.Verdict
	// Broken says which promises the row broke ("unique", "ordered",
	// "restart"); Reason why the run is unknown.
	Broken []string
	Reason string
	Result *harness.Result
}

// Rows reads a check's report back as its rows, in Faults order.
func Rows(rep *harness.Report) []Row {
	var out []Row
	for _, sr := range rep.Scenarios {
		fault := strings.TrimPrefix(sr.Name, "check-")
		for _, r := range sr.Runs {
			row := Row{Fault: fault, Cell: report.Cell(r, false), Verdict: r.Verdict, Result: r}
			f := r.Figures
			if f.Duplicates > 0 {
				row.Broken = append(row.Broken, PromiseUnique)
			}
			if f.OrderViolations > 0 {
				row.Broken = append(row.Broken, PromiseOrdered)
			}
			if f.RestartViolations > 0 {
				row.Broken = append(row.Broken, PromiseRestart)
			}
			if r.Verdict == harness.Unknown {
				row.Reason = reason(r)
			}
			out = append(out, row)
		}
	}
	return out
}

// Promises a generator may make, which check judges it by.
const (
	// PromiseUnique: no ID is issued twice.
	PromiseUnique = "unique"
	// PromiseOrdered: a process's IDs rise from call to call.
	PromiseOrdered = "ordered"
	// PromiseRestart: the IDs after a restart rise above every ID before.
	PromiseRestart = "restart"
)

// Promises are the promises check knows, in order.
var Promises = []string{PromiseUnique, PromiseOrdered, PromiseRestart}

// reason is the first reason an unknown run gives.
func reason(r *harness.Result) string {
	switch {
	case r.Error != "":
		return strings.SplitN(r.Error, "\n", 2)[0]
	case len(r.Unknown) > 0:
		return r.Unknown[0]
	}
	for _, f := range r.Faults {
		if !f.Confirmed {
			return fmt.Sprintf("fault %s not shown to reach the process: %s", f.Name, strings.Join(f.Detail, "; "))
		}
	}
	for _, c := range r.Checks {
		if c.Verdict == harness.Unknown && c.Reason != "" {
			return c.Expr + ": " + c.Reason
		}
	}
	return "unknown"
}

// Verdict judges the rows against what the generator promises: fail (1)
// when a row broke a promise, unknown (2) when a row is unknown, else
// pass (0). It returns the exit code and a sentence.
func Verdict(rows []Row, promises []string) (int, string) {
	var broke, unknown []string
	for _, r := range rows {
		for _, p := range r.Broken {
			if slices.Contains(promises, p) {
				broke = append(broke, r.Fault+" ("+p+")")
				break
			}
		}
		if r.Verdict == harness.Unknown {
			unknown = append(unknown, r.Fault)
		}
	}
	switch {
	case len(broke) > 0:
		s := "FAIL: broke its promises under " + strings.Join(broke, ", ")
		if len(unknown) > 0 {
			s += "; unknown: " + strings.Join(unknown, ", ")
		}
		return 1, s
	case len(unknown) > 0:
		return 2, "UNKNOWN: " + strings.Join(unknown, ", ") + " could not be judged (the reasons are above)"
	}
	return 0, fmt.Sprintf("PASS: kept its promises (%s) under every fault", strings.Join(promises, ", "))
}
