package scenario

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/verify"
)

// ExecTarget is the registered name of the target that runs a user's
// command (a target entry with use: exec and an exec block).
const ExecTarget = "exec"

// Exec is an exec target's command and how the harness talks to it. Every
// string may hold the placeholders {worker} (the node's worker ID), {node}
// (its name), {port} (a free loopback port chosen per process), {bin} (the
// program built from GoBuild) and, in Request and URL, {n} (how many IDs
// are asked for).
type Exec struct {
	// Command is the program and its arguments, one process per node.
	Command []string
	// Dir is the working directory, absolute (a relative dir in the file
	// is resolved against the scenario file's directory, the default).
	Dir string
	// Env adds to the harness's environment, in file order.
	Env []EnvVar
	// Protocol is "stdio" (request lines on stdin, ID lines on stdout) or
	// "http" (GET URL).
	Protocol string
	// Request is the stdio request line (default "{n}").
	Request string
	// Ready, when set, is a stdout line the process prints once it can
	// take requests (stdio); the HTTP protocol waits for the port instead.
	Ready string
	// URL is the HTTP request (http protocol), on a loopback host.
	URL string
	// Format is how a response carries IDs: "lines" (one per line),
	// "json-array" (a JSON array of strings or numbers) or "json-field" (a
	// JSON object whose Field holds an ID or an array of them).
	Format string
	// Field is the JSON field of the json-field format.
	Field string
	// ID is the ID format: "decimal" (a 64-bit Snowflake in decimal), or
	// the name of another kind of ID the verifier checks: "uuidv7",
	// "ulid", "uuidv4", "uuid" (any version) or "string" (see verify.Kind
	// and IDKind).
	ID string
	// Clock is how clock faults reach the process: "faketime"
	// (libfaketime), "go" (GoBuild rebuilt with the runtime clock overlay)
	// or "none" (no clock faults).
	Clock string
	// GoBuild is the Go package built with the overlay when Clock is "go".
	GoBuild string
	// Time says whether the process answers a clock reading of its own,
	// the evidence a clock fault reached it: "auto" (stdio: asked once at
	// the first start, and used when the answer is a clock reading; http:
	// on when TimeURL is set), "on" (required: a process that does not
	// answer fails to start) or "off".
	Time string
	// TimeRequest is the stdio request line that asks for the reading
	// (default "time"); TimeURL the HTTP URL that answers it (http).
	TimeRequest, TimeURL string
	// Timeout bounds one request; StartTimeout a process's start.
	Timeout, StartTimeout time.Duration
	// MaxBatch is the most IDs one request asks for.
	MaxBatch int
	// Line is the exec block's line.
	Line int
}

// EnvVar is one environment variable of an exec target.
type EnvVar struct {
	Name, Value string
}

// Exec formats, protocols and clocks.
const (
	ProtocolStdio = "stdio"
	ProtocolHTTP  = "http"

	FormatLines     = "lines"
	FormatJSONArray = "json-array"
	FormatJSONField = "json-field"

	IDDecimal = "decimal"

	ClockFaketime = "faketime"
	ClockGo       = "go"
	ClockNone     = "none"

	TimeAuto = "auto"
	TimeOn   = "on"
	TimeOff  = "off"
)

// Bounds of an exec block.
const (
	maxExecArgs   = 64
	maxExecString = 4096
	maxExecEnv    = 64
	maxExecBatch  = 1_000_000
)

var (
	execKeys       = []string{"command", "dir", "env", "protocol", "request", "ready", "url", "format", "field", "id", "clock", "go_build", "time", "time_request", "time_url", "timeout", "start_timeout", "max_batch"}
	envNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholderRE  = regexp.MustCompile(`\{[^{}]*\}`)
	execHolders    = []string{"{worker}", "{node}", "{port}", "{bin}"}
	requestHolders = append([]string{"{n}"}, execHolders...)
)

