package ntpcheck

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// EnvServers names the environment variable that overrides the default
// servers: a list of "host" or "host:port" separated by commas or spaces.
const EnvServers = "SNOWCHAOS_NTP_SERVERS"

// DefaultPort is the NTP port used when a server is given without one.
const DefaultPort = 123

// Defaults for the zero values of Config.
const (
	DefaultSamples       = 3
	DefaultSampleGap     = 2 * time.Second
	DefaultTimeout       = 2 * time.Second
	DefaultStepThreshold = 128 * time.Millisecond
	DefaultMaxSpread     = 100 * time.Millisecond
	// DefaultMaxDistance is node_exporter's collector.ntp.max-distance
	// default: 1.5 s (ntp.org's MAXDIST) + PHI * 2^maxPoll = 3.46608 s.
	DefaultMaxDistance = 3466080 * time.Microsecond
	// DefaultInterval is how often a Monitor checks: NTP's minimum poll
	// interval (2^6 s).
	DefaultInterval = 64 * time.Second
)

// PoolServers is the default server list: four names from the NTP pool,
// which resolve to different servers.
var PoolServers = []string{"0.pool.ntp.org", "1.pool.ntp.org", "2.pool.ntp.org", "3.pool.ntp.org"}

// Sentinel errors. Their text never changes once published.
var (
	// ErrInvalidServer: a server address cannot be parsed.
	ErrInvalidServer = errors.New("ntpcheck: invalid server address")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("ntpcheck: invalid config")
	// ErrNoUsableServer: no server gave a usable answer.
	ErrNoUsableServer = errors.New("ntpcheck: no usable NTP server")
	// ErrOffsetBudget: the host's clock offset passes the budget
	// (Config.MaxOffset).
	ErrOffsetBudget = errors.New("ntpcheck: clock offset beyond budget")
)

// Config says which servers to ask, how, and what to judge the answers
// against. Its zero value is usable: the servers from DefaultServers, three
// samples each, and the generator's default rewind settings.
type Config struct {
	// Servers to query, each "host", "host:port", "[ipv6]:port" or a bare
	// IPv6 address. Empty: DefaultServers().
	Servers []string
	// Samples is the number of queries per server; the answer with the
	// lowest round-trip time is kept, as NTP's clock filter does. Zero: 3.
	Samples int
	// SampleGap is the pause between two queries to the same server, so
	// that servers with "limited" rate rules (ntpd's default minimum is
	// 2 s) do not answer with a RATE kiss-of-death. Zero: 2 s; negative:
	// no pause.
	SampleGap time.Duration
	// Timeout bounds each query. Zero: 2 s.
	Timeout time.Duration
	// StepThreshold is the offset beyond which the next correction steps
	// the clock instead of slewing it (ntpd's step threshold and chrony's
	// usual makestep). Zero: 128 ms.
	StepThreshold time.Duration
	// MaxOffset is the budget: a host offset beyond it is an error finding
	// and fails the check. Zero: StepThreshold.
	MaxOffset time.Duration
	// MaxSpread is how far the usable servers may disagree with each other
	// before a warning. Zero: 100 ms.
	MaxSpread time.Duration
	// MaxDistance bounds a sane server's root distance. Zero: 3.46608 s,
	// node_exporter's default.
	MaxDistance time.Duration
	// MaxMinError bounds a sane answer's minimum error (the part of the
	// offset the round trip cannot explain). node_exporter uses 1 ms for a
	// local daemon; here the host's offset is what is being measured, so
	// zero means MaxOffset. A leap second adds 1 s, as in node_exporter.
	MaxMinError time.Duration
	// Policy is the generator's rewind policy the findings are judged
	// against. Zero: generator.PolicyWait.
	Policy generator.Policy
	// MaxWait is the generator's per-call wait bound. Zero: 1 s.
	MaxWait time.Duration
	// MaxLead is the generator's logical-clock lead bound. Zero: 1 s.
	MaxLead time.Duration
	// LeapMidnight is a leap-second midnight seen by an earlier check
	// (Report.LeapMidnight); servers drop the leap flag right after it, so
	// carrying it keeps the sanity allowance in place. Monitor carries it.
	LeapMidnight time.Time
	// LocalTime reads the host's clock for queries to server (the address
	// as given). Nil: the system clock, with kernel receive timestamps where
	// available. Tests use it to skew the host's clock.
	LocalTime func(server string) time.Time
}

