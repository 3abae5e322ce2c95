package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// fuzzStart is the virtual base clock's start in FuzzAdminFaults.
var fuzzStart = time.Date(2026, 6, 30, 23, 59, 0, 0, time.UTC)

// FuzzAdminFaults posts two arbitrary bodies to POST /admin/v1/faults of a
// real server over a real generator on a fault clock (on a virtual base,
// so every input replays the same), then reads the faults, issues IDs,
// checks readiness, reverts and issues again. It fails on a panic, on a
// request that does not finish within its deadline (a hang, a lock left
// held), on any 5xx but a refusal's 503 from the ID API, on a body that
// is not the JSON the status promises, and on an accepted fault that is
// not listed in the answer (every fault but a release, or a jitter of 0,
// which remove, must show while it is in force).
func FuzzAdminFaults(f *testing.F) {
	for _, k := range FaultKinds() {
		min, max := map[string]any{"kind": k.Kind}, map[string]any{"kind": k.Kind}
		for _, p := range k.Params {
			switch p.Type {
			case faults.ParamDuration:
				min[p.Name], max[p.Name] = p.Min.String(), int64(p.Max)
			case faults.ParamPPM:
				min[p.Name], max[p.Name] = p.MinPPM, p.MaxPPM
			case faults.ParamTime:
				min[p.Name], max[p.Name] = fuzzStart.Add(-p.Max).Format(time.RFC3339Nano), fuzzStart.Add(p.Max).Format(time.RFC3339)
			case faults.ParamSeed:
				min[p.Name], max[p.Name] = 0, uint64(1<<64-1)
			}
		}
		if len(k.OneOf) > 0 {
			delete(min, k.OneOf[1])
			delete(max, k.OneOf[0])
		}
		a, _ := json.Marshal(min)
		b, _ := json.Marshal(max)
		f.Add(a, b)
	}
	f.Add([]byte(`{"kind":"jitter","max":9223372036854775807}`), []byte(`{"kind":"step","by":"-1s"}`))
	f.Add([]byte(`{"kind":"leap","in":"2562047h"}`), []byte(`{"kind":"leap","at":"2300-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"kind":"pause"}`), []byte(`{"kind":"freeze","for":0}`))
	f.Add([]byte(`{"kind":"step","by":"8784h"}`), []byte(`{"kind":"smear","by":"8784h","window":1}`))
	f.Add([]byte(`{"kind":"drift","ppm":-1e6}`), []byte(`{"kind":"slew","by":"-8784h","ppm":1e-300}`))
	f.Add([]byte(`{"kind":"step","by":1e3}`), []byte(`{"kind":"step","by":"1s"} x`))
	f.Add([]byte(`[`), []byte("\x00"))
	f.Add([]byte(`{"kind":"step","by":"-1s","by":"-2s"}`), []byte(`{"kind":"drift","ppm":1e-300}`))
	f.Add([]byte(`{"kind":"slew","by":"1s","ppm":0.0005}`), []byte(`{"kind":"freeze","for":1,"for":2}`))
	f.Add([]byte(`{"kind":"leap","in":0}`), []byte(`{"kind":"jitter","max":1,"seed":0}`))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		nd := buildNode(t, generator.Settings{Node: 1, Clock: faults.NewVirtual(fuzzStart, true), MaxWait: 20 * time.Millisecond}, true)
		srv, err := New(Config{Node: nd, AdminToken: testToken, RequestTimeout: 50 * time.Millisecond,
			Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		h := srv.Handler()
		do := func(method, path string, body []byte, ok ...int) {
			t.Helper()
			req := httptest.NewRequest(method, path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(rec, req)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %s %q: no answer within 10s (after %q, %q)", method, path, body, first, second)
			}
			code := rec.Code
			if code/100 != 2 {
				var eb ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Detail == "" {
					t.Fatalf("%s %s: %d with body %q, not a JSON error", method, path, code, rec.Body)
				}
			}
			if method == "POST" && code == 200 {
				f, err := ParseFault(body)
				var st FaultState
				if err != nil || json.Unmarshal(rec.Body.Bytes(), &st) != nil {
					t.Fatalf("%q accepted (%v), answered %s", body, err, rec.Body)
				}
				removes := f.Kind == faults.KindRelease || (f.Kind == faults.KindJitter && f.Max == 0)
				if !removes && !slices.ContainsFunc(st.Active, func(a ActiveFault) bool { return a.Kind == f.Kind }) {
					t.Fatalf("%q accepted but not listed: %s", body, rec.Body)
				}
			}
			if !slices.Contains(ok, code) {
				t.Fatalf("%s %s %q: status %d (want one of %v) after %q, %q: %s", method, path, body, code, ok, first, second, rec.Body)
			}
		}
		posted := []int{200, 400, 409, 413}
		do("POST", "/admin/v1/faults", first, posted...)
		do("POST", "/admin/v1/faults", second, posted...)
		do("GET", "/admin/v1/faults", nil, 200)
		do("GET", "/v1/id", nil, 200, 503)
		do("GET", "/v1/ids?count=4096", nil, 200, 503)
		do("GET", "/readyz", nil, 200, 503)
		do("GET", "/v1/info", nil, 200)
		do("DELETE", "/admin/v1/faults", nil, 200)
		do("GET", "/v1/id", nil, 200, 503)
	})
}
