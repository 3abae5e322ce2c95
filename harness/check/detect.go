package check

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target/exec"
	"github.com/snowchaos/snowchaos/verify"
)

// ErrUnreachable: no clock fault can reach the command (it is a Go binary,
// or runs one behind a wrapper, or is statically linked): every row would
// be unknown, so check stops before running them.
var ErrUnreachable = errors.New("check: clock faults cannot reach the command")

// sniffWaitHint is how long Sniff waits for a ready line before it sends
// the first request (exec's sniffWait).
const sniffWaitHint = 2 * time.Second

// knownEpochs are the epochs generators commonly use, which a detected
// epoch is snapped to when within snapEpoch of one; otherwise it is
// snapped to a midnight UTC within snapEpoch, else kept to the
// millisecond (and said to be a guess).
var knownEpochs = []struct {
	name string
	at   time.Time
}{
	{"Twitter's", time.UnixMilli(1288834974657).UTC()},
	{"Unix time", time.Unix(0, 0).UTC()},
	{"this project's default", generator.DefaultEpoch},
}

// snapEpoch is how far from a known or round epoch a detected one may lie
// and still be taken for it: the age of the first IDs plus clock slack.
const snapEpoch = 2 * time.Second

// Detect starts the command once with no fault (exec.Sniff) and fills in
// what cfg leaves unset: the ready line, the kind of ID, a Snowflake's
// layout and epoch, how long a start takes. It returns the config and,
// one sentence each, what it assumed and why. It fails with
// ErrUnreachable when no clock fault could reach the command.
func Detect(ctx context.Context, cfg Config) (Config, []string, error) {
	var notes []string
	if cfg.Protocol == "" {
		cfg.Protocol = scenario.ProtocolStdio
	}
	if cfg.WorkerEnv == "" {
		cfg.WorkerEnv = DefaultWorkerEnv
	}
	if cfg.Clock == "" {
		cfg.Clock = scenario.ClockFaketime
		if cfg.GoBuild != "" {
			cfg.Clock = scenario.ClockGo
		}
	}
	if cfg.Clock == scenario.ClockFaketime {
		if _, err := faketime.Find(); err != nil {
			return cfg, notes, err
		}
	}
	if cfg.Format == "" && cfg.Protocol == scenario.ProtocolHTTP {
		cfg.Format = scenario.FormatLines
	}
	x := &scenario.Exec{Command: cfg.Command, Dir: cfg.Dir, Protocol: cfg.Protocol, Request: "{n}", URL: cfg.URL, Ready: cfg.Ready,
		Format: cfg.Format, Field: cfg.Field, ID: scenario.IDDecimal, Clock: cfg.Clock, GoBuild: cfg.GoBuild,
		TimeURL: cfg.TimeURL, TimeRequest: "time", Timeout: 10 * time.Second, StartTimeout: 60 * time.Second, MaxBatch: 1000}
	if cfg.Timeout > 0 {
		x.Timeout = cfg.Timeout
	}
	x.Env = append(x.Env, scenario.EnvVar{Name: cfg.WorkerEnv, Value: "{worker}"})
	if cfg.Protocol == scenario.ProtocolHTTP {
		x.Env = append(x.Env, scenario.EnvVar{Name: "PORT", Value: "{port}"})
	}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		x.Env = append(x.Env, scenario.EnvVar{Name: k, Value: v})
	}
	s, err := exec.Sniff(ctx, x, Worker)
	if errors.Is(err, exec.ErrGoBinary) {
		return cfg, notes, fmt.Errorf("%w: %v; with check: --go-build ./path/to/main (and --dir for the module), the command then being {bin} and its arguments", ErrUnreachable, err)
	}
	if err != nil {
		return cfg, notes, fmt.Errorf("check: starting %s once to see what it prints: %w", strings.Join(cfg.Command, " "), err)
	}
	route := "libfaketime, loaded in the process"
	if cfg.Clock == scenario.ClockGo {
		route = "the Go runtime overlay (" + cfg.GoBuild + " rebuilt), its clock page mapped in the process"
	}
	switch {
	case cfg.Clock == scenario.ClockFaketime && len(s.GoBinaries) > 0:
		return cfg, notes, fmt.Errorf("%w: a Go binary runs behind your command (%s): Go reads the wall clock through the vDSO, which libfaketime cannot reach; give its source: --go-build ./path/to/main (and --dir for the module), the command then being {bin} and its arguments", ErrUnreachable, strings.Join(s.GoBinaries, ", "))
	case s.Reach != "":
		return cfg, notes, fmt.Errorf("%w: %s", ErrUnreachable, s.Reach)
	case cfg.Clock != scenario.ClockNone:
		notes = append(notes, "clock faults reach it through "+route)
	}
	if cfg.Protocol == scenario.ProtocolStdio && cfg.Ready == "" {
		cfg.Ready = s.Ready
		if s.Ready != "" && s.StartTime > sniffWaitHint {
			notes = append(notes, fmt.Sprintf("it prints %q once it takes requests (late: only after the first request came; --ready %q says so)", s.Ready, s.Ready))
		} else if s.Ready != "" {
			notes = append(notes, fmt.Sprintf("it prints %q once it takes requests (its last line before it waited for one)", s.Ready))
		} else {
			notes = append(notes, "it prints nothing before its first request: requests wait for it to answer")
		}
	}
	cfg.StartTime = s.StartTime
	start := fmt.Sprintf("it took %s to start", s.StartTime.Round(time.Millisecond))
	if s.StartTime > time.Second {
		start += " (slow: every restart and clone pays it; an interpreter behind a shim, such as pyenv's, or a compiler run at every start, such as java File.java's, can often be left out); the restart and clone scenarios give every start three times that"
	}
	notes = append(notes, start)
	if s.Refused != "" {
		return cfg, notes, fmt.Errorf("check: asked for three IDs with no fault, the command refused: %s", s.Refused)
	}
	if len(s.IDs) == 0 {
		return cfg, notes, errors.New("check: asked for three IDs with no fault, the command answered none")
	}
	if cfg.ID == "" {
		kind, why := detectKind(s.IDs)
		cfg.ID = kind
		notes = append(notes, why)
	}
	if cfg.ID == scenario.IDDecimal && (cfg.Layout == "" || cfg.Epoch == "") {
		layout, epoch, why := detectLayout(s.IDs, cfg.Layout, cfg.Epoch, time.Unix(0, s.IDsAt))
		cfg.Layout, cfg.Epoch = layout, epoch
		notes = append(notes, why)
	}
	switch {
	case s.Time != "":
		notes = append(notes, fmt.Sprintf("it answers the time request with its clock reading (%s): the evidence that each fault reached it", s.Time))
	case cfg.Protocol == scenario.ProtocolHTTP && cfg.TimeURL == "":
		notes = append(notes, "no --time-url: the evidence that each fault reached it comes from the time its IDs carry; a URL answering Date.now() or the like makes it firm")
	default:
		notes = append(notes, fmt.Sprintf("it does not answer the time request (%v): the evidence that each fault reached it comes from the time its IDs carry; one line in the wrapper (answer \"time\" with Date.now(), time.time_ns(), System.currentTimeMillis()) makes it firm", s.TimeErr))
	}
	return cfg, notes, nil
}

