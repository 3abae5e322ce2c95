package ntpcheck_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
)

// quick is a Config for loopback servers: no pause between samples.
func quick(servers ...string) ntpcheck.Config {
	return ntpcheck.Config{Servers: servers, Samples: 3, SampleGap: -1, Timeout: 2 * time.Second}
}

func codes(r ntpcheck.Report) []ntpcheck.Code {
	var cs []ntpcheck.Code
	for _, f := range r.Findings {
		cs = append(cs, f.Code)
	}
	return cs
}

func finding(t *testing.T, r ntpcheck.Report, c ntpcheck.Code) ntpcheck.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Code == c {
			return f
		}
	}
	t.Fatalf("no %s finding; findings: %v", c, codes(r))
	return ntpcheck.Finding{}
}

func logReport(t *testing.T, r ntpcheck.Report) {
	t.Helper()
	var b bytes.Buffer
	_ = ntpcheck.WriteText(&b, r)
	t.Log("\n" + b.String())
}

func TestChronydHealthy(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	r := ntpcheck.Check(context.Background(), quick(c.Addr))
	logReport(t, r)
	if r.Status != ntpcheck.StatusHealthy || r.Status.ExitCode() != 0 {
		t.Fatalf("status %v, want healthy; findings %v", r.Status, codes(r))
	}
	if len(r.Findings) != 0 {
		t.Errorf("findings %v, want none", codes(r))
	}
	s := r.Servers[0]
	if !s.Usable || !s.Sane || s.Outcome != ntpcheck.OutcomeOK {
		t.Errorf("server %+v: want usable, sane, ok", s)
	}
	if s.Queries[ntpcheck.OutcomeOK] != 3 {
		t.Errorf("queries %v, want 3 ok", s.Queries)
	}
	if s.Stratum != 8 || s.ReferenceID != "127.127.1.1" || s.Leap != ntpcheck.LeapNone {
		t.Errorf("stratum %d refid %q leap %v, want 8 127.127.1.1 none", s.Stratum, s.ReferenceID, s.Leap)
	}
	// chronyd -x serves the host's own clock: the offset is loopback noise,
	// far inside the step threshold.
	if d := s.Offset; d > 20*time.Millisecond || d < -20*time.Millisecond {
		t.Errorf("offset %v against a chronyd on the same clock", d)
	}
	if r.Err() != nil {
		t.Errorf("Err() = %v", r.Err())
	}
}

func TestChronydSkewedHostClock(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	cfg := quick(c.Addr)
	cfg.Policy = generator.PolicyWait
	cfg.MaxWait = 100 * time.Millisecond
	// The host's clock reads 300 ms ahead: the next correction would step
	// it back by 300 ms.
	cfg.LocalTime = func(string) time.Time { return time.Now().Add(300 * time.Millisecond) }
	r := ntpcheck.Check(context.Background(), cfg)
	logReport(t, r)
	if r.Status != ntpcheck.StatusUnhealthy || r.Status.ExitCode() != 1 {
		t.Fatalf("status %v, want unhealthy (exit 1); findings %v", r.Status, codes(r))
	}
	if r.Offset > -250*time.Millisecond || r.Offset < -350*time.Millisecond {
		t.Fatalf("offset %v, want about -300ms", r.Offset)
	}
	if !errors.Is(r.Err(), ntpcheck.ErrOffsetBudget) {
		t.Errorf("Err() = %v, want ErrOffsetBudget", r.Err())
	}
	finding(t, r, ntpcheck.CodeOffsetBudget)
	step := finding(t, r, ntpcheck.CodeStepBack)
	for _, want := range []string{"step it back by 3", "Policy wait (max wait 100ms)", "does not suffice", "ErrWaitExceeded"} {
		if !strings.Contains(step.Message, want) {
			t.Errorf("step-back message lacks %q:\n%s", want, step.Message)
		}
	}
	if r.Servers[0].Sane {
		t.Errorf("a 300ms causality violation should fail sanity: %+v", r.Servers[0])
	}
}

