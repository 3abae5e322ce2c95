package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leaseobs"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// TestLeaseMetricsAndSpans runs a Keeper on the ZooKeeper registry
// through leaseobs, as snowchaos serve does, and reads the
// snowflake_lease_* series and the lease spans while the lease is held
// and while the store is cut off.
func TestLeaseMetricsAndSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		tp.Shutdown(context.Background())
	})
	zs := zktest.Start(t, zktest.Options{})
	px := testenv.StartProxy(t, zs.Addr)
	reg := openVia(t, []string{px.Addr}, []string{zs.Addr}, root())
	prom := prometheus.NewRegistry()
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	prom.MustRegister(lc)
	obs := leaseobs.New(lc.MustNode(""), "node-zk")
	k, err := obs.NewKeeper(lease.KeeperConfig{Registry: reg, Holder: "node-zk", Range: lease.Range{Max: 3}, TTL: faultTTL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := k.Start(ctx); err != nil {
		t.Fatal(err)
	}
	series := func() map[string]float64 { return promtest.Samples(t, prom) }
	wait := func(what string, cond func(map[string]float64) bool) {
		t.Helper()
		if !testenv.Eventually(context.Background(), 6*faultTTL, func() bool { return cond(series()) }) {
			t.Fatalf("waiting for %s: series %v, keeper %+v", what, series(), k.Stats())
		}
	}
	wait("two good renewals", func(s map[string]float64) bool { return s["snowflake_lease_renewals_total{ok}"] >= 2 })
	s := series()
	if s["snowflake_lease_state{held}"] != 1 {
		t.Errorf("state series %v, want held", s)
	}
	exp := time.Unix(0, int64(s["snowflake_lease_expiry_timestamp_seconds"]*1e9))
	if now := wallNow(); exp.Before(now) || exp.After(now.Add(faultTTL+time.Second)) {
		t.Errorf("expiry gauge %v, want within a TTL of now %v", exp, now)
	}

	px.SetMode(testenv.ProxyRefuse)
	wait("failed renewals and the lost state", func(s map[string]float64) bool {
		return s["snowflake_lease_renewals_total{error}"] >= 1 && s["snowflake_lease_state{lost}"] == 1
	})
	if problems, err := testutil.GatherAndLint(prom); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
	var acquires, renews, failed int
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case tracing.SpanLeaseAcquire:
			acquires++
		case tracing.SpanLeaseRenew:
			renews++
			if sp.Status().Code == codes.Error {
				failed++
			}
		}
	}
	// A session that expired while the store was cut off makes the keeper
	// try to acquire again, each attempt a span of its own.
	if acquires < 1 || renews < 3 || failed < 1 {
		t.Errorf("spans: %d acquire, %d renew (%d failed); want >= 1, >= 3, >= 1", acquires, renews, failed)
	}
}
