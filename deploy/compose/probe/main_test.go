package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{srv.URL + "/ok"}, 0, ""},
		{[]string{srv.URL + "/ok", srv.URL + "/no"}, 1, "HTTP 503: not ready"},
		{nil, 2, "usage"},
		{[]string{"http://127.0.0.1:1/"}, 1, "probe:"},
		{[]string{"::bad"}, 1, "probe:"},
	} {
		var stderr bytes.Buffer
		if got := run(c.args, &stderr); got != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("run(%q) = %d, %q; want %d, containing %q", c.args, got, stderr.String(), c.code, c.msg)
		}
	}
}
