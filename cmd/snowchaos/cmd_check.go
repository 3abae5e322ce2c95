package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/check"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target/exec"
	"github.com/snowchaos/snowchaos/verify"
)

func init() {
	register(command{name: "check", summary: "run your generator (a command, any language) under the standard fault table", run: runCheck})
}

const checkUsage = `usage: snowchaos check [flags] -- CMD [ARGS...]

Runs CMD, your ID generator, as an unmodified process under the standard
fault table: a baseline at full speed, steps back of 50 ms, 5 ms (five
times) and 1 s, a leap second, a frozen clock, restarts in the same
millisecond and after a rewind, and a second process with the same worker
ID. It prints one row per fault (survived, N dup, N order, N restart,
refused N, down N, or UNKNOWN with the reason) and a verdict.

CMD speaks the exec target's stdio protocol (docs/exec-target.md): it reads
a count N per line and answers N ID lines (or "refused: why"), the worker
ID in $WORKER_ID; answering the line "time" with its clock reading makes
the evidence that each fault reached it firm. With --http it serves IDs at
a URL instead. What it does not say is found out by running it once with
no fault: its ready line, the kind of its IDs, a Snowflake's layout and
epoch, how long it takes to start; check prints what it assumed.

Exit status: 0 when every row kept the promises (--promise), 1 when a row
broke one (even if another is unknown), 2 when a row is unknown and none
broke a promise, or clock faults cannot reach CMD (a Go binary, a
statically linked one), or the input is invalid.

flags:
`

// checkFlags are the parsed flags of snowchaos check.
type checkFlags struct {
	http, timeURL, format, field, id, layout, epoch, ready string
	workerEnv, goBuild, dir, promise, only, skip           string
	html, junit, scenarios                                 string
	json                                                   bool
	rate, batch                                            int
	timeout                                                time.Duration
	env                                                    multiFlag
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	fl.StringVar(&f.http, "http", "", "the command serves IDs over HTTP at this URL: {port} is a free port it must listen on (also in $PORT), {n} the count, e.g. http://127.0.0.1:{port}/ids?count={n}")
	fl.StringVar(&f.format, "format", "", "with --http: lines (default), json-array or json-field")
	fl.StringVar(&f.field, "field", "", "with --format json-field: the field that holds the IDs")
	fl.StringVar(&f.ready, "ready", "", "the line the command prints once it takes requests (default: found out, the last line it prints before it falls silent)")
	fl.StringVar(&f.timeURL, "time-url", "", "with --http: a URL answering the process's clock reading, e.g. http://127.0.0.1:{port}/time")
	fl.StringVar(&f.id, "id", "", "the IDs' kind: decimal, uuidv7, ulid, uuidv4, uuid or string (default: from the first IDs)")
	fl.StringVar(&f.layout, "layout", "", "a decimal Snowflake's layout, a preset or T/N/S[@tick] (default: the preset whose node field holds the worker ID)")
	fl.StringVar(&f.epoch, "epoch", "", "a decimal Snowflake's epoch, RFC 3339 (default: from the first IDs' time)")
	fl.StringVar(&f.workerEnv, "worker-env", check.DefaultWorkerEnv, "the environment variable the worker ID is passed in")
	fl.Var(&f.env, "env", "an environment variable NAME=VALUE for the command (repeatable)")
	fl.StringVar(&f.goBuild, "go-build", "", "the command is a Go program: rebuild this package (relative to --dir) with the runtime clock overlay; the command is then {bin} and its arguments (none: {bin} alone)")
	fl.StringVar(&f.dir, "dir", ".", "the command's working directory")
	fl.StringVar(&f.promise, "promise", "unique,ordered", "what the generator promises, which a row fails by breaking: unique, ordered (within a process), restart (IDs after a restart above those before)")
	fl.StringVar(&f.only, "only", "", "run only these faults (comma-separated: "+strings.Join(check.Faults, ", ")+")")
	fl.StringVar(&f.skip, "skip", "", "leave these faults out (comma-separated)")
	fl.IntVar(&f.rate, "rate", check.DefaultRate, "requests per second each fault scenario sends (1 to 100000)")
	fl.IntVar(&f.batch, "batch", check.DefaultBatch, "IDs per request (1 to 100000)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on one request: a process that does not answer in time is killed (1ms to 5m)")
	fl.StringVar(&f.html, "html", "", "write the HTML report (a timeline per fault) to this file")
	fl.StringVar(&f.junit, "junit", "", "write a JUnit XML file: a test case per fault and invariant")
	fl.BoolVar(&f.json, "json", false, "print the rows and the run's report as JSON on stdout (assumptions and progress stay on stderr)")
	fl.StringVar(&f.scenarios, "scenarios", "", "write the scenario files used into this directory, to run them with snowchaos run and edit them")
	cmdArgs, code, ok := parseArgs(fl, args, stderr, checkUsage)
	if !ok {
		return code
	}
	cfg, only, promises, err := f.config(cmdArgs)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	info := stdout
	if f.json {
		info = stderr
	}
	header := strings.Join(cfg.Command, " ")
	if f.goBuild != "" {
		header += " ({bin}: " + f.goBuild + " rebuilt with the runtime clock overlay)"
		fmt.Fprintf(stderr, "snowchaos check: rebuilding %s with the clock overlay (a minute or so, once)\n", f.goBuild)
	}
	fmt.Fprintf(info, "snowchaos check: %s\n", header)
	cfg, notes, err := check.Detect(ctx, cfg)
	for _, n := range notes {
		fmt.Fprintf(info, "  assumed: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	files, err := check.Suite(cfg, only)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	var suite []*scenario.Scenario
	dir := f.scenarios
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
			return exitInvalid
		}
	}
	for i, file := range files {
		name := fmt.Sprintf("%02d-%s.yaml", i+1, file.Name)
		path := name
		if dir != "" {
			path = filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(file.Text), 0o644); err != nil {
				fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
				return exitInvalid
			}
		}
		s, err := scenario.Parse(path, []byte(file.Text))
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos check: the scenario for %s does not parse (a bug in check): %v\n", file.Name, err)
			return exitInvalid
		}
		suite = append(suite, s)
	}
	if dir != "" {
		fmt.Fprintf(info, "  wrote %d scenario files to %s: snowchaos run %s runs them\n", len(files), dir, dir)
	}
	opts := harness.Options{Mode: scenario.ModeReal, Timeline: f.html != ""}
	if err := exec.Registered().Prebuild(ctx, suite); err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	if err := harness.Prepare(suite, opts); err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	opts.Progress = func(p harness.Progress) {
		if p.Final {
			fmt.Fprintf(stderr, "snowchaos check: %s done: %d IDs\n", strings.TrimPrefix(p.Scenario, "check-"), p.IDs)
		}
	}
	began := time.Now()
	rep, err := harness.Run(ctx, suite, opts)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	rows := check.Rows(rep)
	code, verdict := check.Verdict(rows, promises)
	if f.json {
		if err := checkJSON(stdout, rows, verdict, code, rep); err != nil {
			fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
			return exitInvalid
		}
	} else {
		printRows(stdout, rows, promises)
		fmt.Fprintf(stdout, "\nverdict: %s (exit %d)\n", verdict, code)
	}
	fmt.Fprintf(stderr, "snowchaos check: ran in %s\n", time.Since(began).Round(time.Second))
	if err := writeReports(rep, f.junit, f.html); err != nil {
		fmt.Fprintf(stderr, "snowchaos check: %v\n", err)
		return exitInvalid
	}
	if ctx.Err() != nil {
		return exitInvalid
	}
	return code
}

