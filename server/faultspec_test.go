package server

import (
	"encoding/json"
	"github.com/snowchaos/snowchaos/faults"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

// adminAuth is the header set of an authorised JSON admin request.
var adminAuth = map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}

// TestAdminFaultBounds posts absurd parameters for every kind: each is a
// 400 naming the parameter and its bound, and the clock is untouched.
func TestAdminFaultBounds(t *testing.T) {
	n := newNode(t, nil)
	for _, tc := range []struct{ body, param, bound string }{
		{`{"kind":"jitter","max":9223372036854775807}`, `"max"`, "[0s, 1h0m0s]"},
		{`{"kind":"jitter","max":"-1ms"}`, `"max"`, "[0s, 1h0m0s]"},
		{`{"kind":"step","by":"2562047h"}`, `"by"`, "[-8784h0m0s, 8784h0m0s]"},
		{`{"kind":"step","by":-9223372036854775808}`, `"by"`, "[-8784h0m0s, 8784h0m0s]"},
		{`{"kind":"leap","in":"2562047h"}`, `"in"`, "[0s, 8784h0m0s]"},
		{`{"kind":"leap","in":"-1s"}`, `"in"`, "[0s, 8784h0m0s]"},
		{`{"kind":"leap","at":"2300-01-01T00:00:00Z"}`, `"at"`, "within 8784h0m0s"},
		{`{"kind":"leap","at":"1900-01-01T00:00:00Z"}`, `"at"`, "within 8784h0m0s"},
		{`{"kind":"freeze","for":"9000h"}`, `"for"`, "[0s, 8784h0m0s]"},
		{`{"kind":"freeze","for":"-1s"}`, `"for"`, "[0s, 8784h0m0s]"},
		{`{"kind":"pause","for":"9000h"}`, `"for"`, "[1ns, 8784h0m0s]"},
		{`{"kind":"pause","for":0}`, `"for"`, "[1ns, 8784h0m0s]"},
		{`{"kind":"smear","by":"1s","window":"9000h"}`, `"window"`, "[1ns, 8784h0m0s]"},
		{`{"kind":"smear","by":"9000h","window":"1s"}`, `"by"`, "[-8784h0m0s, 8784h0m0s]"},
		{`{"kind":"slew","by":"-9000h"}`, `"by"`, "[-8784h0m0s, 8784h0m0s]"},
		{`{"kind":"slew","by":"1s","ppm":2e6}`, `"ppm"`, "[0, 1e+06]"},
		{`{"kind":"drift","ppm":-2e6}`, `"ppm"`, "[-1e+06, 1e+06]"},
	} {
		code, hdr, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, tc.body)
		wantError(t, code, hdr, body, 400, errBadFault, tc.param, tc.bound)
	}
	if off := n.clock.Offset(); off != 0 || len(n.clock.Active()) != 0 {
		t.Fatalf("rejected faults changed the clock: offset %v, active %v", off, n.clock.Active())
	}
	if code, _, body := n.do(t, "GET", "/v1/id", nil, ""); code != 200 {
		t.Fatalf("/v1/id after rejected faults: %d %s", code, body)
	}
}