func TestChronydWithoutReference(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{NoLocal: true})
	r := ntpcheck.Check(context.Background(), quick(c.Addr))
	logReport(t, r)
	if r.Status != ntpcheck.StatusUnusable || r.Status.ExitCode() != 2 {
		t.Fatalf("status %v, want unusable; findings %v", r.Status, codes(r))
	}
	s := r.Servers[0]
	if !s.Answered || s.Usable || s.Outcome != ntpcheck.OutcomeUnsynchronised || s.Leap != ntpcheck.LeapUnsynchronised {
		t.Errorf("server %+v: want answered, unsynchronised", s)
	}
	if f := finding(t, r, ntpcheck.CodeUnsynchronised); f.Severity != ntpcheck.Error {
		t.Errorf("unsynchronised finding severity %v, want error", f.Severity)
	}
	finding(t, r, ntpcheck.CodeNoUsableServer)
	if !errors.Is(r.Err(), ntpcheck.ErrNoUsableServer) {
		t.Errorf("Err() = %v, want ErrNoUsableServer", r.Err())
	}
}

func TestNothingListening(t *testing.T) {
	addr := chronytest.ClosedAddr(t)
	cfg := quick(addr)
	cfg.Timeout = 30 * time.Second // refusal must not wait for the timeout
	start := time.Now()
	r := ntpcheck.Check(context.Background(), cfg)
	elapsed := time.Since(start)
	logReport(t, r)
	if elapsed > 10*time.Second {
		t.Errorf("took %v: a refused query should fail at once, not wait for the timeout", elapsed)
	}
	if r.Status.ExitCode() != 2 {
		t.Fatalf("status %v, want unusable (exit 2)", r.Status)
	}
	s := r.Servers[0]
	if s.Outcome != ntpcheck.OutcomeRefused || s.Queries[ntpcheck.OutcomeRefused] != 1 {
		t.Errorf("outcome %v queries %v, want one refused query", s.Outcome, s.Queries)
	}
	f := finding(t, r, ntpcheck.CodeUnreachable)
	if !strings.Contains(f.Message, "refused") || f.Server != addr {
		t.Errorf("unreachable finding %+v should name %s and say refused", f, addr)
	}
}

func TestOneServerDisagrees(t *testing.T) {
	c := chronytest.Start(t, chronytest.Options{})
	honest := chronytest.StartFake(t, chronytest.Fake{})
	liar := chronytest.StartFake(t, chronytest.Fake{Offset: 500 * time.Millisecond})
	cfg := quick(c.Addr, honest, liar)
	cfg.MaxOffset = time.Second // the budget is not the point here
	r := ntpcheck.Check(context.Background(), cfg)
	logReport(t, r)
	if r.Usable != 3 {
		t.Fatalf("usable %d, want 3", r.Usable)
	}
	if r.Spread < 400*time.Millisecond || r.Spread > 600*time.Millisecond {
		t.Errorf("spread %v, want about 500ms", r.Spread)
	}
	if r.Offset > 20*time.Millisecond || r.Offset < -20*time.Millisecond {
		t.Errorf("median offset %v: the liar must be outvoted", r.Offset)
	}
	f := finding(t, r, ntpcheck.CodeDisagreement)
	if f.Severity != ntpcheck.Warn || !strings.Contains(f.Message, liar+" is furthest from the median") {
		t.Errorf("disagreement finding should name the liar %s:\n%+v", liar, f)
	}
	if r.Status != ntpcheck.StatusHealthy {
		t.Errorf("status %v: a disagreement alone is a warning", r.Status)
	}
}

func TestTwoChronydsOneSkewed(t *testing.T) {
	a := chronytest.Start(t, chronytest.Options{})
	b := chronytest.Start(t, chronytest.Options{})
	cfg := quick(a.Addr, b.Addr)
	// Queries to b read a host clock 400 ms behind: b looks 400 ms ahead.
	cfg.LocalTime = func(server string) time.Time {
		if server == b.Addr {
			return time.Now().Add(-400 * time.Millisecond)
		}
		return time.Now()
	}
	r := ntpcheck.Check(context.Background(), cfg)
	logReport(t, r)
	f := finding(t, r, ntpcheck.CodeDisagreement)
	if !strings.Contains(f.Message, "neither can be outvoted") {
		t.Errorf("two-server disagreement should say so: %s", f.Message)
	}
	// The median of two is their mean: 200 ms, beyond the step threshold.
	if r.Offset < 150*time.Millisecond || r.Offset > 250*time.Millisecond {
		t.Errorf("offset %v, want about +200ms", r.Offset)
	}
	finding(t, r, ntpcheck.CodeStepForward)
}