// config turns the flags and the command into a check.Config, the faults
// to run and the promises to judge.
func (f *checkFlags) config(cmd []string) (check.Config, []string, []string, error) {
	var cfg check.Config
	if len(cmd) == 0 && f.goBuild != "" {
		cmd = []string{"{bin}"}
	}
	if len(cmd) == 0 {
		return cfg, nil, nil, errors.New("no command: snowchaos check [flags] -- CMD [ARGS...]")
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return cfg, nil, nil, err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return cfg, nil, nil, fmt.Errorf("--dir %s: not a directory", f.dir)
	}
	cfg = check.Config{Command: cmd, Dir: dir, ID: f.id, Layout: f.layout, Epoch: f.epoch, WorkerEnv: f.workerEnv,
		Env: f.env, GoBuild: f.goBuild, Rate: f.rate, Batch: f.batch, Timeout: f.timeout, TimeURL: f.timeURL, Format: f.format, Field: f.field, Ready: f.ready}
	if strings.ContainsAny(f.ready, "\r\n") {
		return cfg, nil, nil, fmt.Errorf("--ready %q: want one line", f.ready)
	}
	switch {
	case f.rate < 1 || f.rate > 100_000:
		return cfg, nil, nil, fmt.Errorf("--rate %d: want 1 to 100000", f.rate)
	case f.batch < 1 || f.batch > 100_000:
		return cfg, nil, nil, fmt.Errorf("--batch %d: want 1 to 100000", f.batch)
	case f.timeout < time.Millisecond || f.timeout > 5*time.Minute:
		return cfg, nil, nil, fmt.Errorf("--timeout %s: want 1ms to 5m", f.timeout)
	}
	if f.http != "" {
		cfg.Protocol, cfg.URL = scenario.ProtocolHTTP, f.http
		if !strings.Contains(f.http, "{port}") {
			return cfg, nil, nil, fmt.Errorf("--http %q: want a URL with {port} (the port the process must listen on, also in $PORT)", f.http)
		}
	} else if f.timeURL != "" || f.format != "" || f.field != "" {
		return cfg, nil, nil, errors.New("--time-url, --format and --field go with --http")
	}
	if f.id != "" && f.id != scenario.IDDecimal {
		if _, err := verify.ParseKind(f.id); err != nil {
			return cfg, nil, nil, fmt.Errorf("--id %q: want decimal, uuidv7, ulid, uuidv4, uuid or string", f.id)
		}
	}
	if f.epoch != "" {
		if _, err := time.Parse(time.RFC3339Nano, f.epoch); err != nil {
			return cfg, nil, nil, fmt.Errorf("--epoch %q: want RFC 3339, e.g. 2024-01-01T00:00:00Z", f.epoch)
		}
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return cfg, nil, nil, fmt.Errorf("--env %q: want NAME=VALUE", kv)
		}
	}
	list := func(flag, s string, known []string) ([]string, error) {
		var out []string
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x == "" {
				continue
			}
			if !slices.Contains(known, x) {
				return nil, fmt.Errorf("--%s: %q is not one of %s", flag, x, strings.Join(known, ", "))
			}
			out = append(out, x)
		}
		return out, nil
	}
	only, err := list("only", f.only, check.Faults)
	if err != nil {
		return cfg, nil, nil, err
	}
	skip, err := list("skip", f.skip, check.Faults)
	if err != nil {
		return cfg, nil, nil, err
	}
	if len(only) == 0 {
		only = slices.Clone(check.Faults)
	}
	only = slices.DeleteFunc(only, func(x string) bool { return slices.Contains(skip, x) })
	if len(only) == 0 {
		return cfg, nil, nil, errors.New("--only and --skip leave no fault to run")
	}
	promises, err := list("promise", f.promise, check.Promises)
	if err != nil {
		return cfg, nil, nil, err
	}
	return cfg, only, promises, nil
}

