package harness_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
)

// TestHistoryGzip: a compressed history is one gzip stream of one member
// per run that decompresses to exactly the plain history of the same run.
func TestHistoryGzip(t *testing.T) {
	suite := load(t, "testdata/small-step.yaml")
	targets := []string{"wait", "refuse"}
	var plain, gz bytes.Buffer
	run(t, suite, harness.Options{History: &plain, Targets: targets})
	run(t, suite, harness.Options{History: &gz, HistoryGzip: true, Targets: targets})
	if plain.Len() == 0 || gz.Len()*4 > plain.Len() {
		t.Fatalf("gzip history %d bytes for %d plain: not compressed", gz.Len(), plain.Len())
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole, plain.Bytes()) {
		t.Fatalf("decompressed history (%d bytes) differs from the plain one (%d bytes)", len(whole), plain.Len())
	}
	// One member per run: the first member holds only the first run.
	zr, _ = gzip.NewReader(bytes.NewReader(gz.Bytes()))
	zr.Multistream(false)
	first, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || len(first) == len(whole) || bytes.Contains(first, []byte(`"target":"refuse"`)) {
		t.Fatalf("the first gzip member holds %d of %d bytes, want the first run only", len(first), len(whole))
	}
}

// TestHistorySchemaDocumented: docs/history.md lists exactly the keys the
// history writes, in the order written.
func TestHistorySchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/history.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1]))
	}
	// The refuse target answers errors during the step: lines with "error".
	var b bytes.Buffer
	run(t, load(t, "testdata/small-step.yaml"), harness.Options{History: &b, Targets: []string{"refuse"}})
	var written []string
	sc := bufio.NewScanner(&b)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.Token() // {
		var keys []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k.(string))
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		if len(keys) > len(written) {
			written = keys
		}
	}
	if !slices.Equal(written, documented) {
		t.Fatalf("the history writes the keys %s; docs/history.md documents %s", strings.Join(written, ","), strings.Join(documented, ","))
	}
}
