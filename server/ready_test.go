package server

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// exhaust issues what is left of the current tick (and a little beyond,
// which the held clock refuses).
func (n *testNode) exhaust(t *testing.T) {
	t.Helper()
	code, _, body := n.do(t, "GET", "/v1/ids?count=4096", nil, "")
	if code != 200 && code != 503 {
		t.Fatalf("exhausting the tick: %d %s", code, body)
	}
}

// TestReadyAgreesWithIDUnderHolds holds the clock (a freeze with no end, a
// long pause) and checks that /readyz says not ready when /v1/id refuses,
// that /v1/id refuses within the generator's wait bound rather than the
// request timeout, and that a hold shorter than the wait bound keeps the
// node ready.
func TestReadyAgreesWithIDUnderHolds(t *testing.T) {
	const requestTimeout = 20 * time.Second
	n := newNode(t, func(s *generator.Settings, c *Config) {
		s.MaxWait = 200 * time.Millisecond
		c.RequestTimeout = requestTimeout
	})
	ready := func() (int, string) {
		code, _, body := n.do(t, "GET", "/readyz", nil, "")
		return code, body
	}
	post := func(body string) {
		t.Helper()
		if code, _, b := n.do(t, "POST", "/admin/v1/faults", adminAuth, body); code != 200 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
	}
	for _, tc := range []struct{ fault, says string }{
		{`{"kind":"freeze"}`, "frozen until release"},
		{`{"kind":"pause","for":"1h"}`, "paused for"},
	} {
		post(tc.fault)
		if code, body := ready(); code != 503 || !strings.Contains(body, tc.says) {
			t.Errorf("%s: /readyz %d %s, want 503 saying %q", tc.fault, code, body, tc.says)
		}
		n.exhaust(t)
		start := time.Now()
		code, hdr, body := n.do(t, "GET", "/v1/id", nil, "")
		took := time.Since(start)
		wantError(t, code, hdr, body, 503, errUnavailable)
		if took >= requestTimeout/2 {
			t.Errorf("%s: /v1/id took %v to refuse, want about the wait bound 200ms (request timeout %v)", tc.fault, took, requestTimeout)
		}
		post(`{"kind":"release"}`)
		if code, body := ready(); code != 200 {
			t.Errorf("after release: /readyz %d %s", code, body)
		}
		if code, _, body := n.do(t, "GET", "/v1/id", nil, ""); code != 200 {
			t.Errorf("after release: /v1/id %d %s", code, body)
		}
	}
	// A hold the generator can wait out keeps the node ready.
	post(`{"kind":"freeze","for":"150ms"}`)
	if code, body := ready(); code != 200 {
		t.Errorf("freeze shorter than the wait bound: /readyz %d %s", code, body)
	}
}