// printRows prints one line per fault: the fault, what it found, and for
// an unknown row why.
func printRows(w io.Writer, rows []check.Row, promises []string) {
	fmt.Fprintf(w, "\n  %-22s %s\n", "fault", "result")
	for _, r := range rows {
		var broke, other []string
		for _, p := range r.Broken {
			if slices.Contains(promises, p) {
				broke = append(broke, p)
			} else {
				other = append(other, p)
			}
		}
		mark := ""
		if len(broke) > 0 {
			mark = "   <- broke: " + strings.Join(broke, ", ")
		}
		if len(other) > 0 {
			mark += "   (not promised: " + strings.Join(other, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-22s %s%s\n", r.Fault, r.Cell, mark)
		if r.Reason != "" {
			fmt.Fprintf(w, "  %-22s   why unknown: %s\n", "", r.Reason)
		}
		if r.Result != nil {
			f := r.Result.Figures
			if f.Refusals > f.Refused+f.Down && len(r.Result.CallErrors) > 0 {
				e := r.Result.CallErrors[0]
				fmt.Fprintf(w, "  %-22s   errors: %d x %s\n", "", e.Count, e.Text)
			}
		}
	}
	fmt.Fprintf(w, "\n  (N dup: IDs issued twice; N order: IDs below their predecessor from the same process; N restart: IDs after a restart below one before it; refused N: calls it refused; down N: calls sent while it was being started again; error N: calls that failed otherwise, the commonest error shown)\n")
}

// checkJSON writes the rows, the verdict and the harness's report.
func checkJSON(w io.Writer, rows []check.Row, verdict string, code int, rep *harness.Report) error {
	type row struct {
		Fault   string          `json:"fault"`
		Result  string          `json:"result"`
		Verdict harness.Verdict `json:"verdict"`
		Broken  []string        `json:"broken,omitempty"`
		Reason  string          `json:"reason,omitempty"`
	}
	out := struct {
		Rows    []row           `json:"rows"`
		Verdict string          `json:"verdict"`
		Exit    int             `json:"exit"`
		Report  *harness.Report `json:"report"`
	}{Verdict: verdict, Exit: code, Report: rep}
	for _, r := range rows {
		out.Rows = append(out.Rows, row{r.Fault, r.Cell, r.Verdict, r.Broken, r.Reason})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
