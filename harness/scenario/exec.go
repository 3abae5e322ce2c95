package scenario

import (
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
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
	envNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholderRE  = regexp.MustCompile(`\{[^{}]*\}`)
	execHolders    = []string{"{worker}", "{node}", "{port}", "{bin}"}
	requestHolders = append([]string{"{n}"}, execHolders...)
)

// execEntry is a target's exec block in a file.
type execEntry struct {
	Command      list[leaf[text]] `yaml:"command"`
	Dir          leaf[text]       `yaml:"dir"`
	Env          raw              `yaml:"env"`
	Protocol     leaf[text]       `yaml:"protocol"`
	Request      leaf[text]       `yaml:"request"`
	Ready        leaf[text]       `yaml:"ready"`
	URL          leaf[text]       `yaml:"url"`
	Format       leaf[text]       `yaml:"format"`
	Field        leaf[text]       `yaml:"field"`
	ID           leaf[text]       `yaml:"id"`
	Clock        leaf[text]       `yaml:"clock"`
	GoBuild      leaf[text]       `yaml:"go_build"`
	Time         leaf[text]       `yaml:"time"`
	TimeRequest  leaf[text]       `yaml:"time_request"`
	TimeURL      leaf[text]       `yaml:"time_url"`
	Timeout      leaf[duration]   `yaml:"timeout"`
	StartTimeout leaf[duration]   `yaml:"start_timeout"`
	MaxBatch     leaf[whole]      `yaml:"max_batch"`
}

// exec reads a target's exec block.
func (p *parser) exec(o *object[execEntry]) *Exec {
	n, e := o.N, &o.V
	x := &Exec{Line: line(n), Protocol: ProtocolStdio, Request: "{n}", Format: FormatLines, ID: IDDecimal, Clock: ClockFaketime, Time: TimeAuto, TimeRequest: "time",
		Timeout: 10 * time.Second, StartTimeout: 20 * time.Second, MaxBatch: 10_000}
	// str reads a string of at most maxExecString bytes whose
	// placeholders are all in holders.
	str := func(l *leaf[text], holders []string) (string, bool) {
		if !l.ok() {
			return "", false
		}
		v := string(l.V)
		if len(v) > maxExecString {
			p.fail(l.N, "%d characters: at most %d", len(v), maxExecString)
			return "", false
		}
		p.placeholders(l.N, v, holders)
		return v, true
	}
	switch c := &e.Command; {
	case c.N == nil:
		p.at(n, "command", "missing: the program to run and its arguments, as a list")
	case c.present() && (len(c.V) == 0 || len(c.V) > maxExecArgs):
		p.fail(c.N, "want 1 to %d arguments, found %d", maxExecArgs, len(c.V))
	}
	for i := range e.Command.V {
		if l := &e.Command.V[i]; l.ok() {
			if v := string(l.V); len(v) > maxExecString || (i == 0 && v == "") {
				p.fail(l.N, "want a non-empty argument of at most %d characters", maxExecString)
			} else {
				p.placeholders(l.N, v, execHolders)
				x.Command = append(x.Command, v)
			}
		}
	}
	x.Dir = filepath.Dir(p.file)
	if v, ok := str(&e.Dir, nil); ok {
		if filepath.IsAbs(v) {
			x.Dir = filepath.Clean(v)
		} else {
			x.Dir = filepath.Join(filepath.Dir(p.file), v)
		}
	}
	if e.Env.N != nil {
		x.Env = p.env(e.Env.N)
	}
	choice := func(l *leaf[text], dst *string, allowed ...string) {
		if v, ok := str(l, nil); ok {
			if !slices.Contains(allowed, v) {
				p.fail(l.N, "want %s, found %q%s", strings.Join(allowed, " or "), v, suggest(v, allowed))
				return
			}
			*dst = v
		}
	}
	choice(&e.Protocol, &x.Protocol, ProtocolStdio, ProtocolHTTP)
	choice(&e.Format, &x.Format, FormatLines, FormatJSONArray, FormatJSONField)
	choice(&e.ID, &x.ID, idFormats()...)
	choice(&e.Clock, &x.Clock, ClockFaketime, ClockGo, ClockNone)
	choice(&e.Time, &x.Time, TimeAuto, TimeOn, TimeOff)
	// line reads a string that must be one line (and, unless empty is
	// allowed, not empty).
	line := func(l *leaf[text], dst *string, holders []string, emptyOK bool, msg string) {
		if v, ok := str(l, holders); ok {
			if strings.ContainsAny(v, "\n\r") || (v == "" && !emptyOK) {
				p.fail(l.N, "%s", msg)
			}
			*dst = v
		}
	}
	line(&e.Request, &x.Request, requestHolders, true, "one line: no newline")
	line(&e.Ready, &x.Ready, nil, false, "want one non-empty line")
	line(&e.TimeRequest, &x.TimeRequest, execHolders, false, "want one non-empty line")
	loopback := func(l *leaf[text], dst *string, holders []string, example string) {
		v, ok := str(l, holders)
		if !ok {
			return
		}
		*dst = v
		u, err := url.Parse(strings.NewReplacer("{n}", "1", "{port}", "1", "{worker}", "1", "{node}", "a", "{bin}", "b").Replace(v))
		switch {
		case err != nil || u.Scheme != "http" || u.Host == "":
			p.fail(l.N, "want an http:// URL such as %s, found %q", example, v)
		case u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1":
			p.fail(l.N, "host %q: the exec target talks to its children on loopback only (127.0.0.1)", u.Hostname())
		}
	}
	loopback(&e.URL, &x.URL, requestHolders, "http://127.0.0.1:{port}/ids?count={n}")
	loopback(&e.TimeURL, &x.TimeURL, execHolders, "http://127.0.0.1:{port}/time")
	x.Field, _ = str(&e.Field, nil)
	x.GoBuild, _ = str(&e.GoBuild, nil)
	for _, t := range []struct {
		l   *leaf[duration]
		dst *time.Duration
	}{{&e.Timeout, &x.Timeout}, {&e.StartTimeout, &x.StartTimeout}} {
		if d := dur(t.l); t.l.ok() && (d < time.Millisecond || d > 5*time.Minute) {
			p.fail(t.l.N, "%s is out of range [%s, %s]", d, time.Millisecond, 5*time.Minute)
			*t.dst = 0
		} else if t.l.ok() {
			*t.dst = d
		}
	}
	if v, ok := p.within(&e.MaxBatch, 1, maxExecBatch); ok {
		x.MaxBatch = int(v)
	}
	switch {
	case x.Protocol == ProtocolHTTP && x.URL == "":
		p.at(n, "url", "missing: the http protocol needs the URL that returns IDs")
	case x.Protocol == ProtocolStdio && x.URL != "":
		p.failKey(e.URL.N, "the stdio protocol takes no url (set protocol: http)")
	case x.Protocol == ProtocolHTTP && x.Ready != "":
		p.failKey(e.Ready.N, "the http protocol waits for the port, not a line (ready is for stdio)")
	}
	if x.Format == FormatJSONField && x.Field == "" {
		p.at(n, "field", "missing: the json-field format needs the field's name")
	}
	if x.Format != FormatJSONField && x.Field != "" {
		p.failKey(e.Field.N, "only the json-field format takes a field (format is %s)", x.Format)
	}
	switch {
	case x.Protocol == ProtocolStdio && x.TimeURL != "":
		p.failKey(e.TimeURL.N, "the stdio protocol asks for the time on stdin (time_request); time_url is for protocol: http")
	case x.Protocol == ProtocolHTTP && e.TimeRequest.N != nil:
		p.failKey(e.TimeRequest.N, "the http protocol asks for the time at time_url; time_request is for protocol: stdio")
	case x.Protocol == ProtocolHTTP && x.Time == TimeOn && x.TimeURL == "":
		p.failKey(e.Time.N, "time: on over http needs time_url, the URL that answers the process's clock reading")
	case x.Time == TimeOff && (x.TimeURL != "" || e.TimeRequest.N != nil):
		p.failKey(e.Time.N, "time: off, but the block says how to ask for the time: drop one or the other")
	}
	if x.Clock == ClockGo && x.GoBuild == "" {
		p.at(n, "go_build", "missing: clock: go rebuilds the program from source: name its Go package (go_build: ./cmd/x)")
	}
	if x.Clock != ClockGo && x.GoBuild != "" {
		p.failKey(e.GoBuild.N, "go_build needs clock: go")
	}
	uses := strings.Join(x.Command, " ")
	for _, v := range x.Env {
		uses += " " + v.Value
	}
	if strings.Contains(uses, "{bin}") && x.GoBuild == "" {
		p.at(n, "command", "{bin} is the program built from go_build, which is not set")
	}
	if x.Protocol == ProtocolHTTP && !strings.Contains(uses+x.URL, "{port}") {
		p.at(n, "url", "the http protocol needs {port} in the URL and in the command or env (the port the process must listen on)")
	}
	return x
}

