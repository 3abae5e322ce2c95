package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSamples(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"a", "b"})
	c.WithLabelValues("x", "y").Add(3)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	g.Set(1.5)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	h.Observe(2)
	h.Observe(3)
	reg.MustRegister(c, g, h)
	got := Samples(t, reg)
	want := map[string]float64{"c_total{x}{y}": 3, "g": 1.5, "h_seconds_count": 2, "h_seconds_sum": 5}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
