package server

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNTPBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NTPBudget(128 * time.Millisecond))
	want := `# HELP snowflake_ntp_offset_budget_seconds NTP offset budget of the node's readiness check, seconds: beyond it /readyz answers 503 (snowchaos serve --ntp-max-offset).
# TYPE snowflake_ntp_offset_budget_seconds gauge
snowflake_ntp_offset_budget_seconds 0.128
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricNTPOffsetBudget); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}
