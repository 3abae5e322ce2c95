package ntpcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/snowchaos/snowchaos/generator"
)

// skewed returns a copy of r as if the host's clock had read exactly
// `ahead` later than the server's (positive: host ahead, so the offset is
// negative).
func skewed(r *ntp.Response, ahead time.Duration) *ntp.Response {
	c := *r
	c.ClockOffset = -ahead
	c.Timestamps.ClientXmit = c.Timestamps.ClientXmit.Add(ahead)
	c.Timestamps.ClientRecv = c.Timestamps.ClientRecv.Add(ahead)
	c.MinError = max(abs(c.ClockOffset)-c.RTT/2, 0)
	return &c
}

// result summarises one recorded response, sampled n times.
func result(t *testing.T, server string, r *ntp.Response, cfg Config) ServerResult {
	t.Helper()
	return Summarize(server, []Sample{{Response: r}}, cfg)
}

func unreachable(server string, cfg Config) ServerResult {
	err := &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError("recvmsg", syscall.ECONNREFUSED)}
	return Summarize(server, []Sample{{Err: err}}, cfg)
}

// TestInterpretation is the interpretation table: recorded responses, the
// generator's rewind settings, and the findings they must produce.
func TestInterpretation(t *testing.T) {
	local := loadResponse(t, "chrony-local-stratum8")
	unsync := loadResponse(t, "chrony-unsynchronised")
	kod := loadResponse(t, "fake-kod-rate")
	gps := loadResponse(t, "fake-stratum1-gps")
	leapIns := loadResponse(t, "fake-leap-insert-2016-12-31")
	leapDel := loadResponse(t, "fake-leap-delete-2016-12-31")

	type srv struct {
		name string
		resp *ntp.Response // nil: refused
	}
	cases := []struct {
		name    string
		cfg     Config
		servers []srv
		codes   []Code
		status  Status
		want    []string // substrings of the findings' messages
		golden  bool
	}{
		{name: "healthy", servers: []srv{{"a:123", local}}, status: StatusHealthy, golden: true},
		{name: "stratum1", servers: []srv{{"gps:123", gps}}, status: StatusHealthy},
		{name: "within-step-threshold", servers: []srv{{"a:123", skewed(local, 50*time.Millisecond)}}, status: StatusHealthy},
		{
			name:    "ahead-wait-suffices",
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepBack}, status: StatusUnhealthy,
			want:   []string{"step it back by 300ms", "Policy wait (max wait 1s): calls block for up to 300ms", "the bound suffices"},
			golden: true,
		},
		{
			name:    "ahead-wait-too-short",
			cfg:     Config{MaxWait: 100 * time.Millisecond},
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepBack}, status: StatusUnhealthy,
			want: []string{"does not suffice", "ErrWaitExceeded for about 200ms"},
		},
		{
			name:    "ahead-refuse",
			cfg:     Config{Policy: generator.PolicyRefuse},
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepBack}, status: StatusUnhealthy,
			want: []string{"Policy refuse", "not ready for about 300ms"},
		},
		{
			name:    "ahead-logical-within",
			cfg:     Config{Policy: generator.PolicyLogical, MaxLead: time.Second},
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepBack}, status: StatusUnhealthy,
			want: []string{"Policy logical (max lead 1s)", "up to 300ms ahead", "within the bound"},
		},
		{
			name:    "ahead-logical-beyond",
			cfg:     Config{Policy: generator.PolicyLogical, MaxLead: 100 * time.Millisecond},
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepBack}, status: StatusUnhealthy,
			want: []string{"beyond the bound", "ErrLeadExceeded for about 200ms", "up to 100ms ahead"},
		},
		{
			name:    "ahead-within-budget",
			cfg:     Config{MaxOffset: time.Second},
			servers: []srv{{"a:123", skewed(local, 300*time.Millisecond)}},
			codes:   []Code{CodeStepBack}, status: StatusHealthy,
		},
		{
			name:    "behind",
			servers: []srv{{"a:123", skewed(local, -300*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget, CodeStepForward}, status: StatusUnhealthy,
			want: []string{"300ms behind NTP time", "no rewind"},
		},
		{
			name:    "budget-below-step-threshold",
			cfg:     Config{MaxOffset: 50 * time.Millisecond},
			servers: []srv{{"a:123", skewed(local, 100*time.Millisecond)}},
			codes:   []Code{CodeOffsetBudget}, status: StatusUnhealthy,
		},
		{
			name:    "leap-insert",
			servers: []srv{{"a:123", leapIns}},
			codes:   []Code{CodeLeapInsert}, status: StatusHealthy,
			want: []string{"announced by a:123", "23:59:60 at the end of 2016-12-31 UTC", "tonight", "a 1s step back",
				"Policy wait (max wait 1s): calls block for up to 1s", "smear"},
			golden: true,
		},
		{
			name:    "leap-insert-refuse",
			cfg:     Config{Policy: generator.PolicyRefuse},
			servers: []srv{{"a:123", leapIns}},
			codes:   []Code{CodeLeapInsert}, status: StatusHealthy,
			want: []string{"not ready for about 1s"},
		},
		{
			name:    "leap-delete",
			servers: []srv{{"a:123", leapDel}},
			codes:   []Code{CodeLeapDelete}, status: StatusHealthy,
			want: []string{"23:59:59 is skipped", "no rewind"},
		},
		{
			name:    "kiss-of-death-alone",
			servers: []srv{{"a:123", kod}},
			codes:   []Code{CodeKissOfDeath, CodeNoUsableServer}, status: StatusUnusable,
			want: []string{`"RATE"`, "query less often"},
		},
		{
			name:    "kiss-of-death-and-good",
			servers: []srv{{"a:123", kod}, {"b:123", local}},
			codes:   []Code{CodeKissOfDeath}, status: StatusUnhealthy,
		},
		{
			name:    "unsynchronised",
			servers: []srv{{"a:123", unsync}},
			codes:   []Code{CodeUnsynchronised, CodeNoUsableServer}, status: StatusUnusable,
			want: []string{"leap indicator 3, stratum 0"},
		},
		{
			name:    "unreachable-and-good",
			servers: []srv{{"a:123", nil}, {"b:123", local}},
			codes:   []Code{CodeUnreachable}, status: StatusHealthy,
			want: []string{"connection refused"},
		},
		{
			name:    "nothing-reachable",
			servers: []srv{{"a:123", nil}},
			codes:   []Code{CodeNoUsableServer, CodeUnreachable}, status: StatusUnusable,
		},
		{
			name: "one-liar-of-three",
			servers: []srv{{"a:123", local}, {"b:123", skewed(local, 2*time.Millisecond)},
				{"liar:123", skewed(local, -500*time.Millisecond)}},
			codes: []Code{CodeDisagreement}, status: StatusHealthy,
			want:   []string{"liar:123 is furthest from the median"},
			golden: true,
		},
		{
			name:    "two-disagree",
			cfg:     Config{MaxOffset: time.Second},
			servers: []srv{{"a:123", local}, {"b:123", skewed(local, 400*time.Millisecond)}},
			codes:   []Code{CodeStepBack, CodeDisagreement}, status: StatusHealthy,
			want: []string{"neither can be outvoted"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var results []ServerResult
			for _, s := range tc.servers {
				if s.resp == nil {
					results = append(results, unreachable(s.name, tc.cfg))
				} else {
					results = append(results, result(t, s.name, s.resp, tc.cfg))
				}
			}
			r := Evaluate(tc.cfg, results)
			var got []Code
			for _, f := range r.Findings {
				got = append(got, f.Code)
			}
			if !slices.Equal(got, tc.codes) {
				t.Errorf("codes %v, want %v", got, tc.codes)
			}
			if r.Status != tc.status {
				t.Errorf("status %v, want %v", r.Status, tc.status)
			}
			var all strings.Builder
			for _, f := range r.Findings {
				all.WriteString(f.Message + "\n")
			}
			for _, w := range tc.want {
				if !strings.Contains(all.String(), w) {
					t.Errorf("findings lack %q:\n%s", w, all.String())
				}
			}
			if tc.golden {
				r.Time = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
				var b bytes.Buffer
				if err := WriteText(&b, r); err != nil {
					t.Fatal(err)
				}
				golden(t, tc.name+".txt", b.Bytes())
				j, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, tc.name+".json", append(j, '\n'))
			}
		})
	}
}