// detectKind names the kind of ID the answers are, from the strictest to
// the loosest: decimal Snowflakes, UUIDv7, UUIDv4, any UUID, ULID, else
// opaque strings.
func detectKind(ids []string) (string, string) {
	all := func(f func(string) bool) bool {
		for _, s := range ids {
			if !f(s) {
				return false
			}
		}
		return true
	}
	kindOK := func(k verify.Kind) func(string) bool {
		return func(s string) bool { _, err := verify.Parse128(k, s); return err == nil }
	}
	sample := ids[0]
	switch {
	case all(func(s string) bool { _, err := verify.ParseSnowflake(s); return err == nil }):
		return scenario.IDDecimal, fmt.Sprintf("its IDs are 64-bit decimal Snowflakes (%s)", sample)
	case all(kindOK(verify.KindUUIDv7)):
		return verify.KindUUIDv7.String(), fmt.Sprintf("its IDs are UUIDv7 (%s): duplicates, order and embedded time are checked", sample)
	case all(kindOK(verify.KindUUIDv4)):
		return verify.KindUUIDv4.String(), fmt.Sprintf("its IDs are UUIDv4 (%s): duplicates are checked; order and time have no meaning for them", sample)
	case all(kindOK(verify.KindUUID)):
		return verify.KindUUID.String(), fmt.Sprintf("its IDs are UUIDs (%s): duplicates are checked", sample)
	case all(kindOK(verify.KindULID)):
		return verify.KindULID.String(), fmt.Sprintf("its IDs are ULIDs (%s): duplicates, order and embedded time are checked", sample)
	}
	return verify.KindString.String(), fmt.Sprintf("its IDs are opaque strings (%q): duplicates are checked byte for byte; pass --id if they are of a kind check knows", sample)
}

