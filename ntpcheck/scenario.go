package ntpcheck

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Scenario timing for SuggestScenario.
const (
	suggestStepAt = time.Second     // when the replayed correction happens
	suggestTail   = 3 * time.Second // how long the run goes on after the clock caught up
	suggestMaxBy  = 365 * hour24    // the harness rejects longer durations
)

// SuggestScenario writes a harness scenario (YAML, harness/scenario format)
// that replays what r measured: one node with r's rewind settings, its clock
// off by the measured offset, and a step fault at 1 s that corrects it, as
// the next NTP correction would; when a usable server announced a leap
// second insertion, a leap fault follows. The comments at the top say what
// ntpcheck predicts, so the run's report can be held against it. It fails
// (wrapping ErrNoUsableServer) when r has no usable server, since then
// nothing was measured.
func SuggestScenario(r Report) ([]byte, error) {
	if r.Usable == 0 {
		return nil, fmt.Errorf("%w: nothing measured to replay", ErrNoUsableServer)
	}
	by := r.Offset.Round(time.Microsecond) // the correction: server minus host
	if by == 0 {
		by = r.Offset.Round(time.Nanosecond)
	}
	if by == 0 {
		return nil, fmt.Errorf("ntpcheck: the measured offset is zero: no step to replay")
	}
	if abs(by) > suggestMaxBy {
		return nil, fmt.Errorf("ntpcheck: offset %v is beyond what a scenario can replay (a year)", by)
	}
	l := r.Limits
	ahead := -by
	leap := false
	for _, s := range r.Servers {
		if s.Usable && s.Leap == LeapInsert {
			leap = true
		}
	}
	catchUp := suggestStepAt
	if by < 0 {
		catchUp += -by
	}
	leapAt := time.Duration(0)
	end := catchUp + suggestTail
	if leap {
		leapAt = (catchUp + 2*time.Second).Round(time.Second)
		end = leapAt + time.Second + suggestTail
	}
	end = ((end + time.Second - 1) / time.Second) * time.Second

	var b strings.Builder
	comment := func(format string, args ...any) {
		for _, line := range wrap(fmt.Sprintf(format, args...), 76) {
			b.WriteString("# " + line + "\n")
		}
	}
	dir, verb := "ahead of", "back"
	if by > 0 {
		dir, verb = "behind", "forward"
	}
	comment("Suggested by `snowchaos ntp check --suggest-scenario` at %s.", r.Time.UTC().Format(time.RFC3339))
	comment("Measured: host clock %s %s NTP time (median of %d usable server%s: %s).",
		fmtDur(abs(by)), dir, r.Usable, plural(r.Usable), usableNames(r))
	if abs(by) > l.StepThreshold {
		comment("Beyond the %s step threshold, the next correction may step the clock %s by %s; this scenario replays that step at %s.",
			fmtDur(l.StepThreshold), verb, fmtDur(abs(by)), suggestStepAt)
	} else {
		comment("Within the %s step threshold the next correction would slew the clock; this scenario replays the worst case, a step %s by %s at %s.",
			fmtDur(l.StepThreshold), verb, fmtDur(abs(by)), suggestStepAt)
	}
	if by < 0 {
		comment("Predicted: %s.", RewindEffect(ahead, l.Policy, l.MaxWait, l.MaxLead).Text)
	} else {
		comment("Predicted: a step forward is no rewind; IDs' embedded time jumps ahead by %s.", fmtDur(by))
	}
	if leap {
		comment("A leap second insertion is announced; the leap fault at %s replays it unsmeared (a 1 s step back). Predicted: %s.",
			leapAt, RewindEffect(time.Second, l.Policy, l.MaxWait, l.MaxLead).Text)
	}
	comment("To compare the policies side by side, add: targets: [wait, refuse, logical]")
	fmt.Fprintf(&b, "name: ntp-suggested-step-%s\n", verb)
	fmt.Fprintf(&b, "description: %s\n", strconv.Quote(fmt.Sprintf(
		"The NTP correction measured by ntp check: a %s step %s against policy %v.", fmtDur(abs(by)), verb, l.Policy)))
	b.WriteString("seed: 1\nmode: simulated\n")
	fmt.Fprintf(&b, "duration: %s\n", end)
	b.WriteString("nodes:\n  - name: host\n    worker: 1\n")
	fmt.Fprintf(&b, "    policy: %v\n    max_wait: %s\n    max_lead: %s\n", l.Policy, l.MaxWait, l.MaxLead)
	fmt.Fprintf(&b, "    clock_offset: %s  # wall minus true time, as measured\n", ahead)
	b.WriteString("load:\n  clients: 4\n  stages:\n    - {rate: 5000/s}\n")
	b.WriteString("faults:\n")
	fmt.Fprintf(&b, "  - {name: ntp-step, at: %s, kind: step, by: %s, nodes: all}\n", suggestStepAt, by)
	if leap {
		fmt.Fprintf(&b, "  - {name: leap, at: %s, kind: leap, nodes: all}\n", leapAt)
	}
	b.WriteString("invariants:\n  - duplicates == 0\n  - order_violations == 0\n")
	return []byte(b.String()), nil
}

func usableNames(r Report) string {
	var names []string
	for _, s := range r.Servers {
		if s.Usable {
			names = append(names, s.Server)
		}
	}
	return strings.Join(names, ", ")
}

// wrap breaks s into lines of at most width bytes at spaces (longer words
// stay whole).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) > width:
			lines = append(lines, line)
			line = w
		default:
			line += " " + w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