// golden compares got with testdata/golden/name; -update rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestSummarizeKeepsLowestRTT(t *testing.T) {
	base := loadResponse(t, "chrony-local-stratum8")
	slow, fast := *base, *base
	slow.RTT, slow.ClockOffset = 40*time.Millisecond, 15*time.Millisecond
	fast.RTT, fast.ClockOffset = 100*time.Microsecond, 3*time.Microsecond
	err := &net.OpError{Op: "read", Net: "udp", Err: timeoutErr{}}
	r := Summarize("a:123", []Sample{{Response: &slow}, {Err: err}, {Response: &fast}}, Config{})
	if r.Offset != fast.ClockOffset || r.RTT != fast.RTT {
		t.Errorf("kept offset %v rtt %v, want the fast sample", r.Offset, r.RTT)
	}
	if r.Queries[OutcomeOK] != 2 || r.Queries[OutcomeTimeout] != 1 {
		t.Errorf("queries %v", r.Queries)
	}
	if r.Jitter != slow.ClockOffset-fast.ClockOffset {
		t.Errorf("jitter %v", r.Jitter)
	}
	if !r.Usable || r.Outcome != OutcomeOK {
		t.Errorf("usable %v outcome %v", r.Usable, r.Outcome)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestSummarizeAllFailed(t *testing.T) {
	r := Summarize("a:123", []Sample{{Err: errors.New("lookup a: no such host")}}, Config{})
	if r.Answered || r.Usable || r.Outcome != OutcomeError || !strings.Contains(r.Error, "no such host") {
		t.Errorf("%+v", r)
	}
	if r := Summarize("a:123", nil, Config{}); r.Error == "" {
		t.Errorf("no samples: %+v", r)
	}
}

// TestSanityLeapAllowance follows node_exporter: 1 s more minimum error is
// tolerated within a day either side of the announced leap midnight, and
// the midnight is remembered after the flag drops.
func TestSanityLeapAllowance(t *testing.T) {
	leap := loadResponse(t, "fake-leap-insert-2016-12-31")
	cfg := Config{MaxMinError: 100 * time.Millisecond}
	off := *leap
	off.MinError = 600 * time.Millisecond
	if r := Summarize("a:123", []Sample{{Response: &off}}, cfg); !r.Sane {
		t.Errorf("with a leap announced, 600ms min error should pass: %v", r.Insane)
	}
	noLeap := off
	noLeap.Leap = ntp.LeapNoWarning
	if r := Summarize("a:123", []Sample{{Response: &noLeap}}, cfg); r.Sane {
		t.Error("without a leap, 600ms min error should fail")
	}
	// After midnight the flag drops; the remembered midnight keeps the
	// allowance for a day.
	rep := Evaluate(cfg, []ServerResult{Summarize("a:123", []Sample{{Response: leap}}, cfg)})
	want := time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)
	if !rep.LeapMidnight.Equal(want) {
		t.Fatalf("LeapMidnight %v, want %v", rep.LeapMidnight, want)
	}
	after := noLeap
	after.Time = want.Add(10 * time.Hour)
	carried := cfg
	carried.LeapMidnight = rep.LeapMidnight
	if r := Summarize("a:123", []Sample{{Response: &after}}, carried); !r.Sane {
		t.Errorf("10h after the leap, with the midnight carried: %v", r.Insane)
	}
	after.Time = want.Add(25 * time.Hour)
	if r := Summarize("a:123", []Sample{{Response: &after}}, carried); r.Sane {
		t.Error("25h after the leap the allowance must be gone")
	}
}