// env reads an exec block's environment: a mapping of variable names to
// strings, in file order.
func (p *parser) env(n *yaml.Node) []EnvVar {
	n = deref(n)
	switch {
	case n.Kind != yaml.MappingNode:
		p.fail(n, "want a mapping of variable names to values, found %s", describe(n))
		return nil
	case len(n.Content)/2 > maxExecEnv:
		p.fail(n, "%d variables: at most %d", len(n.Content)/2, maxExecEnv)
		return nil
	}
	var out []EnvVar
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := scalar(k)
		switch {
		case !ok || !envNameRE.MatchString(name) || len(name) > 256:
			p.errorf(k, p.paths[n], "%q is not an environment variable name", k.Value)
		case seen[name]:
			p.fail(k, "variable %q repeated", name)
		default:
			seen[name] = true
			s, ok := scalar(v)
			switch {
			case !ok:
				p.fail(v, "want a string, found %s", describe(v))
			case len(s) > maxExecString:
				p.fail(v, "%d characters: at most %d", len(s), maxExecString)
			default:
				p.placeholders(v, s, execHolders)
				out = append(out, EnvVar{name, s})
			}
		}
	}
	return out
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
func (p *parser) placeholders(n *yaml.Node, v string, allowed []string) {
	for _, h := range placeholderRE.FindAllString(v, -1) {
		if !slices.Contains(allowed, h) {
			p.fail(n, "unknown placeholder %s%s (known here: %s)", h, suggest(h, allowed), strings.Join(allowed, ", "))
		}
	}
}
