// Command samples keeps the sample outputs in the project's markdown files
// true: a region between
//
//	<!-- sample: snowchaos run scenarios/step-back-large.yaml -->
//	<!-- /sample -->
//
// holds, in a fenced block, exactly what that command prints on stdout,
// run from the repository root with a snowchaos binary built from the
// tree. `<!-- sample (exit 1): ... -->` expects that exit code instead of
// 0. Each command runs twice and must print the same both times: a sample
// is a simulated run with a fixed seed, or another deterministic command,
// never a measurement.
//
//	go run ./internal/samples          rewrite every stale sample (make samples)
//	go run ./internal/samples -check   list the stale ones and exit 1
//
// Without file arguments it reads every *.md file under the repository
// root that has a sample marker.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	check := flag.Bool("check", false, "report stale samples and exit 1 instead of rewriting them")
	flag.Parse()
	if err := run(*check, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "samples: %v\n", err)
		if errors.Is(err, errStale) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

// errStale: a committed sample differs from a fresh run (-check).
var errStale = errors.New("stale samples (run make samples and review the diff)")

// commandTimeout bounds each run of a sample's command.
const commandTimeout = 2 * time.Minute

func run(check bool, files []string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		if files, err = markedFiles(root); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "snowchaos-samples-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "snowchaos")
	build := exec.Command("go", "build", "-o", bin, "./cmd/snowchaos")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building snowchaos: %w", err)
	}
	runner := binaryRunner(bin, root)
	var stale []string
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, changed, err := refresh(f, md, runner)
		if err != nil {
			return err
		}
		name := f
		if rel, err := filepath.Rel(root, f); err == nil && !strings.HasPrefix(rel, "..") {
			name = rel
		}
		for _, c := range changed {
			stale = append(stale, fmt.Sprintf("%s:%d: %s", name, c.line, c.cmd))
		}
		if len(changed) > 0 && !check {
			if err := os.WriteFile(f, out, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "samples: rewrote %d in %s\n", len(changed), name)
		}
	}
	if check && len(stale) > 0 {
		return fmt.Errorf("%w:\n  %s", errStale, strings.Join(stale, "\n  "))
	}
	return nil
}

// moduleRoot is the directory of the enclosing go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the snowchaos module")
	}
	return filepath.Dir(mod), nil
}

// markedFiles lists the *.md files under root holding a sample marker.
func markedFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin" || d.Name() == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if openMarker.Match(b) {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}

var (
	// openMarker matches an opening marker: the command, optionally an exit code.
	openMarker  = regexp.MustCompile(`(?m)^<!-- sample(?: \(exit (\d+)\))?: (.+?) -->[ \t]*$`)
	closeMarker = "<!-- /sample -->"
)

// region is one sample: the command and where its body lies in the file.
type region struct {
	cmd        string
	exit       int
	line       int // the marker's line, from 1
	start, end int // byte offsets of the body (after the marker's line, before the closing marker)
}

// parse finds the sample regions of md; errors name the file and line.
func parse(name string, md []byte) ([]region, error) {
	var rs []region
	for _, m := range openMarker.FindAllSubmatchIndex(md, -1) {
		r := region{cmd: string(md[m[4]:m[5]]), line: 1 + bytes.Count(md[:m[0]], []byte("\n"))}
		if m[2] >= 0 {
			r.exit, _ = strconv.Atoi(string(md[m[2]:m[3]]))
		}
		if len(rs) > 0 && rs[len(rs)-1].end > m[0] {
			return nil, fmt.Errorf("%s:%d: a sample marker inside the sample that starts at line %d", name, r.line, rs[len(rs)-1].line)
		}
		r.start = m[1] + 1 // past the newline
		if r.start > len(md) {
			return nil, fmt.Errorf("%s:%d: no %s after the sample marker", name, r.line, closeMarker)
		}
		i := bytes.Index(md[r.start:], []byte(closeMarker))
		if i < 0 {
			return nil, fmt.Errorf("%s:%d: no %s after the sample marker", name, r.line, closeMarker)
		}
		r.end = r.start + i
		if !strings.HasPrefix(r.cmd, "snowchaos ") {
			return nil, fmt.Errorf("%s:%d: sample command %q: want one starting with \"snowchaos \"", name, r.line, r.cmd)
		}
		if strings.ContainsAny(r.cmd, "'\"`$|&;<>") {
			return nil, fmt.Errorf("%s:%d: sample command %q: plain arguments only (no quotes, variables or shell operators)", name, r.line, r.cmd)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// body is what a region holds for the output of its command.
func body(out string) string {
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return "```text\n" + out + "```\n"
}

// runFunc runs a sample's arguments (after "snowchaos") and returns stdout
// and the exit code.
type runFunc func(args []string) (string, int, error)

// binaryRunner runs bin in dir.
func binaryRunner(bin, dir string) runFunc {
	return func(args []string) (string, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return stdout.String(), 0, nil
		case errors.As(err, &ee) && ctx.Err() == nil:
			return stdout.String(), ee.ExitCode(), nil
		}
		return "", 0, fmt.Errorf("%v\n%s", err, stderr.Bytes())
	}
}

// changed is a sample whose committed output differs from a fresh run.
type changed struct {
	line int
	cmd  string
}

// refresh runs every sample of md (twice each) and returns md with fresh
// outputs and the samples whose output changed.
func refresh(name string, md []byte, run runFunc) ([]byte, []changed, error) {
	rs, err := parse(name, md)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	var diff []changed
	last := 0
	for _, r := range rs {
		args := strings.Fields(r.cmd)[1:]
		var outs [2]string
		for i := range outs {
			o, code, err := run(args)
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %s: %w", name, r.line, r.cmd, err)
			}
			if code != r.exit {
				return nil, nil, fmt.Errorf("%s:%d: %s: exit %d, want %d (mark an expected exit code as <!-- sample (exit %d): ... -->)", name, r.line, r.cmd, code, r.exit, code)
			}
			outs[i] = o
		}
		if outs[0] != outs[1] {
			return nil, nil, fmt.Errorf("%s:%d: %s: two runs print different output: a sample must be deterministic (a simulated run with a fixed seed)", name, r.line, r.cmd)
		}
		fresh := body(outs[0])
		if string(md[r.start:r.end]) != fresh {
			diff = append(diff, changed{r.line, r.cmd})
		}
		out.Write(md[last:r.start])
		out.WriteString(fresh)
		last = r.end
	}
	out.Write(md[last:])
	return out.Bytes(), diff, nil
}