func TestSanityRootDistance(t *testing.T) {
	r := *loadResponse(t, "chrony-local-stratum8")
	r.RootDistance = 5 * time.Second
	s := Summarize("a:123", []Sample{{Response: &r}}, Config{})
	if s.Sane || !strings.Contains(strings.Join(s.Insane, ";"), "root distance 5s > 3.466s") {
		t.Errorf("sane %v insane %v", s.Sane, s.Insane)
	}
	rep := Evaluate(Config{}, []ServerResult{s})
	if len(rep.Findings) != 1 || rep.Findings[0].Code != CodeInsane {
		t.Errorf("findings %+v", rep.Findings)
	}
}

func TestLeapAt(t *testing.T) {
	for _, tc := range []struct{ now, want time.Time }{
		{time.Date(2016, 12, 31, 12, 0, 0, 0, time.UTC), time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2015, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2015, 7, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2015, 6, 30, 23, 59, 59, 0, time.FixedZone("X", -5*3600)), time.Date(2015, 8, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if got := LeapAt(tc.now); !got.Equal(tc.want) {
			t.Errorf("LeapAt(%v) = %v, want %v", tc.now, got, tc.want)
		}
	}
	w := LeapWarning(LeapInsert, time.Date(2016, 12, 1, 0, 0, 0, 0, time.UTC), generator.PolicyWait, time.Second, time.Second)
	if !strings.Contains(w, "in 31d0h") || strings.Contains(w, "tonight") {
		t.Errorf("a month ahead: %s", w)
	}
}

func TestRewindEffect(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		by               time.Duration
		p                generator.Policy
		wait, lead       time.Duration
		fail, block, ahd time.Duration
		covered          bool
	}{
		{300 * ms, generator.PolicyRefuse, time.Second, time.Second, 300 * ms, 0, 0, false},
		{300 * ms, generator.PolicyWait, time.Second, time.Second, 0, 300 * ms, 0, true},
		{300 * ms, generator.PolicyWait, 300 * ms, time.Second, 0, 300 * ms, 0, true},
		{300 * ms, generator.PolicyWait, 100 * ms, time.Second, 200 * ms, 100 * ms, 0, false},
		{300 * ms, generator.PolicyLogical, time.Second, time.Second, 0, 0, 300 * ms, true},
		{300 * ms, generator.PolicyLogical, time.Second, 100 * ms, 200 * ms, 0, 100 * ms, false},
	} {
		e := RewindEffect(tc.by, tc.p, tc.wait, tc.lead)
		stall := tc.fail + tc.block // no ID until the failures and the waits are over
		if e.FailFor != tc.fail || e.BlockUpTo != tc.block || e.Lead != tc.ahd || e.Covered != tc.covered || e.Text == "" ||
			e.Stall != stall {
			t.Errorf("RewindEffect(%v, %v, %v, %v) = %+v", tc.by, tc.p, tc.wait, tc.lead, e)
		}
	}
}

