package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/snowchaos/snowchaos/harness"
)

// The JUnit XML schema as CI systems read it (Jenkins, GitLab, GitHub
// actions that publish test results).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnit writes one test suite per scenario and one test case per
// scenario x target x check: a failed check is a <failure>, an unknown one
// an <error> (CI treats both as red, matching exit codes 1 and 2), an
// informational one <skipped>, as is one the run's kind of ID has no
// figure for (n/a). A negative control's expectation says
// caught in its output, or escaped in its failure. A run that could not complete adds a case
// "<target>: run" with an <error>; a target that cannot take the scenario
// (n/a) is one case "<target>: n/a", <skipped> with the reason.
func JUnit(w io.Writer, rep *harness.Report) error {
	out := junitSuites{Name: "snowchaos"}
	for _, sr := range rep.Scenarios {
		s := junitSuite{Name: sr.Name, Time: "0"}
		for _, r := range sr.Runs {
			if r.Verdict == harness.NA {
				s.Cases = append(s.Cases, junitCase{Name: r.Target + ": n/a", Classname: "snowchaos." + sr.Name, File: sr.File, Time: "0",
					Skipped: &junitProblem{Message: "not applicable: " + r.NotApplicable}})
				s.Skipped++
				continue
			}
			for _, c := range r.Checks {
				tc := junitCase{
					Name:      r.Target + ": " + c.Expr,
					Classname: "snowchaos." + sr.Name,
					File:      sr.File,
					Line:      c.Line,
					Time:      "0",
					SystemOut: fmt.Sprintf("observed %s; ids %d, duplicates %d, max wait %s, max lead %s, availability %.4f",
						c.Observed, r.Figures.IDs, r.Figures.Duplicates, r.Figures.MaxWait, maxLead(r), r.Figures.Availability),
				}
				if note := kindNote(r); note != "" {
					tc.SystemOut += "; " + note
				}
				if c.Expected {
					tc.Name = r.Target + ": expect " + c.Expr
					tc.SystemOut = c.ControlVerdict() + " (negative control): " + tc.SystemOut
				}
				msg := fmt.Sprintf("%s: observed %s", c.Expr, c.Observed)
				switch {
				case c.Info:
					tc.Skipped = &junitProblem{Message: "informational for a negative control: " + string(c.Verdict)}
					s.Skipped++
				case c.Verdict == harness.NA:
					tc.Skipped = &junitProblem{Message: "not applicable: " + c.Reason}
					s.Skipped++
				case c.Verdict == harness.Fail:
					if c.Expected {
						msg = harness.Escaped + ": the harness did not catch the negative control: " + msg
					}
					tc.Failure = &junitProblem{Message: msg, Type: "fail", Text: detail(sr, r)}
					s.Failures++
				case c.Verdict == harness.Unknown:
					tc.Error = &junitProblem{Message: "unknown: " + c.Reason, Type: "unknown", Text: detail(sr, r)}
					s.Errors++
				}
				s.Cases = append(s.Cases, tc)
			}
			if r.Error != "" {
				s.Cases = append(s.Cases, junitCase{Name: r.Target + ": run", Classname: "snowchaos." + sr.Name, File: sr.File, Time: "0",
					Error: &junitProblem{Message: firstLine(r.Error), Type: "error", Text: r.Error}})
				s.Errors++
			}
			if len(r.Unknown) > 0 {
				s.Cases = append(s.Cases, junitCase{Name: r.Target + ": evidence", Classname: "snowchaos." + sr.Name, File: sr.File, Time: "0",
					Error: &junitProblem{Message: "unknown: " + r.Unknown[0], Type: "unknown", Text: detail(sr, r)}})
				s.Errors++
			}
		}
		s.Tests = len(s.Cases)
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// detail describes a run for a failure's body: why it is unknown, its
// faults, protocol violations, node incarnations and duplicates.
func detail(sr *harness.ScenarioResult, r *harness.Result) string {
	var b strings.Builder
	for _, why := range r.Unknown {
		fmt.Fprintf(&b, "unknown: %s\n", why)
	}
	for _, v := range r.Protocol {
		fmt.Fprintf(&b, "protocol violation: %s#%d (pid %d): %s\n", v.Node, v.Incarnation, v.PID, v.Detail)
	}
	for _, line := range incarnationLines(r) {
		fmt.Fprintf(&b, "node %s\n", line)
	}
	for _, f := range r.Faults {
		state := "confirmed"
		if !f.Confirmed {
			state = "NOT confirmed"
		}
		fmt.Fprintf(&b, "fault %s (%s at %s): %s: %s\n", f.Name, f.Kind, f.At, state, strings.Join(f.Detail, "; "))
	}
	for _, d := range r.Duplicates {
		fmt.Fprintf(&b, "duplicate %s: first %s at %s, again %s at %s %v\n", d.ID, d.First, d.FirstAt, d.Second, d.SecondAt, d.Windows)
	}
	return b.String()
}
