// Package doclinks holds one test: every relative link in the project's
// Markdown (README.md and docs/*.md) names a file that exists, and every
// #anchor names a heading of its target.
package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("(?ms)^```.*?^```")
)

// root is the repository root, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// anchor is GitHub's slug of a heading: lower case, spaces to dashes,
// punctuation other than - and _ dropped.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the slugs of a Markdown file's headings (outside code
// fences), with GitHub's -1, -2 suffixes for repeats.
func anchors(text string) map[string]bool {
	text = fenceRE.ReplaceAllString(text, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		h := regexp.MustCompile("[`*]|\\[([^]]*)\\]\\([^)]*\\)").ReplaceAllString(m[1], "$1")
		a := anchor(h)
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	files, err := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(r, "README.md"))
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		rel, _ := filepath.Rel(r, f)
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %s does not exist", rel, link, path)
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, link, err)
				continue
			}
			if !anchors(string(tb))[frag] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", rel, link, frag, path)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links checked: the pattern no longer finds them", checked)
	}
}

func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Kill matrix":                 "kill-matrix",
		"The `serve` command":         "the-serve-command",
		"Leases: Postgres, etcd & ZK": "leases-postgres-etcd--zk",
		"What a run proves (and not)": "what-a-run-proves-and-not",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
