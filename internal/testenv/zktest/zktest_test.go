package zktest

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// TestServerLifecycle: the server serves after Start, answers nothing while
// paused or killed, and serves again after Resume and Restart on the same
// address.
func TestServerLifecycle(t *testing.T) {
	s := Start(t, Options{})
	if out, err := FourLetter(s.Addr, "ruok", 5*time.Second); err != nil || out != "imok" {
		t.Fatalf("ruok: %q, %v", out, err)
	}
	if s.PID() == 0 {
		t.Fatal("no PID for a running server")
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if s.Serving(500 * time.Millisecond) {
		t.Fatal("a paused server answered srvr")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if !s.Serving(10 * time.Second) {
		t.Fatalf("not serving after Resume; log:\n%s", s.Log())
	}
	s.Kill()
	if s.PID() != 0 || s.Serving(500*time.Millisecond) {
		t.Fatal("a killed server still runs or answers")
	}
	if err := s.Pause(); err == nil {
		t.Error("Pause of a killed server succeeded")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	out, err := FourLetter(s.Addr, "srvr", 5*time.Second)
	if err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("srvr after Restart: %q, %v", out, err)
	}
}

func TestFindHonoursEnv(t *testing.T) {
	testenv.LookPath(t, "java")
	t.Setenv(EnvJar, t.TempDir()+"/missing.jar")
	if _, _, err := Find(); err == nil || !strings.Contains(err.Error(), EnvJar) {
		t.Fatalf("Find with a missing jar: %v", err)
	}
}
