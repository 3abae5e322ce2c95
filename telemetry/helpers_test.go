package telemetry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/snowchaos/snowchaos/generator"
)

// scriptClock is a deterministic generator.Clock: time moves only when the
// test steps it, and Sleep advances both readings by d at once.
type scriptClock struct {
	mu         sync.Mutex
	wall, mono int64
}

func newScriptClock() *scriptClock {
	return &scriptClock{wall: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano(), mono: 1e9}
}

func (c *scriptClock) Now() (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall, c.mono
}

func (c *scriptClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall += int64(d)
	c.mono += int64(d)
}

// step moves the wall clock only (negative: an NTP step back).
func (c *scriptClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall += int64(d)
}

// advance moves both clocks.
func (c *scriptClock) advance(d time.Duration) { c.Sleep(d) }

// newGen returns a generator on clk with obs, failing the test on error.
func newGen(t testing.TB, clk generator.Clock, obs generator.Observer, policy generator.Policy, node int64) *generator.Generator {
	t.Helper()
	g, err := generator.New(generator.Settings{Node: node, Clock: clk, Observer: obs, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// gather returns the families of g by name.
func gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sample finds the metric of family name whose labels include want.
func sample(t testing.TB, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mf, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s%v: no such series", name, want)
	return nil
}

// value returns the counter or gauge value (histograms: the count).
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// ctxT returns a context ending with the test (or after d).
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
