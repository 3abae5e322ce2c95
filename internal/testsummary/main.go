// Command testsummary reads `go test -json` on stdin and prints what
// `go test` would print without -json (a line per package; the output of
// failed tests), then says how many tests skipped and why, and the one
// command that installs what is missing. make test pipes into it, so that
// skipped integration tests are seen outside CI too (with CI=true a
// missing service is already a failure, see internal/testenv).
//
//	go test -json ./... | go run ./internal/testsummary -missing "chromium chrony" -install "make deps"
//
// It exits 1 when a test or a package failed, 2 on unreadable input.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	missing := flag.String("missing", "", "space-separated Debian packages that are not installed (.ci/run missing)")
	install := flag.String("install", "make deps", "the command that installs them")
	module := flag.String("module", "github.com/snowchaos/snowchaos/", "import path prefix to drop from package names in the summary")
	flag.Parse()
	s := newSummary(os.Stdout, *module)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		os.Exit(2)
	}
	s.report(strings.Fields(*missing), *install)
	if s.failed {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

// skip is one skipped test.
type skip struct {
	pkg, test, reason string
}

// summary passes package output through and collects per-test output,
// printing it for failed tests and keeping the reason of skipped ones.
type summary struct {
	w      io.Writer
	module string
	out    map[string][]string // package + "\x00" + test -> output lines
	skips  []skip
	failed bool
}

func newSummary(w io.Writer, module string) *summary {
	return &summary{w: w, module: module, out: map[string][]string{}}
}

// read consumes the event stream. A line that is not JSON (a build tool
// writing to stdout) is passed through.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(s.w, "%s\n", line)
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

// framing matches the lines test2json adds in verbose mode that plain
// `go test` does not print for a failure.
var framing = regexp.MustCompile(`^\s*=== (RUN|PAUSE|CONT|NAME)\s`)

func (s *summary) event(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
	case "build-fail":
		s.failed = true
	case "output":
		if e.Test == "" {
			// Package lines: ok/FAIL, panics, timeouts. "PASS" and the
			// no-tests warning are verbose-mode noise.
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "testing: warning: no tests to run") {
				fmt.Fprint(s.w, e.Output)
			}
			return
		}
		if !framing.MatchString(e.Output) {
			s.out[key] = append(s.out[key], e.Output)
		}
	case "fail":
		s.failed = true
		if e.Test != "" {
			fmt.Fprint(s.w, strings.Join(s.out[key], ""))
		}
		delete(s.out, key)
	case "skip":
		if e.Test != "" {
			s.skips = append(s.skips, skip{pkg: e.Package, test: e.Test, reason: skipReason(s.out[key])})
		}
		delete(s.out, key)
	case "pass":
		delete(s.out, key)
	}
}

// location is the "file_test.go:123: " prefix of a t.Log line.
var location = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// missingPrefix starts the message of testenv.Missing outside CI.
const missingPrefix = "skipping (set CI=true to make this a failure): "

// skipReason is the first line of the message of a skipped test's output.
func skipReason(lines []string) string {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "--- SKIP") {
			continue
		}
		if loc := location.FindString(l); loc != "" {
			return strings.TrimSpace(l[len(loc):])
		}
	}
	return "(no reason given)"
}

// report prints the skips grouped by reason, services first.
func (s *summary) report(missing []string, install string) {
	if len(s.skips) == 0 {
		return
	}
	type group struct {
		reason  string
		service bool
		tests   []string
	}
	byReason := map[string]*group{}
	var groups []*group
	services := 0
	for _, sk := range s.skips {
		g := byReason[sk.reason]
		if g == nil {
			r, service := strings.CutPrefix(sk.reason, missingPrefix)
			g = &group{reason: r, service: service}
			byReason[sk.reason] = g
			groups = append(groups, g)
		}
		if g.service {
			services++
		}
		g.tests = append(g.tests, strings.TrimPrefix(sk.pkg, s.module)+" "+sk.test)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].service != groups[j].service {
			return groups[i].service
		}
		return len(groups[i].tests) > len(groups[j].tests)
	})
	fmt.Fprintf(s.w, "\n%d tests skipped", len(s.skips))
	if services > 0 {
		fmt.Fprintf(s.w, ", %d of them because a service or tool is missing (with CI=true each is a failure)", services)
	}
	fmt.Fprintln(s.w, ":")
	for _, g := range groups {
		kind := "other"
		if g.service {
			kind = "missing"
		}
		fmt.Fprintf(s.w, "  %3d  %s: %s\n", len(g.tests), kind, g.reason)
		const show = 3
		sort.Strings(g.tests)
		list := g.tests
		if len(list) > show {
			list = append(list[:show:show], fmt.Sprintf("and %d more", len(g.tests)-show))
		}
		fmt.Fprintf(s.w, "       %s\n", strings.Join(list, ", "))
	}
	switch {
	case len(missing) > 0:
		fmt.Fprintf(s.w, "Not installed: %s. Install them with: %s\n", strings.Join(missing, " "), install)
	case services > 0:
		fmt.Fprintf(s.w, "Every package %s installs is present; the reasons above say what else is missing.\n", install)
	}
}
