package goclock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

// TestFaultsReachAGoProgram: a Go program built with the overlay follows
// the page (steps, a freeze, a drift), and the same program without the
// page variable reads the real clock.
func TestFaultsReachAGoProgram(t *testing.T) {
	testenv.LookPath(t, "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := goclock.BuildProbe(ctx, bin); err != nil {
		t.Fatal(err)
	}
	if ok, v := goclock.IsGoBinary(bin); !ok || v == "" {
		t.Fatalf("IsGoBinary(%s) = %v, %q", bin, ok, v)
	}
	page, err := goclock.NewPage(filepath.Join(dir, "page"))
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	h := extclock.New(generator.SystemClock(), 0)
	defer h.Close()
	if err := h.Add(page); err != nil {
		t.Fatal(err)
	}
	p, err := extclock.StartProbe(generator.SystemClock(), []string{bin}, append(os.Environ(), goclock.EnvPage+"="+page.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	plain, err := extclock.StartProbe(generator.SystemClock(), []string{bin}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	check := func(what string) time.Duration {
		t.Helper()
		got, err := p.Agrees(ctx, h, time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	check("no fault")
	if err := h.Step(-time.Second); err != nil {
		t.Fatal(err)
	}
	if got := check("step -1s"); got > -999*time.Millisecond {
		t.Fatalf("step -1s: offset %v", got)
	}
	if got, _, err := plain.Offset(ctx); err != nil || got < -10*time.Millisecond {
		t.Fatalf("a program without the page variable reads offset %v (%v)", got, err)
	}
	if err := h.Freeze(0); err != nil {
		t.Fatal(err)
	}
	a := check("frozen")
	testenv.WaitFor(t, 5*time.Second, func() bool { return h.Clock.Offset() < a-20*time.Millisecond }, "20ms to pass")
	check("still frozen")
	if err := h.Revert(); err != nil {
		t.Fatal(err)
	}
	if err := h.Drift(-50000); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, func() bool { return h.Clock.Offset() < -5*time.Millisecond }, "drift to build up")
	check("drift -50000 ppm")
}

// TestNotAGoBinary: a shell script is not a Go binary.
func TestNotAGoBinary(t *testing.T) {
	if ok, _ := goclock.IsGoBinary("/bin/sh"); ok {
		t.Fatal("/bin/sh reported as a Go binary")
	}
}
