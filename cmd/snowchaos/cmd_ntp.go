package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/ntpcheck"
)

func init() {
	register(command{name: "ntp", summary: "check the host's clock against NTP servers (ntp check -h)", run: runNTP})
}

// ntpConfigHook, when set (by tests), adjusts the check's Config before it
// runs: tests use it to skew the host's clock as the queries read it.
var ntpConfigHook func(*ntpcheck.Config)

const ntpUsage = `usage: snowchaos ntp check [flags]

Queries NTP servers, reports the host's clock offset and each server's
state, and says what the next correction would do to a Snowflake generator
with the given rewind policy.

Exit codes: 0 healthy, 1 a finding beyond the budget (offset beyond
--max-offset, kiss-of-death, unsynchronised server), 2 no usable server or
bad flags.

Servers default to $` + ntpcheck.EnvServers + ` (comma or space separated), else
0.pool.ntp.org .. 3.pool.ntp.org.

flags:
`

// ntpFlags holds the parsed flags of "ntp check".
type ntpFlags struct {
	cfg         ntpcheck.Config
	json        bool
	watch       time.Duration
	count       int
	metricsAddr string
	suggest     string
}

func runNTP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, ntpUsage)
		newNTPFlagSet(&ntpFlags{}, stderr).PrintDefaults()
		if len(args) == 0 {
			return exitInvalid
		}
		return exitOK
	}
	if args[0] != "check" {
		fmt.Fprintf(stderr, "snowchaos ntp: unknown subcommand %q (want check)\n", args[0])
		return exitInvalid
	}
	var f ntpFlags
	fs := newNTPFlagSet(&f, stderr)
	if code, ok := parseFlags(fs, args[1:], stderr, ntpUsage); !ok {
		return code
	}
	if err := f.cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "snowchaos ntp check: %v\n", err)
		return exitInvalid
	}
	if f.metricsAddr != "" && f.watch == 0 {
		fmt.Fprintln(stderr, "snowchaos ntp check: --metrics-addr needs --watch")
		return exitInvalid
	}
	if f.count > 0 && f.watch == 0 {
		fmt.Fprintln(stderr, "snowchaos ntp check: --count needs --watch")
		return exitInvalid
	}
	if ntpConfigHook != nil {
		ntpConfigHook(&f.cfg)
	}
	if f.watch > 0 {
		return ntpWatch(ctx, f, stdout, stderr)
	}

	r := ntpcheck.Check(ctx, f.cfg)
	if f.json {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos ntp check: %v\n", err)
			return exitInvalid
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if err := ntpcheck.WriteText(stdout, r); err != nil {
		fmt.Fprintf(stderr, "snowchaos ntp check: %v\n", err)
		return exitInvalid
	}
	if f.suggest != "" {
		if code := ntpSuggest(f, r, stderr); code != exitOK {
			return code
		}
	}
	return r.Status.ExitCode()
}

// newNTPFlagSet declares the flags of "ntp check" into f.
func newNTPFlagSet(f *ntpFlags, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ntp check", flag.ContinueOnError)
	fs.SetOutput(out)
	f.cfg.Samples = ntpcheck.DefaultSamples
	f.cfg.SampleGap = ntpcheck.DefaultSampleGap
	f.cfg.Timeout = ntpcheck.DefaultTimeout
	f.cfg.StepThreshold = ntpcheck.DefaultStepThreshold
	f.cfg.MaxSpread = ntpcheck.DefaultMaxSpread
	f.cfg.MaxWait = time.Second
	f.cfg.MaxLead = time.Second
	fs.Func("server", "NTP server, host or host:port (repeatable; default $"+ntpcheck.EnvServers+" or the NTP pool)", func(s string) error {
		list, err := ntpcheck.ParseServerList(s)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("empty server")
		}
		f.cfg.Servers = append(f.cfg.Servers, list...)
		return nil
	})
	fs.IntVar(&f.cfg.Samples, "samples", f.cfg.Samples, "queries per server; the one with the lowest round trip is kept (1-64)")
	durationVar(fs, &f.cfg.SampleGap, "sample-gap", "pause between queries to one server (0: none)", true)
	durationVar(fs, &f.cfg.Timeout, "timeout", "timeout of each query", false)
	durationVar(fs, &f.cfg.MaxOffset, "max-offset", "budget: a host offset beyond it fails the check (default: the step threshold)", false)
	durationVar(fs, &f.cfg.StepThreshold, "step-threshold", "offset beyond which the next correction steps the clock", false)
	durationVar(fs, &f.cfg.MaxSpread, "max-spread", "how far servers may disagree before a warning", false)
	fs.Func("policy", "the generator's rewind policy: wait, refuse or logical (default wait)", func(s string) error {
		p, err := generator.ParsePolicy(s)
		if err != nil {
			return err
		}
		f.cfg.Policy = p
		return nil
	})
	durationVar(fs, &f.cfg.MaxWait, "max-wait", "the generator's per-call wait bound (policy wait)", false)
	durationVar(fs, &f.cfg.MaxLead, "max-lead", "the generator's logical lead bound (policy logical)", false)
	fs.BoolVar(&f.json, "json", false, "print the report as JSON (one object per line with --watch)")
	durationVar(fs, &f.watch, "watch", "keep checking at this interval until interrupted", false)
	fs.IntVar(&f.count, "count", 0, "with --watch: stop after this many checks (0: until interrupted)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "with --watch: serve Prometheus metrics on this address (e.g. :9123)")
	fs.StringVar(&f.suggest, "suggest-scenario", "", "write a scenario file replaying the measured offset as a clock step against the policy")
	return fs
}

