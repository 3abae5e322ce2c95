package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// leaseMismatch compares the snowflake_lease_* series with the keeper's
// own view (its Stats); "" when they agree.
func leaseMismatch(st lease.KeeperStats, got map[string]float64) string {
	want := map[string]float64{
		"snowflake_lease_renewals_total{ok}":                         float64(st.RenewOK),
		"snowflake_lease_renewals_total{error}":                      float64(st.RenewFailed),
		"snowflake_lease_renewals_total{lost}":                       float64(st.RenewLost),
		"snowflake_lease_handoff_wait_seconds_count":                 float64(st.HandoffWaits),
		"snowflake_lease_expiry_timestamp_seconds":                   0,
		"snowflake_lease_state{" + string(telemetry.LeaseHeld) + "}": 0,
	}
	if !st.LeasedUntil.IsZero() && st.State != lease.StateReleased {
		want["snowflake_lease_expiry_timestamp_seconds"] = float64(st.LeasedUntil.UnixNano()) / 1e9
	}
	if st.State == lease.StateHeld {
		want["snowflake_lease_state{"+string(telemetry.LeaseHeld)+"}"] = 1
	}
	if st.State == lease.StateReleased {
		want["snowflake_lease_state{"+string(telemetry.LeaseReleased)+"}"] = 1
	}
	var bad []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			bad = append(bad, fmt.Sprintf("%s = %v (present %v), keeper says %v", k, g, ok, v))
		}
	}
	return strings.Join(bad, "; ")
}

// TestServeLeaseMetricsFollowTheKeeper: with a memory lease, the
// snowflake_lease_* series agree with the keeper after the acquisition,
// after renewals (expiry refreshed, renewals counted by result) and after
// the release at shutdown.
func TestServeLeaseMetricsFollowTheKeeper(t *testing.T) {
	var f serveFlags
	if err := newServeFlagSet(&f).Parse([]string{"--listen", "127.0.0.1:0", "--lease", "memory", "--lease-ttl", "3s", "--worker", "5"}); err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	svc, err := buildService(context.Background(), &f, &logs)
	if err != nil {
		t.Fatal(err)
	}
	reg := svc.Server().Registry()
	closed := false
	t.Cleanup(func() {
		if !closed {
			svc.Close()
		}
	})
	keeper := svc.Node().Keeper()

	st := keeper.Stats()
	if st.State != lease.StateHeld || st.WorkerID != 5 {
		t.Fatalf("keeper after the acquisition: %+v", st)
	}
	first := st.LeasedUntil
	if m := leaseMismatch(st, promtest.Samples(t, reg)); m != "" {
		t.Fatalf("after the acquisition: %s", m)
	}

	// The keeper renews every TTL/3 (1 s): wait for two renewals and a
	// moment when the series and the keeper agree (a renewal may land
	// between reading one and the other).
	var last string
	testenv.WaitFor(t, 30*time.Second, func() bool {
		st = keeper.Stats()
		last = leaseMismatch(st, promtest.Samples(t, reg))
		return st.RenewOK >= 2 && last == "" && keeper.Stats() == st
	}, "lease series never matched the keeper after two renewals: %s (keeper %+v)\nlog:\n%s", last, st, logs.String())
	if !st.LeasedUntil.After(first) {
		t.Errorf("expiry not refreshed by the renewals: %v then %v", first, st.LeasedUntil)
	}

	svc.Close()
	closed = true
	st = keeper.Stats()
	if m := leaseMismatch(st, promtest.Samples(t, reg)); m != "" {
		t.Errorf("after the release: %s", m)
	}
}

// TestServeNTPBudgetMetric: with --ntp-server the node exports the offset
// budget its readiness is held to; without, it does not.
func TestServeNTPBudgetMetric(t *testing.T) {
	metrics := func(url string) string {
		t.Helper()
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ntpAddr := chronytest.StartFake(t, chronytest.Fake{Offset: time.Millisecond, Stratum: 2})
	url, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--ntp-server", ntpAddr, "--ntp-max-offset", "50ms", "--ntp-interval", "1h")
	if got := metrics(url); !strings.Contains(got, "\nsnowflake_ntp_offset_budget_seconds 0.05\n") {
		t.Errorf("/metrics lacks the budget:\n%s", got)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}

	url, _, _ = startServe(t, "--listen", "127.0.0.1:0")
	if got := metrics(url); strings.Contains(got, "snowflake_ntp_offset_budget_seconds") {
		t.Error("budget exported without --ntp-server")
	}
	var out, errb strings.Builder
	if code := dispatch(context.Background(), []string{"serve", "--ntp-server", ntpAddr, "--ntp-max-offset", "-1s"}, &out, &errb); code != exitInvalid || !strings.Contains(errb.String(), "ntp-max-offset") {
		t.Errorf("negative budget: exit %d, stderr %q", code, errb.String())
	}
}