func TestKissOfDeath(t *testing.T) {
	kod := chronytest.StartFake(t, chronytest.Fake{KissCode: "RATE"})
	ok := chronytest.StartFake(t, chronytest.Fake{})
	r := ntpcheck.Check(context.Background(), quick(kod, ok))
	logReport(t, r)
	s := r.Servers[0]
	if s.Outcome != ntpcheck.OutcomeKissOfDeath || s.KissCode != "RATE" || s.Queries[ntpcheck.OutcomeKissOfDeath] != 1 {
		t.Errorf("server %+v: want one kod query with code RATE", s)
	}
	f := finding(t, r, ntpcheck.CodeKissOfDeath)
	if f.Severity != ntpcheck.Error || !strings.Contains(f.Message, "query less often") {
		t.Errorf("kod finding %+v", f)
	}
	if r.Status != ntpcheck.StatusUnhealthy {
		t.Errorf("status %v, want unhealthy", r.Status)
	}
}

func TestLeapSecondAnnounced(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{Leap: 1})
	r := ntpcheck.Check(context.Background(), quick(srv))
	logReport(t, r)
	f := finding(t, r, ntpcheck.CodeLeapInsert)
	if f.Severity != ntpcheck.Warn || !strings.Contains(f.Message, "23:59:60") || !strings.Contains(f.Message, "smear") {
		t.Errorf("leap finding %+v", f)
	}
	if r.LeapMidnight.IsZero() {
		t.Error("LeapMidnight not recorded")
	}
	if r.Status != ntpcheck.StatusHealthy {
		t.Errorf("status %v: a leap announcement is a warning", r.Status)
	}
}

func TestCheckCancelled(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := ntpcheck.Check(ctx, quick(srv))
	if r.Status != ntpcheck.StatusUnusable || r.Servers[0].Outcome != ntpcheck.OutcomeError {
		t.Errorf("cancelled check: status %v outcome %v", r.Status, r.Servers[0].Outcome)
	}
}

func TestInvalidServerIsAFinding(t *testing.T) {
	r := ntpcheck.Check(context.Background(), quick("bad host name"))
	if r.Servers[0].Outcome != ntpcheck.OutcomeError || !strings.Contains(r.Servers[0].Error, "invalid server") {
		t.Errorf("result %+v", r.Servers[0])
	}
}

func TestMonitorReadiness(t *testing.T) {
	var skew atomic.Int64 // what the server adds to the host's clock
	skew.Store(int64(-300 * time.Millisecond))
	srv := chronytest.StartFake(t, chronytest.Fake{Now: func() time.Time {
		return time.Now().Add(time.Duration(skew.Load()))
	}})
	m := ntpcheck.NewMonitor(quick(srv), time.Hour)
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready before the first check = %v, want nil", err)
	}
	if _, ok := m.Last(); ok {
		t.Fatal("Last before the first check")
	}
	m.CheckNow(context.Background())
	err := m.Ready()
	if !errors.Is(err, ntpcheck.ErrOffsetBudget) || !strings.Contains(err.Error(), "ahead of NTP time") {
		t.Fatalf("Ready = %v, want ErrOffsetBudget (host ahead)", err)
	}
	skew.Store(0)
	m.CheckNow(context.Background())
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready after recovery = %v", err)
	}
	if r, ok := m.Last(); !ok || r.Status != ntpcheck.StatusHealthy {
		t.Fatalf("Last = %v %v", r.Status, ok)
	}
}

func TestMonitorKeepsVerdictWithoutServers(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{Offset: -time.Second})
	closed := chronytest.ClosedAddr(t)
	m := ntpcheck.NewMonitor(quick(srv), time.Hour)
	m.CheckNow(context.Background())
	if !errors.Is(m.Ready(), ntpcheck.ErrOffsetBudget) {
		t.Fatalf("Ready = %v", m.Ready())
	}
	m2 := ntpcheck.NewMonitor(quick(closed), time.Hour)
	m2.CheckNow(context.Background())
	if err := m2.Ready(); err != nil {
		t.Fatalf("no usable server must not make the node unready: %v", err)
	}
}

func TestMonitorRun(t *testing.T) {
	srv := chronytest.StartFake(t, chronytest.Fake{})
	m := ntpcheck.NewMonitor(quick(srv), time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan ntpcheck.Report, 100)
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, func(r ntpcheck.Report) {
			select {
			case reports <- r:
			default:
			}
		})
	}()
	deadline := time.After(30 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case r := <-reports:
			if r.Status != ntpcheck.StatusHealthy {
				t.Errorf("report %d: %v", n, r.Status)
			}
		case <-deadline:
			t.Fatal("monitor did not report twice within 30s")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
