package dashboards_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/dashboards"
)

// TestCommittedJSONIsGenerated regenerates every dashboard in memory and
// fails when a committed file differs or is missing, or when json/ holds a
// file the generator no longer writes.
func TestCommittedJSONIsGenerated(t *testing.T) {
	files, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	const hint = "run `make dashboards` (go generate ./dashboards) and commit dashboards/json"
	var want []string
	for _, f := range files {
		want = append(want, f.Name)
		got, err := os.ReadFile(filepath.Join("json", f.Name))
		if err != nil {
			t.Errorf("%s: %v; %s", f.Name, err, hint)
			continue
		}
		if !bytes.Equal(got, f.JSON) {
			t.Errorf("json/%s differs from the generator's output (%s):\n%s", f.Name, hint, firstDiff(got, f.JSON))
		}
	}
	entries, err := os.ReadDir("json")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(want, e.Name()) {
			t.Errorf("json/%s is not written by the generator: delete it or add it to dashboards.All (%s)", e.Name(), hint)
		}
	}
}

// firstDiff shows the first differing line of two files.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + x + "\n  generated: " + y
		}
	}
	return "(identical lines; lengths differ)"
}

// TestRenderDeterministic builds twice and compares: map iteration order
// must never leak into the JSON.
func TestRenderDeterministic(t *testing.T) {
	for range 5 {
		a, err := dashboards.All()
		if err != nil {
			t.Fatal(err)
		}
		b, err := dashboards.All()
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if !bytes.Equal(a[i].JSON, b[i].JSON) {
				t.Fatalf("%s: two builds differ:\n%s", a[i].Name, firstDiff(a[i].JSON, b[i].JSON))
			}
		}
	}
}
