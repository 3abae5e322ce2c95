package ntpcheck

import (
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Leap is an NTP leap indicator.
type Leap uint8

// Leap indicator values (RFC 5905, section 7.3).
const (
	LeapNone           Leap = 0 // no leap second pending
	LeapInsert         Leap = 1 // the last minute of the month has 61 seconds
	LeapDelete         Leap = 2 // the last minute of the month has 59 seconds
	LeapUnsynchronised Leap = 3 // the server's clock is not synchronised
)

// String returns "none", "insert", "delete" or "unsynchronised".
func (l Leap) String() string {
	switch l {
	case LeapNone:
		return "none"
	case LeapInsert:
		return "insert"
	case LeapDelete:
		return "delete"
	case LeapUnsynchronised:
		return "unsynchronised"
	}
	return fmt.Sprintf("leap(%d)", uint8(l))
}

// Outcome classifies one query (and a server's kept answer).
type Outcome string

// Query outcomes. Outcomes lists them all; metrics pre-initialise every one.
const (
	OutcomeOK             Outcome = "ok"             // a valid answer
	OutcomeKissOfDeath    Outcome = "kod"            // stratum 0 with a kiss code (RATE, DENY, ...)
	OutcomeUnsynchronised Outcome = "unsynchronised" // leap indicator 3, stratum 0 without a kiss code, or stratum 16
	OutcomeInvalid        Outcome = "invalid"        // an answer that fails validation (stale reference, bad dispersion, mismatched reply)
	OutcomeTimeout        Outcome = "timeout"        // no answer in time
	OutcomeRefused        Outcome = "refused"        // nothing listening (ICMP port unreachable)
	OutcomeError          Outcome = "error"          // anything else: name resolution, bad address, cancelled
)

// Outcomes lists every Outcome, in a fixed order.
var Outcomes = []Outcome{
	OutcomeOK, OutcomeKissOfDeath, OutcomeUnsynchronised, OutcomeInvalid,
	OutcomeTimeout, OutcomeRefused, OutcomeError,
}

// Severity ranks a finding.
type Severity uint8

// Severities, from least to most serious. An Error finding fails the check.
const (
	Info Severity = iota
	Warn
	Error
)

// String returns "info", "warn" or "error".
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warn:
		return "warn"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Code names a kind of finding; codes are stable, for machines.
type Code string

// Finding codes.
const (
	CodeOffsetBudget   Code = "offset-budget"    // the host offset passes MaxOffset (error)
	CodeStepBack       Code = "step-back"        // the next correction may step the clock back (warn)
	CodeStepForward    Code = "step-forward"     // the next correction may step the clock forward (info)
	CodeLeapInsert     Code = "leap-insert"      // a leap second insertion is announced (warn)
	CodeLeapDelete     Code = "leap-delete"      // a leap second deletion is announced (warn)
	CodeKissOfDeath    Code = "kiss-of-death"    // a server sent a kiss-of-death (error)
	CodeUnsynchronised Code = "unsynchronised"   // a server is not synchronised (error)
	CodeInvalid        Code = "invalid-response" // a server's answers fail validation (error)
	CodeUnreachable    Code = "unreachable"      // a server did not answer (warn)
	CodeNoUsableServer Code = "no-usable-server" // no server gave a usable answer (error)
	CodeDisagreement   Code = "disagreement"     // servers disagree beyond MaxSpread (warn)
	CodeInsane         Code = "insane"           // a server's root distance is beyond MaxDistance (warn)
)

// Finding is one thing the check found, with what it means for the
// generator.
type Finding struct {
	// Severity ranks it; an Error fails the check.
	Severity Severity `json:"severity"`
	// Code names its kind, for machines.
	Code Code `json:"code"`
	// Server is the server concerned; empty for a finding about the host.
	Server string `json:"server,omitempty"`
	// Message says what was found and what it means for the generator.
	Message string `json:"message"`
}

// Status is a report's overall verdict.
type Status uint8

// Statuses; ExitCode maps them to the CLI's exit codes.
const (
	StatusHealthy   Status = iota // no error finding
	StatusUnhealthy               // at least one error finding
	StatusUnusable                // no server gave a usable answer
)

// String returns "healthy", "unhealthy" or "unusable".
func (s Status) String() string {
	switch s {
	case StatusHealthy:
		return "healthy"
	case StatusUnhealthy:
		return "unhealthy"
	case StatusUnusable:
		return "unusable"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ExitCode is 0 healthy, 1 unhealthy (a finding beyond the budget), 2 no
// usable server.
func (s Status) ExitCode() int {
	switch s {
	case StatusHealthy:
		return 0
	case StatusUnhealthy:
		return 1
	}
	return 2
}

// ServerResult is what one server said, from the kept sample.
type ServerResult struct {
	// Server is the address queried, as "host:port".
	Server string
	// Queries counts the queries sent, by outcome.
	Queries map[Outcome]int
	// Outcome classifies the kept answer (or the last failure).
	Outcome Outcome
	// Error describes the failure when Outcome is not OutcomeOK.
	Error string
	// Answered: some query got a reply (even a kiss-of-death).
	Answered bool
	// Usable: the kept answer validates, so its offset counts.
	Usable bool
	// Offset is the server's clock minus the host's: positive when the
	// host is behind, negative when it is ahead.
	Offset time.Duration
	// RTT is the round-trip time of the kept sample.
	RTT time.Duration
	// Jitter is the RMS difference of the other valid samples' offsets
	// from the kept one; zero with one sample.
	Jitter time.Duration
	// Stratum is the server's stratum (0: kiss-of-death or unsynchronised).
	Stratum uint8
	// ReferenceID is the reference as text: ".GPS." style for stratum 1,
	// an IPv4 address (or IPv6 hash) for stratum 2 and above, the kiss
	// code for stratum 0.
	ReferenceID string
	// KissCode is the kiss-of-death code, e.g. "RATE"; empty otherwise.
	KissCode string
	// Leap is the server's leap indicator.
	Leap Leap
	// RootDelay and RootDispersion are the server's distance to its
	// primary reference as it reports them.
	RootDelay, RootDispersion time.Duration
	// RootDistance is RTT/2 + RootDelay/2 + RootDispersion.
	RootDistance time.Duration
	// MinError is the part of the offset the round trip cannot explain.
	MinError time.Duration
	// ServerTime is the server's transmit time of the kept answer.
	ServerTime time.Time
	// ReferenceTime is when the server's clock was last set.
	ReferenceTime time.Time
	// Sane is node_exporter's sanity verdict: the answer validates, root
	// distance and minimum error are within bounds (the latter with 1 s
	// allowance around a leap second).
	Sane bool
	// Insane lists why Sane is false.
	Insane []string
}

// Limits are the settings a report was judged against, defaults filled in.
// Each field means what the Config field of the same name does.
type Limits struct {
	StepThreshold time.Duration    // offset beyond which a correction steps
	MaxOffset     time.Duration    // the budget
	MaxSpread     time.Duration    // allowed disagreement between servers
	MaxDistance   time.Duration    // sanity bound on root distance
	MaxMinError   time.Duration    // sanity bound on minimum error
	Policy        generator.Policy // the generator's rewind policy
	MaxWait       time.Duration    // the generator's wait bound
	MaxLead       time.Duration    // the generator's logical lead bound
}

// Report is the result of one check.
type Report struct {
	// Time is when the check finished, by the host's clock.
	Time time.Time
	// Limits are the settings the findings were judged against.
	Limits Limits
	// Servers holds one result per configured server, in order.
	Servers []ServerResult
	// Usable counts servers with a usable answer.
	Usable int
	// Offset is the median offset of the usable servers (server minus
	// host: negative when the host is ahead); zero when none is usable.
	Offset time.Duration
	// Spread is the largest minus the smallest usable offset.
	Spread time.Duration
	// LeapMidnight is the UTC midnight around which a leap second was
	// announced (by this or an earlier check); zero if none. Pass it on in
	// Config.LeapMidnight.
	LeapMidnight time.Time
	// Findings, most serious first.
	Findings []Finding
	// Status is the overall verdict.
	Status Status
}

// Err returns nil for a healthy report, an error wrapping
// ErrNoUsableServer when no server was usable, one wrapping ErrOffsetBudget
// when the offset passes the budget, and otherwise one naming the first
// error finding.
func (r Report) Err() error {
	switch r.Status {
	case StatusHealthy:
		return nil
	case StatusUnusable:
		return fmt.Errorf("%w (%d servers tried)", ErrNoUsableServer, len(r.Servers))
	}
	for _, f := range r.Findings {
		if f.Code == CodeOffsetBudget {
			return fmt.Errorf("%w: %s", ErrOffsetBudget, f.Message)
		}
	}
	for _, f := range r.Findings {
		if f.Severity == Error {
			return fmt.Errorf("ntpcheck: %s: %s", f.Code, f.Message)
		}
	}
	return fmt.Errorf("ntpcheck: %v", r.Status)
}

// OverBudget reports whether the usable servers put the host's offset
// beyond the budget.
func (r Report) OverBudget() bool {
	return r.Usable > 0 && abs(r.Offset) > r.Limits.MaxOffset
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