// withDefaults returns c with zero fields filled in.
func (c Config) withDefaults() Config {
	if len(c.Servers) == 0 {
		c.Servers = DefaultServers()
	}
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.SampleGap == 0 {
		c.SampleGap = DefaultSampleGap
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StepThreshold == 0 {
		c.StepThreshold = DefaultStepThreshold
	}
	if c.MaxOffset == 0 {
		c.MaxOffset = c.StepThreshold
	}
	if c.MaxSpread == 0 {
		c.MaxSpread = DefaultMaxSpread
	}
	if c.MaxDistance == 0 {
		c.MaxDistance = DefaultMaxDistance
	}
	if c.MaxMinError == 0 {
		c.MaxMinError = c.MaxOffset
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Second
	}
	if c.MaxLead == 0 {
		c.MaxLead = time.Second
	}
	return c
}

// Validate reports the first out-of-range field, wrapping ErrInvalidConfig
// (or ErrInvalidServer for an unparsable server).
func (c Config) Validate() error {
	for _, s := range c.Servers {
		if _, err := ParseServer(s); err != nil {
			return err
		}
	}
	checks := []struct {
		name string
		v    time.Duration
	}{
		{"Timeout", c.Timeout}, {"StepThreshold", c.StepThreshold}, {"MaxOffset", c.MaxOffset},
		{"MaxSpread", c.MaxSpread}, {"MaxDistance", c.MaxDistance}, {"MaxMinError", c.MaxMinError},
		{"MaxWait", c.MaxWait}, {"MaxLead", c.MaxLead},
	}
	for _, ch := range checks {
		if ch.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, ch.name, ch.v)
		}
	}
	if c.Samples < 0 || c.Samples > 64 {
		return fmt.Errorf("%w: Samples %d not in [0, 64]", ErrInvalidConfig, c.Samples)
	}
	if c.Policy > generator.PolicyLogical {
		return fmt.Errorf("%w: Policy %v", ErrInvalidConfig, c.Policy)
	}
	return nil
}

// DefaultServers returns the servers from $SNOWCHAOS_NTP_SERVERS when it is
// set and parses, else PoolServers.
func DefaultServers() []string {
	if v := strings.TrimSpace(os.Getenv(EnvServers)); v != "" {
		if s, err := ParseServerList(v); err == nil && len(s) > 0 {
			return s
		}
	}
	return append([]string(nil), PoolServers...)
}

// ParseServerList splits a list of servers separated by commas or white
// space and parses each with ParseServer.
func ParseServerList(s string) ([]string, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		a, err := ParseServer(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// ParseServer checks a server address and returns it as "host:port"
// (IPv6 in brackets), adding DefaultPort when none is given. It accepts
// "host", "host:port", "[ipv6]", "[ipv6]:port" and a bare IPv6 address;
// errors name the value and wrap ErrInvalidServer.
func ParseServer(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w %q: %s", ErrInvalidServer, s, why)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > 300 {
		return bad("too long")
	}
	host, port := s, ""
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("missing ']'")
		}
		host = s[1:end]
		rest := s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
			if port == "" {
				return bad("empty port")
			}
		default:
			return bad("unexpected text after ']'")
		}
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return bad("not an IPv6 address in brackets")
		}
	case strings.Count(s, ":") > 1:
		if net.ParseIP(s) == nil {
			return bad("not an IPv6 address (use [host]:port)")
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port = s[:i], s[i+1:]
		if port == "" {
			return bad("empty port")
		}
	}
	p := DefaultPort
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '0' {
			return bad("port must be 1-65535")
		}
		p = n
	}
	if net.ParseIP(host) == nil && !validHostname(host) {
		return bad("not a host name or IP address")
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// validHostname reports whether h is a DNS name: dot-separated labels of
// letters, digits and hyphens, no label longer than 63, not starting or
// ending with a hyphen.
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
