package server

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

// TestAdminTokenTrimmed checks that a configured token is compared as the
// header's is, without surrounding whitespace (a secret's newline), and
// that a token of whitespace only is a configuration error.
func TestAdminTokenTrimmed(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) { c.AdminToken = "abc123\n" })
	for _, hdr := range []string{"Bearer abc123", "Bearer  abc123 ", "bearer abc123"} {
		if code, _, body := n.do(t, "GET", "/admin/v1/faults", map[string]string{"Authorization": hdr}, ""); code != 200 {
			t.Errorf("%q: %d %s", hdr, code, body)
		}
	}
	code, h, body := n.do(t, "GET", "/admin/v1/faults", map[string]string{"Authorization": "Bearer abc123\\n"}, "")
	wantError(t, code, h, body, 403, errForbidden)

	nd := buildNode(t, generator.Settings{}, true)
	for _, tok := range []string{" ", "\n", " \t\r\n "} {
		if _, err := New(Config{Node: nd, AdminToken: tok, Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, ErrConfig) {
			t.Errorf("AdminToken %q: %v, want ErrConfig", tok, err)
		}
	}
	if got, err := CleanToken(" x y\n"); got != "x y" || err != nil {
		t.Errorf("CleanToken: %q, %v", got, err)
	}
}

// TestAdminDisabledSaysHow checks that /admin/... on a node without an
// admin token says that the admin API is disabled and how to enable it.
func TestAdminDisabledSaysHow(t *testing.T) {
	n := newNode(t, func(_ *generator.Settings, c *Config) { c.AdminToken = "" })
	for _, p := range []string{"/admin/v1/faults", "/admin/", "/admin", "/admin/v2/x"} {
		code, hdr, body := n.do(t, "POST", p, map[string]string{"Authorization": "Bearer x"}, "")
		wantError(t, code, hdr, body, 404, errAdminDisabled, "SNOWCHAOS_ADMIN_TOKEN", "--admin-token-file")
	}
}
