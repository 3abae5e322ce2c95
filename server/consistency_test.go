package server

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

// TestIDAPIRejectsUnknownParameters checks that every ID API route
// rejects query parameters it does not take, as /v1/ids always did.
func TestIDAPIRejectsUnknownParameters(t *testing.T) {
	n := newNode(t, nil)
	id, err := n.nd.Generator().Next()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, has string }{
		{"/v1/id?x=1", `"x"`},
		{"/v1/id?count=2", `"count"`},
		{"/v1/id?%zz", `"%zz"`},
		{"/v1/decode/" + id.String() + "?verbose=1", `"verbose"`},
		{"/v1/ids?count=2&x=1", `"x"`},
	} {
		code, hdr, body := n.do(t, "GET", tc.path, nil, "")
		wantError(t, code, hdr, body, 400, errBadRequest, tc.has)
	}
	for _, p := range []string{"/v1/id", "/v1/id?", "/v1/id?&", "/v1/decode/" + id.String()} {
		if code, _, body := n.do(t, "GET", p, nil, ""); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestCountLeadingZeros checks that count follows the ID rule: no leading
// zero.
func TestCountLeadingZeros(t *testing.T) {
	n := newNode(t, nil)
	for _, q := range []string{"count=00005", "count=05", "count=00"} {
		code, hdr, body := n.do(t, "GET", "/v1/ids?"+q, nil, "")
		wantError(t, code, hdr, body, 400, errInvalidCount, "leading zero")
	}
}

// snake matches a snake_case JSON key.
var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkKeys reports every object key in v that is not snake_case.
func checkKeys(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !snake.MatchString(k) {
				t.Errorf("key %s.%s is not snake_case", path, k)
			}
			checkKeys(t, path+"."+k, e)
		}
	case []any:
		for _, e := range v {
			checkKeys(t, path+"[]", e)
		}
	}
}

// TestJSONKeysSnakeCase checks every JSON body the node serves for keys
// that are not snake_case (/v1/info's stats were Go field names).
func TestJSONKeysSnakeCase(t *testing.T) {
	n := newNode(t, nil)
	n.do(t, "GET", "/v1/id", nil, "")
	n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"step","by":"1ms"}`)
	id, _ := n.nd.Generator().Next()
	for _, p := range []string{"/v1/info", "/v1/decode/" + id.String(), "/admin/v1/faults", "/healthz", "/readyz", "/nope", "/v1/id?x=1"} {
		_, _, body := n.do(t, "GET", p, adminAuth, "")
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v: %s", p, err, body)
		}
		checkKeys(t, p, v)
	}
	_, _, body := n.do(t, "GET", "/v1/info", nil, "")
	var info struct {
		Stats map[string]any `json:"stats"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Stats["issued"] != 2.0 {
		t.Fatalf("stats.issued in %s (%v), want 2", body, err)
	}
}

// TestCheckpointErrorNamedOnce checks that a failed checkpoint write is
// reported with one "checkpoint failed" prefix, on /v1/id and /readyz.
func TestCheckpointErrorNamedOnce(t *testing.T) {
	cp := filepath.Join(t.TempDir(), "missing-dir", "mark")
	n := newNode(t, func(s *generator.Settings, _ *Config) { s.Checkpoint = generator.NewFileCheckpoint(cp) })
	for _, p := range []string{"/v1/id", "/readyz"} {
		code, _, body := n.do(t, "GET", p, nil, "")
		if code != 503 {
			t.Fatalf("%s with an unwritable checkpoint: %d %s", p, code, body)
		}
		var eb ErrorBody
		if err := json.Unmarshal([]byte(body), &eb); err != nil {
			t.Fatal(err)
		}
		if c := strings.Count(eb.Detail, "checkpoint failed"); c != 1 || !strings.Contains(eb.Detail, cp) {
			t.Errorf("%s: detail %q names the checkpoint failure %d times, want once with the path", p, eb.Detail, c)
		}
	}
}
