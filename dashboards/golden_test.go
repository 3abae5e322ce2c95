package dashboards_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snowchaos/snowchaos/dashboards"
	"github.com/snowchaos/snowchaos/internal/testenv"
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
			t.Errorf("json/%s differs from the generator's output (%s):\n%s", f.Name, hint, testenv.FirstDiff(got, f.JSON, "committed", "generated"))
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
				t.Fatalf("%s: two builds differ:\n%s", a[i].Name, testenv.FirstDiff(a[i].JSON, b[i].JSON, "committed", "generated"))
			}
		}
	}
}