// durationVar declares a non-negative duration flag; with zeroIsNone, an
// explicit 0 is stored as -1 ("none" in ntpcheck.Config).
func durationVar(fs *flag.FlagSet, p *time.Duration, name, usage string, zeroIsNone bool) {
	def := *p
	if def != 0 {
		usage += fmt.Sprintf(" (default %v)", def)
	}
	fs.Func(name, usage, func(s string) error {
		d, err := parseFlagDuration(s)
		if err != nil {
			return err
		}
		if d == 0 && zeroIsNone {
			d = -1
		}
		*p = d
		return nil
	})
}

// parseFlagDuration parses a non-negative duration such as "250ms" or
// "1m30s"; a bare "0" is zero. Durations beyond a day are rejected as
// mistakes.
func parseFlagDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 250ms, 2s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	if d > 24*time.Hour {
		return 0, fmt.Errorf("invalid duration %q: more than 24h", s)
	}
	return d, nil
}

// ntpWatch checks every f.watch until ctx ends (or f.count checks), printing
// a line per check and serving metrics if asked. It exits with the last
// check's code.
func ntpWatch(ctx context.Context, f ntpFlags, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := ntpcheck.NewMonitor(f.cfg, f.watch)
	if f.metricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(m.Collector())
		ln, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos ntp check: metrics: %v\n", err)
			return exitInvalid
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(stderr, "serving metrics on http://%s/metrics\n", ln.Addr())
	}
	code, n := exitInvalid, 0
	var last ntpcheck.Report
	_ = m.Run(ctx, func(r ntpcheck.Report) {
		last, code = r, r.Status.ExitCode()
		if f.json {
			b, _ := json.Marshal(r)
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintln(stdout, ntpcheck.Summary(r))
			for _, fd := range r.Findings {
				if fd.Severity > ntpcheck.Info {
					fmt.Fprintf(stdout, "  %s %s: %s\n", fd.Severity, fd.Code, fd.Message)
				}
			}
		}
		n++
		if f.count > 0 && n >= f.count {
			cancel()
		}
	})
	if n > 0 && f.suggest != "" {
		if c := ntpSuggest(f, last, stderr); c != exitOK {
			return c
		}
	}
	return code
}

// ntpSuggest writes the suggested scenario for r to f.suggest.
func ntpSuggest(f ntpFlags, r ntpcheck.Report, stderr io.Writer) int {
	y, err := ntpcheck.SuggestScenario(r)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos ntp check: --suggest-scenario: %v\n", err)
		return exitInvalid
	}
	if err := os.WriteFile(f.suggest, y, 0o644); err != nil {
		fmt.Fprintf(stderr, "snowchaos ntp check: --suggest-scenario: %v\n", err)
		return exitInvalid
	}
	fmt.Fprintf(stderr, "wrote scenario %s (replays the measured offset as a clock step)\n", f.suggest)
	return exitOK
}
