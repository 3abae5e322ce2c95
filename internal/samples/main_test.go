package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeRun answers each command from a table, counting calls.
func fakeRun(outputs map[string]string, exits map[string]int) (runFunc, *int) {
	calls := 0
	return func(args []string) (string, int, error) {
		calls++
		cmd := strings.Join(args, " ")
		out, ok := outputs[cmd]
		if !ok {
			return "", 0, fmt.Errorf("unexpected command %q", cmd)
		}
		return out, exits[cmd], nil
	}, &calls
}

const md = "# Title\n\n<!-- sample: snowchaos run a.yaml -->\n```text\nold matrix\n```\n<!-- /sample -->\n\ntext\n\n<!-- sample (exit 1): snowchaos run bad.yaml -->\n```text\nFAIL\n```\n<!-- /sample -->\n"

// TestRefresh: a stale sample is rewritten with the command's output, an
// up-to-date one is kept, every command runs twice.
func TestRefresh(t *testing.T) {
	run, calls := fakeRun(map[string]string{"run a.yaml": "new matrix\nline 2\n", "run bad.yaml": "FAIL\n"}, map[string]int{"run bad.yaml": 1})
	out, changed, err := refresh("README.md", []byte(md), run)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(md, "old matrix\n", "new matrix\nline 2\n", 1)
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	if len(changed) != 1 || changed[0].line != 3 || changed[0].cmd != "snowchaos run a.yaml" {
		t.Fatalf("changed %+v, want the sample at line 3 only", changed)
	}
	if *calls != 4 {
		t.Fatalf("%d runs, want 2 per sample", *calls)
	}
	// Refreshing the result changes nothing.
	if _, changed, err := refresh("README.md", out, run); err != nil || len(changed) != 0 {
		t.Fatalf("second refresh: %+v, %v", changed, err)
	}
}

// TestRefreshErrors: bad markers, a wrong exit code and a command whose
// output differs between two runs are errors naming file and line.
func TestRefreshErrors(t *testing.T) {
	ok, _ := fakeRun(map[string]string{"run a.yaml": "x\n"}, nil)
	n := 0
	flaky := runFunc(func([]string) (string, int, error) { n++; return fmt.Sprintf("ran in %dms\n", n), 0, nil })
	for _, tc := range []struct {
		md   string
		run  runFunc
		want string
	}{
		{"<!-- sample: snowchaos run a.yaml -->\n```text\n```\n", ok, "README.md:1: no <!-- /sample --> after the sample marker"},
		{"<!-- sample: ls -l -->\n<!-- /sample -->\n", ok, `README.md:1: sample command "ls -l": want one starting with "snowchaos "`},
		{"<!-- sample: snowchaos run $HOME -->\n<!-- /sample -->\n", ok, "plain arguments only"},
		{"\n<!-- sample (exit 1): snowchaos run a.yaml -->\n<!-- /sample -->\n", ok, "README.md:2: snowchaos run a.yaml: exit 0, want 1"},
		{"<!-- sample: snowchaos run b.yaml -->\n<!-- /sample -->\n", flaky, "two runs print different output: a sample must be deterministic"},
	} {
		_, _, err := refresh("README.md", []byte(tc.md), tc.run)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.md, err, tc.want)
		}
	}
}

// TestCommittedSamples: every sample committed in the repository's
// markdown is what its command prints now.
func TestCommittedSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds snowchaos and runs every sample twice")
	}
	if err := run(true, nil); err != nil {
		if errors.Is(err, errStale) {
			t.Fatal(err)
		}
		t.Fatalf("checking the samples: %v", err)
	}
}