// TestAdminFaultConflicts checks the bounds that depend on the clock's
// state: the offset steps leave, and how many faults are listed.
func TestAdminFaultConflicts(t *testing.T) {
	n := newNode(t, nil)
	if code, _, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"step","by":"-8000h"}`); code != 200 {
		t.Fatal(code, body)
	}
	code, hdr, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"smear","by":"-800h","window":"1h"}`)
	wantError(t, code, hdr, body, 409, errConflict, "-8800h", "DELETE")
	if code, _, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"step","by":"8000h"}`); code != 200 {
		t.Fatal(code, body)
	}
	for i := len(n.clock.Active()); i < faults.MaxListed; i++ {
		if code, _, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"leap","in":"1000h"}`); code != 200 {
			t.Fatalf("leap %d: %d %s", i, code, body)
		}
	}
	code, hdr, body = n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"leap","in":"1h"}`)
	wantError(t, code, hdr, body, 409, errConflict, "faults are listed")
	if code, _, body := n.do(t, "DELETE", "/admin/v1/faults", adminAuth, ""); code != 200 {
		t.Fatal(code, body)
	}
	if code, _, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, `{"kind":"leap","in":"1h"}`); code != 200 {
		t.Fatal(code, body)
	}
}

// TestAdminForwardFaultWarns checks that a fault moving the wall ahead on a
// node with a checkpoint says that its mark outlives a revert.
func TestAdminForwardFaultWarns(t *testing.T) {
	cp := filepath.Join(t.TempDir(), "mark")
	n := newNode(t, func(s *generator.Settings, _ *Config) { s.Checkpoint = generator.NewFileCheckpoint(cp) })
	plain := newNode(t, nil)
	warnings := func(n *testNode, body string) []string {
		t.Helper()
		code, _, b := n.do(t, "POST", "/admin/v1/faults", adminAuth, body)
		var st FaultState
		if err := json.Unmarshal([]byte(b), &st); err != nil || code != 200 {
			t.Fatalf("%s: %d %s (%v)", body, code, b, err)
		}
		return st.Warnings
	}
	for _, body := range []string{`{"kind":"step","by":"1h"}`, `{"kind":"slew","by":"1s"}`, `{"kind":"smear","by":"1s","window":"1s"}`,
		`{"kind":"drift","ppm":5}`, `{"kind":"jitter","max":"3ms"}`} {
		w := warnings(n, body)
		if len(w) != 1 || !strings.Contains(w[0], "survives DELETE /admin/v1/faults and a restart") {
			t.Errorf("%s with a checkpoint: warnings %q", body, w)
		}
		if w := warnings(plain, body); len(w) != 0 {
			t.Errorf("%s without a checkpoint: warnings %q", body, w)
		}
	}
	for _, body := range []string{`{"kind":"step","by":"-1h"}`, `{"kind":"freeze"}`, `{"kind":"drift","ppm":-5}`, `{"kind":"jitter","max":0}`} {
		if w := warnings(n, body); len(w) != 0 {
			t.Errorf("%s: warnings %q for a fault that does not move the wall ahead", body, w)
		}
	}
	if w := warnings(n, `{"kind":"step","by":"1h"}`); !strings.Contains(w[0], "up to 1h0m0s ahead") {
		t.Errorf("warning %q does not say how far", w[0])
	}
}

// TestAdminDuplicateKeys: a key given twice, at any depth, is a 400 naming
// it, and the clock is untouched (a decoder that lets the last one win
// would apply -2s here).
func TestAdminDuplicateKeys(t *testing.T) {
	n := newNode(t, nil)
	for _, tc := range []struct{ body, key string }{
		{`{"kind":"step","by":"-1s","by":"-2s"}`, `"by"`},
		{`{"kind":"step","kind":"freeze","by":"-1s"}`, `"kind"`},
		{`{"kind":"step","by":{"a":1,"a":2}}`, `"by"."a"`},
		{`{"kind":"step","by":[{"x":1},{"y":{"z":1,"z":2}}]}`, `"by"[1]."y"."z"`},
	} {
		code, hdr, body := n.do(t, "POST", "/admin/v1/faults", adminAuth, tc.body)
		wantError(t, code, hdr, body, 400, errBadFault, tc.key, "repeated")
	}
	if off := n.clock.Offset(); off != 0 || len(n.clock.Active()) != 0 {
		t.Fatalf("a body with a repeated key changed the clock: offset %v, active %v", off, n.clock.Active())
	}
}

// TestAdminFaultListedOrRefused: every fault the admin API accepts is
// listed while it is active; a rate below the fault clock's resolution
// (which would do nothing) is refused, as 0 is.
func TestAdminFaultListedOrRefused(t *testing.T) {
	n := newNode(t, nil)
	for _, body := range []string{`{"kind":"drift","ppm":1e-300}`, `{"kind":"drift","ppm":-0.0004}`, `{"kind":"drift","ppm":0}`} {
		code, hdr, b := n.do(t, "POST", "/admin/v1/faults", adminAuth, body)
		wantError(t, code, hdr, b, 400, errBadFault, `"ppm"`)
	}
	if a := n.clock.Active(); len(a) != 0 {
		t.Fatalf("refused faults are listed: %v", a)
	}
	for _, body := range []string{`{"kind":"drift","ppm":0.001}`, `{"kind":"drift","ppm":-1e6}`, `{"kind":"slew","by":"1ms","ppm":0.001}`,
		`{"kind":"step","by":1}`, `{"kind":"smear","by":1,"window":1}`, `{"kind":"freeze"}`, `{"kind":"pause","for":"1h"}`,
		`{"kind":"leap","in":0}`, `{"kind":"jitter","max":1}`} {
		if code, _, b := n.do(t, "DELETE", "/admin/v1/faults", adminAuth, ""); code != 200 {
			t.Fatal(code, b)
		}
		code, _, b := n.do(t, "POST", "/admin/v1/faults", adminAuth, body)
		var st FaultState
		if err := json.Unmarshal([]byte(b), &st); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		if len(st.Active) == 0 {
			t.Errorf("%s: accepted (200) but not listed: %s", body, b)
		}
	}
}
