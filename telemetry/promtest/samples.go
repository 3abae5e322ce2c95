package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Samples gathers g in process (no server) and returns every sample's
// value keyed by metric name and its label values in label-name order,
// each in braces: "snowflake_lease_state{held}",
// "snowflake_lease_renewals_total{ok}". A histogram or summary gives
// KEY_count and KEY_sum. It fails t when g cannot be gathered.
func Samples(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("promtest: gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_UNTYPED:
				out[key] = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[key+"_sum"] = m.GetHistogram().GetSampleSum()
			case dto.MetricType_SUMMARY:
				out[key+"_count"] = float64(m.GetSummary().GetSampleCount())
				out[key+"_sum"] = m.GetSummary().GetSampleSum()
			}
		}
	}
	return out
}