// exec parses a target's exec block.
func (p *parser) exec(n *yaml.Node, path string) *Exec {
	m := p.mapping(n, path, execKeys...)
	x := &Exec{Line: max(n.Line, 1), Protocol: ProtocolStdio, Request: "{n}", Format: FormatLines, ID: IDDecimal, Clock: ClockFaketime, Time: TimeAuto, TimeRequest: "time",
		Timeout: 10 * time.Second, StartTimeout: 20 * time.Second, MaxBatch: 10_000}
	str := func(key string, holders []string) (string, *yaml.Node, bool) {
		e, ok := m[key]
		if !ok {
			return "", nil, false
		}
		v, ok := p.scalar(e.val, path+"."+key, "a string")
		if !ok {
			return "", nil, false
		}
		if len(v) > maxExecString {
			p.errorf(e.val, path+"."+key, "%d characters: at most %d", len(v), maxExecString)
			return "", nil, false
		}
		p.placeholders(e.val, path+"."+key, v, holders)
		return v, e.val, true
	}
	if e, ok := m["command"]; ok {
		items := p.sequence(e.val, path+".command")
		if len(items) == 0 || len(items) > maxExecArgs {
			p.errorf(e.val, path+".command", "want 1 to %d arguments, found %d", maxExecArgs, len(items))
		}
		for i, it := range items {
			key := fmt.Sprintf("%s.command[%d]", path, i)
			if v, ok := p.scalar(it, key, "a string"); ok {
				if len(v) > maxExecString || (i == 0 && v == "") {
					p.errorf(it, key, "want a non-empty argument of at most %d characters", maxExecString)
					continue
				}
				p.placeholders(it, key, v, execHolders)
				x.Command = append(x.Command, v)
			}
		}
	} else {
		p.errorf(n, path+".command", "missing: the program to run and its arguments, as a list")
	}
	x.Dir = filepath.Dir(p.file)
	if v, _, ok := str("dir", nil); ok {
		if filepath.IsAbs(v) {
			x.Dir = filepath.Clean(v)
		} else {
			x.Dir = filepath.Join(filepath.Dir(p.file), v)
		}
	}
	if e, ok := m["env"]; ok {
		en := deref(e.val)
		if en == nil || en.Kind != yaml.MappingNode {
			p.errorf(e.val, path+".env", "want a mapping of variable names to values, found %s", describe(e.val))
		} else if len(en.Content)/2 > maxExecEnv {
			p.errorf(e.val, path+".env", "%d variables: at most %d", len(en.Content)/2, maxExecEnv)
		} else {
			seen := map[string]bool{}
			for i := 0; i+1 < len(en.Content); i += 2 {
				k, v := deref(en.Content[i]), en.Content[i+1]
				key := path + ".env." + k.Value
				if k.Kind != yaml.ScalarNode || !envNameRE.MatchString(k.Value) || len(k.Value) > 256 {
					p.errorf(k, path+".env", "%q is not an environment variable name", k.Value)
					continue
				}
				if seen[k.Value] {
					p.errorf(k, key, "variable %q repeated", k.Value)
					continue
				}
				seen[k.Value] = true
				if s, ok := p.scalar(v, key, "a string"); ok {
					if len(s) > maxExecString {
						p.errorf(v, key, "%d characters: at most %d", len(s), maxExecString)
						continue
					}
					p.placeholders(v, key, s, execHolders)
					x.Env = append(x.Env, EnvVar{k.Value, s})
				}
			}
		}
	}
	choice := func(key string, dst *string, allowed ...string) {
		if v, node, ok := str(key, nil); ok {
			if !contains(allowed, v) {
				p.errorf(node, path+"."+key, "want %s, found %q%s", strings.Join(allowed, " or "), v, suggest(v, allowed))
				return
			}
			*dst = v
		}
	}
	choice("protocol", &x.Protocol, ProtocolStdio, ProtocolHTTP)
	choice("format", &x.Format, FormatLines, FormatJSONArray, FormatJSONField)
	choice("id", &x.ID, idFormats()...)
	choice("clock", &x.Clock, ClockFaketime, ClockGo, ClockNone)
	if v, node, ok := str("request", requestHolders); ok {
		if strings.ContainsAny(v, "\n\r") {
			p.errorf(node, path+".request", "one line: no newline")
		}
		x.Request = v
	}
	if v, node, ok := str("ready", nil); ok {
		if strings.ContainsAny(v, "\n\r") || v == "" {
			p.errorf(node, path+".ready", "want one non-empty line")
		}
		x.Ready = v
	}
	loopback := func(key, v string, node *yaml.Node, example string) {
		u, err := url.Parse(strings.NewReplacer("{n}", "1", "{port}", "1", "{worker}", "1", "{node}", "a", "{bin}", "b").Replace(v))
		switch {
		case err != nil || u.Scheme != "http" || u.Host == "":
			p.errorf(node, path+"."+key, "want an http:// URL such as %s, found %q", example, v)
		case u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1":
			p.errorf(node, path+"."+key, "host %q: the exec target talks to its children on loopback only (127.0.0.1)", u.Hostname())
		}
	}
	if v, node, ok := str("url", requestHolders); ok {
		x.URL = v
		loopback("url", v, node, "http://127.0.0.1:{port}/ids?count={n}")
	}
	choice("time", &x.Time, TimeAuto, TimeOn, TimeOff)
	if v, node, ok := str("time_request", execHolders); ok {
		if strings.ContainsAny(v, "\n\r") || v == "" {
			p.errorf(node, path+".time_request", "want one non-empty line")
		}
		x.TimeRequest = v
	}
	if v, node, ok := str("time_url", execHolders); ok {
		x.TimeURL = v
		loopback("time_url", v, node, "http://127.0.0.1:{port}/time")
	}
	if v, _, ok := str("field", nil); ok {
		x.Field = v
	}
	if v, _, ok := str("go_build", nil); ok {
		x.GoBuild = v
	}
	if e, ok := m["timeout"]; ok {
		x.Timeout = p.boundedDuration(e.val, path+".timeout", time.Millisecond, 5*time.Minute)
	}
	if e, ok := m["start_timeout"]; ok {
		x.StartTimeout = p.boundedDuration(e.val, path+".start_timeout", time.Millisecond, 5*time.Minute)
	}
	if e, ok := m["max_batch"]; ok {
		if v, ok := p.integer(e.val, path+".max_batch", 1, maxExecBatch); ok {
			x.MaxBatch = int(v)
		}
	}
	switch {
	case x.Protocol == ProtocolHTTP && x.URL == "":
		p.errorf(n, path+".url", "missing: the http protocol needs the URL that returns IDs")
	case x.Protocol == ProtocolStdio && x.URL != "":
		p.errorf(m["url"].key, path+".url", "the stdio protocol takes no url (set protocol: http)")
	case x.Protocol == ProtocolHTTP && x.Ready != "":
		p.errorf(m["ready"].key, path+".ready", "the http protocol waits for the port, not a line (ready is for stdio)")
	}
	if x.Format == FormatJSONField && x.Field == "" {
		p.errorf(n, path+".field", "missing: the json-field format needs the field's name")
	}
	if x.Format != FormatJSONField && x.Field != "" {
		p.errorf(m["field"].key, path+".field", "only the json-field format takes a field (format is %s)", x.Format)
	}
	switch {
	case x.Protocol == ProtocolStdio && x.TimeURL != "":
		p.errorf(m["time_url"].key, path+".time_url", "the stdio protocol asks for the time on stdin (time_request); time_url is for protocol: http")
	case x.Protocol == ProtocolHTTP && m["time_request"].key != nil:
		p.errorf(m["time_request"].key, path+".time_request", "the http protocol asks for the time at time_url; time_request is for protocol: stdio")
	case x.Protocol == ProtocolHTTP && x.Time == TimeOn && x.TimeURL == "":
		p.errorf(m["time"].key, path+".time", "time: on over http needs time_url, the URL that answers the process's clock reading")
	case x.Time == TimeOff && (x.TimeURL != "" || m["time_request"].key != nil):
		p.errorf(m["time"].key, path+".time", "time: off, but the block says how to ask for the time: drop one or the other")
	}
	if x.Clock == ClockGo && x.GoBuild == "" {
		p.errorf(n, path+".go_build", "missing: clock: go rebuilds the program from source: name its Go package (go_build: ./cmd/x)")
	}
	if x.Clock != ClockGo && x.GoBuild != "" {
		p.errorf(m["go_build"].key, path+".go_build", "go_build needs clock: go")
	}
	uses := strings.Join(x.Command, " ")
	for _, v := range x.Env {
		uses += " " + v.Value
	}
	if strings.Contains(uses, "{bin}") && x.GoBuild == "" {
		p.errorf(n, path+".command", "{bin} is the program built from go_build, which is not set")
	}
	if x.Protocol == ProtocolHTTP && !strings.Contains(uses+x.URL, "{port}") {
		p.errorf(n, path+".url", "the http protocol needs {port} in the URL and in the command or env (the port the process must listen on)")
	}
	return x
}

