package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestSummary replays recorded `go test -json` events (two Postgres
// skips, a chromium skip, a non-service skip, a passing test with a log
// line and a failing test) and compares the output with a golden file:
// package lines and the failing test's output pass through, the passing
// test's log does not, the skips are grouped by reason with the install
// command.
func TestSummary(t *testing.T) {
	in, err := os.ReadFile("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for name, missing := range map[string][]string{"missing": {"chromium", "fonts-dejavu-core"}, "installed": nil} {
		var out bytes.Buffer
		s := newSummary(&out, "github.com/snowchaos/snowchaos/")
		if err := s.read(bytes.NewReader(in)); err != nil {
			t.Fatal(err)
		}
		s.report(missing, "make deps")
		if !s.failed {
			t.Errorf("%s: a failed test did not make the summary fail", name)
		}
		golden := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s: output differs from %s (go test -update rewrites it):\n%s", name, golden, out.Bytes())
		}
	}
}

// TestNoSkipsNoSummary: a clean run prints the package lines only.
func TestNoSkipsNoSummary(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
`
	var out bytes.Buffer
	s := newSummary(&out, "")
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	s.report([]string{"chromium"}, "make deps")
	if out.String() != "ok  \tp\t0.01s\n" || s.failed {
		t.Fatalf("output %q, failed %v", out.String(), s.failed)
	}
}
