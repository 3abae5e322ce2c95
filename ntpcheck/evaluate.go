package ntpcheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Evaluate judges per-server results against cfg: it computes the consensus
// offset and spread of the usable servers, the findings (most serious
// first) and the status. It is a pure function of its arguments; Time is
// left zero for the caller to set.
func Evaluate(cfg Config, servers []ServerResult) Report {
	cfg = cfg.withDefaults()
	r := Report{
		Limits: Limits{
			StepThreshold: cfg.StepThreshold, MaxOffset: cfg.MaxOffset, MaxSpread: cfg.MaxSpread,
			MaxDistance: cfg.MaxDistance, MaxMinError: cfg.MaxMinError,
			Policy: cfg.Policy, MaxWait: cfg.MaxWait, MaxLead: cfg.MaxLead,
		},
		Servers:      servers,
		LeapMidnight: cfg.LeapMidnight,
	}
	var offsets []time.Duration
	var usable []ServerResult
	for _, s := range servers {
		if s.Usable {
			offsets = append(offsets, s.Offset)
			usable = append(usable, s)
		}
		if s.Answered && (s.Leap == LeapInsert || s.Leap == LeapDelete) {
			if m := s.ServerTime.Truncate(hour24).Add(hour24); m.After(r.LeapMidnight) {
				r.LeapMidnight = m
			}
		}
	}
	r.Usable = len(usable)
	if r.Usable > 0 {
		r.Offset = median(offsets)
		r.Spread = slices.Max(offsets) - slices.Min(offsets)
	}

	var fs []Finding
	add := func(sev Severity, code Code, server, format string, args ...any) {
		fs = append(fs, Finding{Severity: sev, Code: code, Server: server, Message: fmt.Sprintf(format, args...)})
	}

	// Servers that failed or cannot be trusted.
	for _, s := range servers {
		switch s.Outcome {
		case OutcomeOK:
			if s.RootDistance > cfg.MaxDistance {
				add(Warn, CodeInsane, s.Server, "root distance %s is beyond %s: its time may be far off even though it validates",
					fmtDur(s.RootDistance), fmtDur(cfg.MaxDistance))
			}
		case OutcomeKissOfDeath:
			add(Error, CodeKissOfDeath, s.Server, "kiss-of-death %q: %s; its time is not used and it must not be queried again soon",
				s.KissCode, kissMeaning(s.KissCode))
		case OutcomeUnsynchronised:
			add(Error, CodeUnsynchronised, s.Server, "not synchronised (leap indicator %d, stratum %d): it has no reference, so its time is not used and a host following it would drift",
				s.Leap, s.Stratum)
		case OutcomeInvalid:
			add(Error, CodeInvalid, s.Server, "answer fails validation (%s); its time is not used", s.Error)
		default:
			add(Warn, CodeUnreachable, s.Server, "no answer: %s", s.Error)
		}
	}
	if r.Usable == 0 {
		add(Error, CodeNoUsableServer, "", "none of %d servers gave a usable answer: the host's offset is unknown", len(servers))
	}

	// The host's offset, and what the next correction would do.
	if r.Usable > 0 {
		of := fmt.Sprintf("median of %d usable server%s", r.Usable, plural(r.Usable))
		if r.Usable == 1 {
			of = "from " + usable[0].Server
		}
		ahead := -r.Offset // > 0: host ahead of NTP time
		if abs(r.Offset) > cfg.MaxOffset {
			add(Error, CodeOffsetBudget, "", "host clock is %s %s NTP time (%s), beyond the %s budget",
				fmtDur(abs(r.Offset)), aheadBehind(ahead), of, fmtDur(cfg.MaxOffset))
		}
		switch {
		case ahead > cfg.StepThreshold:
			e := RewindEffect(ahead, cfg.Policy, cfg.MaxWait, cfg.MaxLead)
			sev := Warn
			add(sev, CodeStepBack, "", "host clock is %s ahead (%s), beyond the %s step threshold: the next correction may step it back by %s. %s",
				fmtDur(ahead), of, fmtDur(cfg.StepThreshold), fmtDur(ahead), e.Text)
		case -ahead > cfg.StepThreshold:
			add(Info, CodeStepForward, "", "host clock is %s behind (%s), beyond the %s step threshold: the next correction may step it forward by %s; no rewind, IDs' embedded time jumps ahead (no duplicate risk)",
				fmtDur(-ahead), of, fmtDur(cfg.StepThreshold), fmtDur(-ahead))
		}
	}

	// Servers disagreeing with each other.
	if r.Usable > 1 && r.Spread > cfg.MaxSpread {
		far := usable[0]
		for _, s := range usable[1:] {
			if abs(s.Offset-r.Offset) > abs(far.Offset-r.Offset) {
				far = s
			}
		}
		lo := slices.MinFunc(usable, func(a, b ServerResult) int { return cmpDur(a.Offset, b.Offset) })
		hi := slices.MaxFunc(usable, func(a, b ServerResult) int { return cmpDur(a.Offset, b.Offset) })
		hint := fmt.Sprintf("%s is furthest from the median (%s from it)", far.Server, fmtSigned(far.Offset-r.Offset))
		if r.Usable == 2 {
			hint = "with two servers neither can be outvoted: use four or more"
		}
		add(Warn, CodeDisagreement, "", "servers disagree by %s, beyond %s (offsets from %s at %s to %s at %s); %s. A host following the wrong one would step by the difference",
			fmtDur(r.Spread), fmtDur(cfg.MaxSpread), fmtSigned(lo.Offset), lo.Server, fmtSigned(hi.Offset), hi.Server, hint)
	}

	// Leap seconds announced by usable (or at least answering) servers.
	fs = append(fs, leapFindings(servers, cfg)...)

	slices.SortStableFunc(fs, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
	r.Findings = fs
	switch {
	case r.Usable == 0:
		r.Status = StatusUnusable
	case slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity == Error }):
		r.Status = StatusUnhealthy
	default:
		r.Status = StatusHealthy
	}
	return r
}

