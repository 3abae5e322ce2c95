package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explore finds a known-bad reference's bug, shrinks it, writes the YAML
// and HTML, and the shrunk YAML reproduces under run (exit 1).
func TestExploreFindsAndReproduces(t *testing.T) {
	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, []byte("kinds: [step, freeze, leap, smear, pause]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runExplore(context.Background(), []string{"--seed", "1", "--schedules", "30", "--first", "--target", "bad-no-rewind-check",
		"--space", space, "--out", dir}, &out, &errb)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "== find 1: schedule") || !strings.Contains(out.String(), "--- shrunk") {
		t.Fatalf("report without a find side by side:\n%s", out.String())
	}
	shrunk, _ := filepath.Glob(filepath.Join(dir, "find-1-*-shrunk.yaml"))
	html, _ := filepath.Glob(filepath.Join(dir, "find-1-*-shrunk.html"))
	if len(shrunk) != 1 || len(html) != 1 {
		t.Fatalf("files: %v %v", shrunk, html)
	}
	var rout, rerr bytes.Buffer
	if code := runRun(context.Background(), []string{shrunk[0]}, &rout, &rerr); code != exitFailure {
		t.Fatalf("snowchaos run on the shrunk YAML: exit %d, want 1\n%s", code, rout.String())
	}
}

func TestExploreJSONAndErrors(t *testing.T) {
	var out, errb bytes.Buffer
	code := runExplore(context.Background(), []string{"--seed", "3", "--schedules", "5", "--target", "wait", "--json"}, &out, &errb)
	var rep struct {
		Schedules int `json:"schedules"`
		Failed    int `json:"failed"`
		ExitCode  int `json:"exit_code"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Schedules != 5 || rep.Failed != 0 || rep.ExitCode != code {
		t.Fatalf("exit %d, %+v, %v\n%s", code, rep, err, out.String())
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nodes: 2\nnodse: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seed", "1"}, "give --budget D or --schedules N"},
		{[]string{"--schedules", "5", "--space", bad}, `bad.yaml:2: nodse: unknown key; did you mean "nodes"?`},
		{[]string{"--schedules", "5", "--target", "nosuch"}, "nosuch"},
		{[]string{"--schedules", "5", "--parallel", "-1"}, "--parallel -1"},
	} {
		var o, e bytes.Buffer
		if code := runExplore(context.Background(), tc.args, &o, &e); code != exitInvalid || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, e.String(), tc.want)
		}
	}
}