// detectLayout finds the preset layout whose node field holds the worker
// ID in every ID (the layout given wins), and the epoch that puts the IDs'
// time at now (snapped to a known or round one).
func detectLayout(ids []string, layoutName, epoch string, now time.Time) (string, string, string) {
	var vals []generator.ID
	for _, s := range ids {
		v, err := verify.ParseSnowflake(s)
		if err != nil {
			return layoutName, epoch, "its IDs did not parse as Snowflakes: " + err.Error()
		}
		vals = append(vals, v)
	}
	var l generator.Layout
	var why []string
	if layoutName != "" {
		var err error
		if l, err = generator.ParseLayout(layoutName); err != nil {
			return layoutName, epoch, err.Error()
		}
	} else {
		found := false
		for _, p := range generator.Presets() {
			ok := true
			for _, v := range vals {
				if p.Decode(v).Node != Worker {
					ok = false
				}
			}
			if ok {
				l, found = p, true
				break
			}
		}
		if found {
			why = append(why, fmt.Sprintf("layout %s (its node field holds the worker ID %d in every ID)", l.Name, Worker))
		} else {
			l = generator.DefaultLayout()
			why = append(why, fmt.Sprintf("layout %s assumed: no preset layout's node field holds the worker ID %d (does the generator read it from $%s? pass --worker-env, or --layout T/N/S)", l.Name, Worker, DefaultWorkerEnv))
		}
		layoutName = l.Name
	}
	if epoch != "" {
		return layoutName, epoch, strings.Join(why, "; ")
	}
	l.Epoch = time.Unix(0, 0).UTC()
	l = l.Normalize()
	tick := l.Decode(vals[len(vals)-1]).Time.Sub(l.Epoch) // time since the epoch the last ID embeds
	guess := now.Add(-tick)
	e, how := snap(guess)
	why = append(why, fmt.Sprintf("epoch %s (%s)", e.Format(time.RFC3339Nano), how))
	return layoutName, e.Format(time.RFC3339Nano), strings.Join(why, "; ")
}

// snap returns the known or round epoch within snapEpoch of guess, and
// how it was chosen.
func snap(guess time.Time) (time.Time, string) {
	for _, k := range knownEpochs {
		if d := guess.Sub(k.at); math.Abs(float64(d)) <= float64(snapEpoch) {
			return k.at, k.name + ", which the first IDs' time gives within " + d.Abs().Round(time.Millisecond).String()
		}
	}
	day := guess.UTC().Round(24 * time.Hour)
	if d := guess.Sub(day); d.Abs() <= snapEpoch {
		return day, "a midnight UTC, which the first IDs' time gives within " + d.Abs().Round(time.Millisecond).String()
	}
	return guess.UTC().Round(time.Millisecond), "what the first IDs' time gives, no round epoch near it: pass --epoch if you know it"
}