// leapFindings warns about leap seconds announced by synchronised servers,
// one finding per kind.
func leapFindings(servers []ServerResult, cfg Config) []Finding {
	var fs []Finding
	for _, kind := range []Leap{LeapInsert, LeapDelete} {
		var names []string
		var at time.Time
		for _, s := range servers {
			if s.Usable && s.Leap == kind {
				names = append(names, s.Server)
				at = s.ServerTime
			}
		}
		if len(names) == 0 {
			continue
		}
		f := Finding{Severity: Warn, Code: CodeLeapInsert}
		if kind == LeapDelete {
			f.Code = CodeLeapDelete
		}
		f.Message = fmt.Sprintf("announced by %s: %s", strings.Join(names, ", "),
			LeapWarning(kind, at, cfg.Policy, cfg.MaxWait, cfg.MaxLead))
		fs = append(fs, f)
	}
	return fs
}

// LeapAt returns when a leap second announced at server time now takes
// effect: the end of the current UTC month (RFC 5905: the last minute of
// the current month), returned as the first instant of the next month.
func LeapAt(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// LeapWarning explains a leap second announced at server time now: when it
// happens, what an unsmeared one does to a generator with the given policy,
// and the recommended smear. It is pure.
func LeapWarning(kind Leap, now time.Time, p generator.Policy, maxWait, maxLead time.Duration) string {
	at := LeapAt(now)
	last := at.Add(-hour24).Format("2006-01-02")
	when := fmt.Sprintf("at the end of %s UTC, the end of the current month as NTP announces it", last)
	if now.UTC().Format("2006-01-02") == last {
		when += " (tonight: the end of the current UTC day)"
	}
	when += ", in " + fmtAbout(at.Sub(now))
	smear := "Recommended: smear it, e.g. a 24 h linear smear from noon to noon UTC on every time server the ID hosts use " +
		"(chrony: 'smoothtime 400 0.001 leaponly' with 'leapsecmode slew' on the servers), and never mix smeared and unsmeared servers " +
		"(they disagree by up to 0.5 s mid-smear)"
	if kind == LeapDelete {
		return fmt.Sprintf("leap second deletion: 23:59:59 is skipped %s. Unsmeared the clock jumps 1s forward: no rewind, "+
			"a 1s gap in IDs' embedded time. %s", when, smear)
	}
	e := RewindEffect(time.Second, p, maxWait, maxLead)
	return fmt.Sprintf("leap second insertion: 23:59:60 %s. Unsmeared the kernel repeats 23:59:59: a 1s step back. %s. %s",
		when, e.Text, smear)
}

// Effect is what a generator's rewind policy does when the wall clock is
// stepped back.
type Effect struct {
	// By is the size of the step back.
	By time.Duration
	// Policy is the generator's rewind policy.
	Policy generator.Policy
	// FailFor is roughly how long after the step calls fail.
	FailFor time.Duration
	// BlockUpTo is the longest a successful call blocks.
	BlockUpTo time.Duration
	// Lead is how far IDs' embedded time runs ahead of the wall clock.
	Lead time.Duration
	// Stall is how long after the step a caller gets no ID: blocked or
	// refused (zero when IDs keep flowing).
	Stall time.Duration
	// Covered: the policy's bound absorbs the step without failing calls.
	Covered bool
	// Text says it in one or two sentences.
	Text string
}

// RewindEffect says what a generator with policy p, per-call wait bound
// maxWait and logical lead bound maxLead does when its wall clock is stepped
// back by `by` right after issuing an ID. It is pure.
func RewindEffect(by time.Duration, p generator.Policy, maxWait, maxLead time.Duration) Effect {
	e := Effect{By: by, Policy: p}
	switch p {
	case generator.PolicyRefuse:
		e.FailFor, e.Stall = by, by
		e.Text = fmt.Sprintf("Policy refuse: calls fail with ErrClockBackwards and the node reports not ready for about %s, until the clock passes the last issued ID",
			fmtDur(by))
	case generator.PolicyWait:
		e.Stall = by
		if by <= maxWait {
			e.BlockUpTo, e.Covered = by, true
			e.Text = fmt.Sprintf("Policy wait (max wait %s): calls block for up to %s until the clock passes the last issued ID; the bound suffices, no call fails",
				fmtDur(maxWait), fmtDur(by))
		} else {
			e.BlockUpTo, e.FailFor = maxWait, by-maxWait
			e.Text = fmt.Sprintf("Policy wait (max wait %s): the bound does not suffice: calls fail with ErrWaitExceeded for about %s, then block for up to %s",
				fmtDur(maxWait), fmtDur(by-maxWait), fmtDur(maxWait))
		}
	case generator.PolicyLogical:
		if by <= maxLead {
			e.Lead, e.Covered = by, true
			e.Text = fmt.Sprintf("Policy logical (max lead %s): IDs keep flowing with embedded time up to %s ahead of the wall clock (more if a sequence runs out meanwhile), the lead shrinking to zero over %s; within the bound",
				fmtDur(maxLead), fmtDur(by), fmtDur(by))
		} else {
			e.Lead, e.FailFor, e.Stall = maxLead, by-maxLead, by-maxLead
			e.Text = fmt.Sprintf("Policy logical (max lead %s): beyond the bound: calls fail with ErrLeadExceeded for about %s, then IDs run up to %s ahead of the wall clock",
				fmtDur(maxLead), fmtDur(by-maxLead), fmtDur(maxLead))
		}
	default:
		e.Text = fmt.Sprintf("Policy %v: unknown", p)
	}
	return e
}

// kissMeaning explains the common kiss codes (RFC 5905, section 7.4).
func kissMeaning(code string) string {
	switch code {
	case "RATE":
		return "the server asks this client to query less often"
	case "DENY", "RSTR":
		return "the server denies this client access"
	case "":
		return "no code given"
	}
	return "the server refuses to serve time"
}

// median returns the median; for an even count, the mean of the middle two.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func aheadBehind(ahead time.Duration) string {
	if ahead > 0 {
		return "ahead of"
	}
	return "behind"
}

// fmtDur formats a duration for people: microseconds below a second,
// milliseconds above.
func fmtDur(d time.Duration) string { return roundDur(d).String() }

// roundDur rounds d to the precision fmtDur shows.
func roundDur(d time.Duration) time.Duration {
	switch {
	case abs(d) >= time.Minute:
		return d.Round(time.Second)
	case abs(d) >= time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// fmtAbout formats a time to go, in days and hours beyond two days.
func fmtAbout(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd%dh", d/hour24, (d%hour24)/time.Hour)
	}
	return d.Round(time.Second).String()
}

// fmtSigned is fmtDur with an explicit sign.
func fmtSigned(d time.Duration) string {
	if d = roundDur(d); d > 0 {
		return "+" + fmtDur(d)
	}
	return fmtDur(d)
}
