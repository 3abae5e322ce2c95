package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricNTPOffsetBudget names the gauge NTPBudget exports.
const MetricNTPOffsetBudget = "snowflake_ntp_offset_budget_seconds"

// NTPBudget returns a collector of one gauge, snowflake_ntp_offset_budget_seconds:
// the NTP offset budget the node's readiness is held to (an NTP offset
// beyond it makes /readyz answer 503), so that a dashboard threshold or an
// alert can follow the node's configuration rather than a copy of it.
// Register it only on a node that checks NTP. A scrape costs one constant
// sample.
func NTPBudget(budget time.Duration) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricNTPOffsetBudget,
		Help: "NTP offset budget of the node's readiness check, seconds: beyond it /readyz answers 503 (snowchaos serve --ntp-max-offset).",
	})
	g.Set(budget.Seconds())
	return g
}