// idFormats are the values of an exec block's id: decimal for Snowflakes,
// and every other verify.Kind by its name.
func idFormats() []string {
	out := []string{IDDecimal}
	for _, k := range verify.Kinds() {
		if k != verify.KindSnowflake {
			out = append(out, k.String())
		}
	}
	return out
}

// IDKind returns the kind of ID the block's ID format names: KindSnowflake
// for "decimal" (or unset).
func (x *Exec) IDKind() verify.Kind {
	if k, err := verify.ParseKind(x.ID); err == nil {
		return k
	}
	return verify.KindSnowflake
}

// placeholders reports a {placeholder} in v that is not in allowed.
func (p *parser) placeholders(n *yaml.Node, key, v string, allowed []string) {
	for _, h := range placeholderRE.FindAllString(v, -1) {
		if !contains(allowed, h) {
			p.errorf(n, key, "unknown placeholder %s%s (known here: %s)", h, suggest(h, allowed), strings.Join(allowed, ", "))
		}
	}
}

// boundedDuration parses a duration in [lo, hi].
func (p *parser) boundedDuration(n *yaml.Node, key string, lo, hi time.Duration) time.Duration {
	d, ok := p.duration(n, key, false)
	if !ok {
		return 0
	}
	if d < lo || d > hi {
		p.errorf(n, key, "%s is out of range [%s, %s]", d, lo, hi)
		return 0
	}
	return d
}
