package ntpcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollectorLintAndValues(t *testing.T) {
	local := loadResponse(t, "chrony-local-stratum8")
	unsync := loadResponse(t, "chrony-unsynchronised")
	cfg := Config{}
	c := NewCollector("a", "b:123", "c:123")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	// Before any check: the queries counters exist, at zero, for every
	// outcome of every configured server.
	if n := testutil.CollectAndCount(c, MetricQueries); n != 3*len(Outcomes) {
		t.Fatalf("%d pre-initialised query series, want %d", n, 3*len(Outcomes))
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint before a check: %v %v", err, problems)
	}

	r := Evaluate(cfg, []ServerResult{
		Summarize("a:123", []Sample{{Response: skewed(local, 250*time.Millisecond)}, {Response: skewed(local, 250*time.Millisecond)}}, cfg),
		Summarize("b:123", []Sample{{Response: unsync}}, cfg),
		unreachable("c:123", cfg),
	})
	r.Time = time.Unix(1700000000, 500000000)
	c.Observe(r)
	c.Observe(r)

	problems, err = testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP snowflake_ntp_offset_seconds Offset of the server's clock from the host's at the last check (positive: host behind).
# TYPE snowflake_ntp_offset_seconds gauge
snowflake_ntp_offset_seconds{server="a:123"} -0.25
# HELP snowflake_ntp_sanity 1 when the server's last answer passed node_exporter's SNTP sanity heuristics, else 0.
# TYPE snowflake_ntp_sanity gauge
snowflake_ntp_sanity{server="a:123"} 0
snowflake_ntp_sanity{server="b:123"} 0
snowflake_ntp_sanity{server="c:123"} 0
# HELP snowflake_ntp_leap Leap indicator the server reported at the last check, 2 bits (3: unsynchronised).
# TYPE snowflake_ntp_leap gauge
snowflake_ntp_leap{server="a:123"} 0
snowflake_ntp_leap{server="b:123"} 3
# HELP snowflake_ntp_stratum Stratum the server reported at the last check (0: kiss-of-death or unsynchronised).
# TYPE snowflake_ntp_stratum gauge
snowflake_ntp_stratum{server="a:123"} 8
snowflake_ntp_stratum{server="b:123"} 0
# HELP snowflake_ntp_last_success_timestamp_seconds Unix time of the last check in which the server gave a usable answer.
# TYPE snowflake_ntp_last_success_timestamp_seconds gauge
snowflake_ntp_last_success_timestamp_seconds{server="a:123"} 1.7000000005e+09
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), MetricOffset, MetricSanity, MetricLeap, MetricStratum, MetricLastSuccess); err != nil {
		t.Error(err)
	}
	wantQ := map[[2]string]float64{
		{"a:123", "ok"}: 4, {"b:123", "unsynchronised"}: 2, {"c:123", "refused"}: 2, {"a:123", "timeout"}: 0,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if mf.GetName() != MetricQueries {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "server":
					key[0] = l.GetValue()
				case "result":
					key[1] = l.GetValue()
				}
			}
			if v, ok := wantQ[key]; ok {
				seen++
				if got := m.GetCounter().GetValue(); got != v {
					t.Errorf("queries%v = %v, want %v", key, got, v)
				}
			}
		}
	}
	if seen != len(wantQ) {
		t.Errorf("saw %d of %d expected query series", seen, len(wantQ))
	}
	if n := testutil.CollectAndCount(c, MetricRTT); n != 1 {
		t.Errorf("rtt series %d, want 1 (only the usable server)", n)
	}
	if n := testutil.CollectAndCount(c, MetricRootDistance); n != 1 {
		t.Errorf("root distance series %d, want 1", n)
	}
}
