package composetest

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
	Line int
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, backslash continuations joined.
func parseDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDockerfile checks the image recipe: multi-stage, a static (cgo off)
// build of the repository's own commands, a distroless or scratch final
// stage running as a non-root user, with the probe compose health checks.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	args := map[string]string{}
	var froms []instruction
	var final []instruction // instructions of the last stage
	for _, in := range ins {
		switch in.Cmd {
		case "ARG":
			if k, v, ok := strings.Cut(in.Args, "="); ok && len(froms) == 0 {
				args[k] = v
			}
		case "FROM":
			froms = append(froms, in)
			final = nil
			continue
		}
		final = append(final, in)
	}
	if len(froms) < 2 {
		t.Fatalf("%d stages; want a multi-stage build", len(froms))
	}
	expand := func(s string) string {
		for k, v := range args {
			s = strings.ReplaceAll(s, "${"+k+"}", v)
		}
		return s
	}

	// Build stage: Go at least the go.mod version, cgo off.
	build := strings.Fields(expand(froms[0].Args))
	m := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(build[0])
	if m == nil {
		t.Fatalf("build stage FROM %s: want a golang image", build[0])
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gm := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(goMod)
	if gm == nil {
		t.Fatal("go.mod has no go directive")
	}
	if atoi(m[1])*1000+atoi(m[2]) < atoi(string(gm[1]))*1000+atoi(string(gm[2])) {
		t.Errorf("build stage Go %s.%s is older than go.mod's go %s.%s", m[1], m[2], gm[1], gm[2])
	}
	text := ""
	for _, in := range ins {
		text += in.Cmd + " " + in.Args + "\n"
	}
	if !regexp.MustCompile(`CGO_ENABLED=0`).MatchString(text) {
		t.Error("the build does not set CGO_ENABLED=0")
	}
	for _, pkg := range []string{"./cmd/snowchaos", "./deploy/compose/probe"} {
		if !strings.Contains(text, "go build") || !strings.Contains(text, pkg) {
			t.Errorf("the build does not build %s", pkg)
		}
		if _, err := os.Stat(filepath.Join(root, pkg, "main.go")); err != nil {
			if ents, _ := filepath.Glob(filepath.Join(root, pkg, "*.go")); len(ents) == 0 {
				t.Errorf("%s: no Go files", pkg)
			}
		}
	}

	// Final stage: distroless static or scratch, non-root, the binaries
	// copied from the build stage, the probe the compose health checks use.
	base := strings.Fields(expand(froms[len(froms)-1].Args))[0]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch", base)
	}
	var user string
	var entry, health string
	copies := map[string]bool{}
	for _, in := range final {
		switch in.Cmd {
		case "USER":
			user = in.Args
		case "ENTRYPOINT":
			entry = in.Args
		case "HEALTHCHECK":
			health = in.Args
		case "COPY":
			f := strings.Fields(in.Args)
			copies[f[len(f)-1]] = slices.ContainsFunc(f, func(s string) bool { return strings.HasPrefix(s, "--from=") })
		case "RUN":
			t.Errorf("line %d: RUN in the final stage (it has no shell)", in.Line)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if user == "" || uid == "0" || uid == "root" || (uid != "nonroot" && atoi(uid) == 0) {
		t.Errorf("final stage USER %q: want a non-root user", user)
	}
	for _, bin := range []string{"/usr/local/bin/snowchaos", "/usr/local/bin/probe"} {
		if fromBuild, ok := copies[bin]; !ok || !fromBuild {
			t.Errorf("final stage does not copy %s from the build stage", bin)
		}
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || len(ep) == 0 || ep[0] != "/usr/local/bin/snowchaos" {
		t.Errorf("ENTRYPOINT %s: want the exec form running /usr/local/bin/snowchaos", entry)
	}
	if !strings.Contains(health, `["/usr/local/bin/probe"`) {
		t.Errorf("HEALTHCHECK %q: want the probe (no shell in the image)", health)
	}

	// COPY sources from the context exist.
	for _, in := range ins {
		if in.Cmd != "COPY" || strings.Contains(in.Args, "--from=") {
			continue
		}
		f := strings.Fields(in.Args)
		for _, src := range f[:len(f)-1] {
			if strings.HasPrefix(src, "--") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("line %d: COPY %s: %v", in.Line, src, err)
			}
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// dockerignore is a .dockerignore file: patterns in order, "!" negating.
type dockerignore []string

// excluded reports whether the context-relative path p (slash-separated)
// is left out of the build context: the last matching pattern wins, and a
// pattern matching a parent directory matches everything under it.
func (d dockerignore) excluded(p string) bool {
	ex := false
	for _, pat := range d {
		neg := strings.HasPrefix(pat, "!")
		pat = strings.TrimPrefix(strings.TrimPrefix(pat, "!"), "/")
		for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
			if globMatch(pat, q) {
				ex = !neg
				break
			}
		}
	}
	return ex
}

// globMatch is path.Match with "**" matching any number of directories.
func globMatch(pat, p string) bool {
	if !strings.Contains(pat, "**") {
		ok, _ := path.Match(pat, p)
		return ok
	}
	re := regexp.QuoteMeta(pat)
	re = strings.ReplaceAll(re, `\*\*/`, `(.*/)?`)
	re = strings.ReplaceAll(re, `\*\*`, `.*`)
	re = strings.ReplaceAll(re, `\*`, `[^/]*`)
	re = strings.ReplaceAll(re, `\?`, `[^/]`)
	return regexp.MustCompile("^" + re + "$").MatchString(p)
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			d = append(d, path.Clean(l))
		}
	}
	return d
}

// TestDockerignoreKeepsTheBuild: every file the image's go build reads
// (the Go and embedded files of every package it compiles, go.mod and
// go.sum) is in the build context, and the repository's bulk is not.
func TestDockerignoreKeepsTheBuild(t *testing.T) {
	d := readDockerignore(t)
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`,
		"./cmd/snowchaos", "./deploy/compose/probe")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	repo := mustAbs(t, root)
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		rel, err := filepath.Rel(repo, f[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module dependency, downloaded in the image
		}
		for _, name := range f[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %d files: %v", len(needed), needed)
	}
	for _, p := range needed {
		if d.excluded(p) {
			t.Errorf(".dockerignore leaves out %s, which the image build needs", p)
		}
	}
	for _, p := range []string{".git/HEAD", "bin/snowchaos", "out/admin-token", "dashboards/json/snowchaos-generator.json"} {
		if !d.excluded(p) {
			t.Errorf(".dockerignore sends %s into the build context", p)
		}
	}
}

// TestGlobMatch covers the .dockerignore matcher.
func TestGlobMatch(t *testing.T) {
	d := dockerignore{"bin", "**/*.test", "docs/*.md", "!docs/keep.md"}
	for p, want := range map[string]bool{
		"bin/x": true, "bin": true, "binx": false, "a/b/c.test": true, "c.test": true,
		"docs/a.md": true, "docs/keep.md": false, "docs/sub/a.md": false, "main.go": false,
	} {
		if got := d.excluded(p); got != want {
			t.Errorf("excluded(%q) = %v, want %v", p, got, want)
		}
	}
}

// binaries builds the image's two commands once, as the Dockerfile does
// (CGO_ENABLED=0, -trimpath), into a temporary directory.
var binaries = struct {
	once sync.Once
	dir  string
	err  error
}{}

func buildBinaries(t *testing.T) (snowchaos, probe string) {
	t.Helper()
	binaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "composetest-bin-")
		if err != nil {
			binaries.err = err
			return
		}
		binaries.dir = dir
		for name, pkg := range map[string]string{"snowchaos": "./cmd/snowchaos", "probe": "./deploy/compose/probe"} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, name), pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
			if out, err := cmd.CombinedOutput(); err != nil {
				binaries.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binaries.err != nil {
		t.Fatal(binaries.err)
	}
	return filepath.Join(binaries.dir, "snowchaos"), filepath.Join(binaries.dir, "probe")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
	os.Exit(code)
}

// TestBinariesAreStatic builds the image's binaries as the Dockerfile does
// and checks that they need no dynamic loader or shared library, so they
// run on distroless/static.
func TestBinariesAreStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	sc, pr := buildBinaries(t)
	for _, bin := range []string{sc, pr} {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: has a %v program header: dynamically linked", filepath.Base(bin), p.Type)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s: needs shared libraries %v", filepath.Base(bin), libs)
		}
		f.Close()
	}
}

// TestDockerfileCheckStage: the check stage (docker build --target check)
// is snowchaos check on a mounted command: a Debian base with libfaketime
// (and perl, the clock probe's interpreter) installed, the binary from the
// build stage, the working directory /work, and an entry point that runs
// check, so that docker run ... -- CMD checks CMD.
func TestDockerfileCheckStage(t *testing.T) {
	ins := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	var stage []instruction
	in := false
	for _, x := range ins {
		if x.Cmd == "FROM" {
			in = strings.HasSuffix(strings.TrimSpace(x.Args), " AS check")
			continue
		}
		if in {
			stage = append(stage, x)
		}
	}
	if len(stage) == 0 {
		t.Fatal("no stage named check (FROM ... AS check)")
	}
	var run, entry, workdir string
	copied := false
	for _, x := range stage {
		switch x.Cmd {
		case "RUN":
			run += x.Args
		case "ENTRYPOINT":
			entry = x.Args
		case "WORKDIR":
			workdir = x.Args
		case "COPY":
			copied = copied || (strings.Contains(x.Args, "--from=build") && strings.HasSuffix(x.Args, "/usr/local/bin/snowchaos"))
		}
	}
	for _, pkg := range []string{"faketime", "libfaketime", "perl"} {
		if !regexp.MustCompile(`\b` + pkg + `\b`).MatchString(run) {
			t.Errorf("the check stage does not install %s", pkg)
		}
	}
	if !copied {
		t.Error("the check stage does not copy /usr/local/bin/snowchaos from the build stage")
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || len(ep) != 2 || ep[0] != "/usr/local/bin/snowchaos" || ep[1] != "check" {
		t.Errorf("check stage ENTRYPOINT %s: want [\"/usr/local/bin/snowchaos\", \"check\"]", entry)
	}
	if workdir != "/work" {
		t.Errorf("check stage WORKDIR %q: want /work, where the command is mounted", workdir)
	}
}
