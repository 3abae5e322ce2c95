package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
)

func runNTPCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"ntp"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestNTPCheckHealthyChronyd(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	code, out, errs := runNTPCmd(t, "check", "--server", c.Addr, "--sample-gap", "0")
	t.Log("\n" + out + errs)
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	for _, want := range []string{c.Addr, "127.127.1.1", "findings: none", "status: healthy (exit 0)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestNTPCheckSkewedClockExits1(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	ntpConfigHook = func(cfg *ntpcheck.Config) {
		cfg.LocalTime = func(string) time.Time { return time.Now().Add(400 * time.Millisecond) }
	}
	t.Cleanup(func() { ntpConfigHook = nil })
	code, out, errs := runNTPCmd(t, "check", "--server", c.Addr, "--sample-gap", "0",
		"--max-offset", "200ms", "--policy", "logical", "--max-lead", "250ms")
	t.Log("\n" + out + errs)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"offset-budget", "step-back", "beyond the 200ms budget", "Policy logical (max lead 250ms)", "ErrLeadExceeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestNTPCheckJSON(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	code, out, _ := runNTPCmd(t, "check", "--server", c.Addr, "--sample-gap", "0", "--samples", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var m struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
		Servers  []struct {
			Server  string         `json:"server"`
			Stratum int            `json:"stratum"`
			Queries map[string]int `json:"queries"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.Status != "healthy" || m.ExitCode != 0 || len(m.Servers) != 1 || m.Servers[0].Stratum != 8 || m.Servers[0].Queries["ok"] != 2 {
		t.Errorf("%+v", m)
	}
}

func TestNTPCheckNothingListeningExits2(t *testing.T) {
	addr := chronytest.ClosedAddr(t)
	code, out, _ := runNTPCmd(t, "check", "--server", addr, "--timeout", "20s")
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, out)
	}
	if !strings.Contains(out, "connection refused") || !strings.Contains(out, "no-usable-server") {
		t.Errorf("output should say the server refused:\n%s", out)
	}
}

func TestNTPCheckUnsynchronisedChronyd(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{NoLocal: true})
	healthy := chronytest.Start(t, chronytest.Options{})
	code, out, _ := runNTPCmd(t, "check", "--server", c.Addr, "--server", healthy.Addr, "--sample-gap", "0")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (an unsynchronised server is an error)\n%s", code, out)
	}
	if !strings.Contains(out, "unsynchronised") {
		t.Errorf("output:\n%s", out)
	}
}

func TestNTPCheckBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"status"},
		{"check", "--max-offset", "-1s"},
		{"check", "--timeout", "soon"},
		{"check", "--policy", "hope"},
		{"check", "--server", "bad!host"},
		{"check", "--server", "a:99999"},
		{"check", "--samples", "100"},
		{"check", "--metrics-addr", ":0"},
		{"check", "--count", "2"},
		{"check", "extra"},
	} {
		code, _, errs := runNTPCmd(t, args...)
		if code != 2 {
			t.Errorf("ntp %q: exit %d, want 2", args, code)
		}
		if errs == "" {
			t.Errorf("ntp %q: no message on stderr", args)
		}
	}
	if code, _, errs := runNTPCmd(t, "check", "-h"); code != 0 || !strings.Contains(errs, "--max-offset") && !strings.Contains(errs, "-max-offset") {
		t.Errorf("help: exit %d\n%s", code, errs)
	}
}

// syncBuf is a goroutine-safe writer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNTPWatchServesMetrics(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs syncBuf
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, []string{"ntp", "check", "--server", c.Addr, "--sample-gap", "0",
			"--watch", "50ms", "--metrics-addr", "127.0.0.1:0"}, &out, &errs)
	}()
	addrRE := regexp.MustCompile(`http://(\S+)/metrics`)
	deadline := time.Now().Add(30 * time.Second)
	var body string
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no offset metric within 30s\nstdout:\n%s\nstderr:\n%s\nlast scrape:\n%s", out.String(), errs.String(), body)
		}
		if m := addrRE.FindStringSubmatch(errs.String()); m != nil {
			if resp, err := http.Get("http://" + m[1] + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				if strings.Contains(body, `snowflake_ntp_offset_seconds{server="`+c.Addr+`"}`) {
					break
				}
			}
		}
		select {
		case code := <-done:
			t.Fatalf("watch exited early with %d\n%s\n%s", code, out.String(), errs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, want := range []string{
		`snowflake_ntp_queries_total{result="ok",server="` + c.Addr + `"}`,
		`snowflake_ntp_queries_total{result="kod",server="` + c.Addr + `"} 0`,
		`snowflake_ntp_sanity{server="` + c.Addr + `"} 1`,
		`snowflake_ntp_stratum{server="` + c.Addr + `"} 8`,
		`snowflake_ntp_last_success_timestamp_seconds{server="` + c.Addr + `"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s\n%s", want, body)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("watch exit %d, want 0 (last check healthy)", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop after cancel")
	}
	if !strings.Contains(out.String(), "healthy offset") {
		t.Errorf("watch output:\n%s", out.String())
	}
}

func TestNTPWatchCount(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{})
	code, out, _ := runNTPCmd(t, "check", "--server", srv, "--sample-gap", "0", "--watch", "1ms", "--count", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["status"] != "healthy" {
			t.Errorf("line %q: %v", l, err)
		}
	}
}

func FuzzParseFlagDuration(f *testing.F) {
	for _, s := range []string{"0", "250ms", "2s", "1m30s", "-1s", "", "soon", "25h", " 5s ", "1e3s", ".5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseFlagDuration(s)
		if err != nil {
			return
		}
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("parseFlagDuration(%q) = %v, out of range", s, d)
		}
		if again, err := parseFlagDuration(d.String()); err != nil || again != d {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, d, d.String(), again, err)
		}
	})
}

func TestNTPSuggestScenario(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{Offset: -250 * time.Millisecond})
	path := filepath.Join(t.TempDir(), "replay.yaml")
	code, out, errs := runNTPCmd(t, "check", "--server", srv, "--sample-gap", "0", "--policy", "refuse", "--suggest-scenario", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	s, err := scenario.Parse(path, y)
	if err != nil {
		t.Fatalf("harness parser rejects it: %v\n%s", err, y)
	}
	if len(s.Faults) != 1 || s.Faults[0].Kind != faults.KindStep || s.Faults[0].By > -200*time.Millisecond ||
		s.Nodes[0].Policy != generator.PolicyRefuse {
		t.Errorf("scenario does not replay a 250ms step back under refuse:\n%s", y)
	}

	closed := chronytest.ClosedAddr(t)
	code, _, errs = runNTPCmd(t, "check", "--server", closed, "--suggest-scenario", filepath.Join(t.TempDir(), "x.yaml"))
	if code != 2 || !strings.Contains(errs, "nothing measured") {
		t.Errorf("no usable server: exit %d, stderr %q", code, errs)
	}
}