func TestReportJSON(t *testing.T) {
	local := loadResponse(t, "chrony-local-stratum8")
	r := Evaluate(Config{}, []ServerResult{Summarize("a:123", []Sample{{Response: skewed(local, time.Second)}}, Config{})})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["status"] != "unhealthy" || m["exit_code"] != float64(1) {
		t.Errorf("status %v exit %v", m["status"], m["exit_code"])
	}
	if off := m["offset_seconds"].(float64); off > -0.99 || off < -1.01 {
		t.Errorf("offset_seconds %v", off)
	}
	s := m["servers"].([]any)[0].(map[string]any)
	for _, k := range []string{"offset_seconds", "rtt_seconds", "stratum", "reference_id", "leap", "root_delay_seconds",
		"root_dispersion_seconds", "root_distance_seconds", "min_error_seconds", "sane", "queries"} {
		if _, ok := s[k]; !ok {
			t.Errorf("server JSON lacks %q: %s", k, b)
		}
	}
	f := m["findings"].([]any)[0].(map[string]any)
	if f["severity"] != "error" || f["code"] != string(CodeOffsetBudget) {
		t.Errorf("first finding %v", f)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Servers: []string{"a b"}},
		{Timeout: -1},
		{Samples: -1},
		{Samples: 65},
		{Policy: 9},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	if err := (Config{Servers: []string{"pool.ntp.org", "[::1]:123"}}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestDefaultServers(t *testing.T) {
	t.Setenv(EnvServers, "")
	if got := DefaultServers(); !slices.Equal(got, PoolServers) {
		t.Errorf("default %v", got)
	}
	t.Setenv(EnvServers, "time.example.org, 127.0.0.1:1123 [::1]")
	want := []string{"time.example.org:123", "127.0.0.1:1123", "[::1]:123"}
	if got := DefaultServers(); !slices.Equal(got, want) {
		t.Errorf("from env %v, want %v", got, want)
	}
	t.Setenv(EnvServers, "bad host!")
	if got := DefaultServers(); !slices.Equal(got, PoolServers) {
		t.Errorf("unparsable env should fall back to the pool, got %v", got)
	}
}
