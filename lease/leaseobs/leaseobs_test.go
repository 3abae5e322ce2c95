package leaseobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leaseobs"
	"github.com/snowchaos/snowchaos/lease/leasetest"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const ttl = 9 * time.Second // renew every 3s, retry every 0.9s, validity 8.05s

// rig is one node's Keeper fed into a real LeaseCollector on its own
// registry, with spans recorded in memory.
type rig struct {
	t     *testing.T
	clock *leasetest.Clock
	mem   *lease.Memory
	reg   *prometheus.Registry
	obs   *leaseobs.Observer
	k     *lease.Keeper
	spans *tracetest.SpanRecorder
	seen  []lease.Event
}

func newRig(t *testing.T) *rig {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		tp.Shutdown(context.Background())
	})
	r := &rig{t: t, clock: leasetest.NewClock(epoch), reg: prometheus.NewRegistry(), spans: rec}
	r.mem = lease.NewMemory(r.clock)
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	r.reg.MustRegister(lc)
	r.obs = leaseobs.New(lc.MustNode(""), "node-a")
	k, err := r.obs.NewKeeper(lease.KeeperConfig{
		Registry: r.mem, Holder: "node-a", Range: lease.Range{Min: 0, Max: 1}, TTL: ttl, Clock: r.clock,
		OnChange: func(ev lease.Event) { r.seen = append(r.seen, ev) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.k = k
	return r
}

func (r *rig) tick() { r.k.Tick(context.Background()) }

// series returns the value of every sample of the registry, keyed by
// family name and label values (e.g. "snowflake_lease_state{lost}").
func (r *rig) series() map[string]float64 {
	r.t.Helper()
	return promtest.Samples(r.t, r.reg)
}

func (r *rig) want(name string, v float64) {
	r.t.Helper()
	got, ok := r.series()[name]
	if !ok || got != v {
		r.t.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
	}
}

func (r *rig) wantState(s string) {
	r.t.Helper()
	for _, st := range telemetry.LeaseStates() {
		v := 0.0
		if string(st) == s {
			v = 1
		}
		r.want("snowflake_lease_state{"+string(st)+"}", v)
	}
}

func (r *rig) wantExpiry(t time.Time) {
	r.t.Helper()
	v := 0.0
	if !t.IsZero() {
		v = float64(t.UnixNano()) / 1e9
	}
	r.want("snowflake_lease_expiry_timestamp_seconds", v)
}

func (r *rig) wantRenewals(ok, failed, lost float64) {
	r.t.Helper()
	r.want("snowflake_lease_renewals_total{ok}", ok)
	r.want("snowflake_lease_renewals_total{error}", failed)
	r.want("snowflake_lease_renewals_total{lost}", lost)
	st := r.k.Stats()
	if float64(st.RenewOK) != ok || float64(st.RenewFailed) != failed || float64(st.RenewLost) != lost {
		r.t.Errorf("Keeper counts ok %d error %d lost %d; metrics %v %v %v", st.RenewOK, st.RenewFailed, st.RenewLost, ok, failed, lost)
	}
}

func (r *rig) lint() {
	r.t.Helper()
	problems, err := testutil.GatherAndLint(r.reg)
	if err != nil || len(problems) > 0 {
		r.t.Errorf("lint: %v %v", err, problems)
	}
}

// TestObserverFollowsTheKeeper walks a lease through acquire, renewals, an
// outage that outlasts the TTL and the re-acquisition, checking every
// series against the Keeper after each step.
func TestObserverFollowsTheKeeper(t *testing.T) {
	r := newRig(t)
	r.wantState("") // all 0 before the first acquisition
	r.lint()

	l, err := r.k.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.wantState("held")
	r.wantExpiry(l.LeasedUntil)
	r.wantRenewals(0, 0, 0)

	// Two renewals: the expiry moves with each.
	for i := 1; i <= 2; i++ {
		r.clock.Advance(ttl / 3)
		r.tick()
		r.wantRenewals(float64(i), 0, 0)
		r.wantExpiry(r.k.Stats().LeasedUntil)
		if want := epoch.Add(time.Duration(i)*ttl/3 + ttl); !r.k.Stats().LeasedUntil.Equal(want) {
			t.Fatalf("renewal %d: leased until %v, want %v", i, r.k.Stats().LeasedUntil, want)
		}
	}
	renewed := r.k.Stats().LeasedUntil
	r.wantState("held")

	// The store goes away: renewing, then lost after three failures; the
	// expiry stays the store's last word.
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl / 3)
	r.tick()
	r.wantState("renewing")
	r.wantRenewals(2, 1, 0)
	for range 2 {
		r.clock.Advance(ttl / 10)
		r.tick()
	}
	r.wantState("lost")
	r.wantRenewals(2, 3, 0)
	r.wantExpiry(renewed)

	// It comes back after the lease expired in the store: the renewal is
	// answered "lost", the Keeper gets the worker back under a new lease.
	r.clock.Advance(ttl)
	r.mem.SetAvailable(true)
	r.clock.Advance(ttl / 10)
	r.tick()
	cur, ok := r.k.Lease()
	if !ok || cur.Token == l.Token {
		t.Fatalf("no new lease: %v %v", cur, ok)
	}
	r.wantRenewals(2, 3, 1)
	r.wantState("held")
	r.wantExpiry(cur.LeasedUntil)
	r.lint()

	// Spans: one acquire per acquisition, one renew per attempt, errors
	// recorded on the failed ones.
	var acquires, renews, failed int
	for _, s := range r.spans.Ended() {
		switch s.Name() {
		case tracing.SpanLeaseAcquire:
			acquires++
		case tracing.SpanLeaseRenew:
			renews++
		}
		if s.Status().Code.String() == "Error" {
			failed++
		}
	}
	st := r.k.Stats()
	if acquires != int(st.Acquisitions+st.AcquireErrors) || renews != int(st.RenewOK+st.RenewFailed+st.RenewLost) || failed != int(st.RenewFailed+st.RenewLost+st.AcquireErrors) {
		t.Errorf("spans: %d acquire, %d renew, %d failed; keeper %+v", acquires, renews, failed, st)
	}
}

// TestObserverLostAndReleased: a lease the store gives to another holder
// shows lost with no expiry when no worker is left; Release shows
// released.
func TestObserverLostAndReleased(t *testing.T) {
	r := newRig(t)
	if _, err := r.k.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Expire it in the store behind the Keeper's back and fill the range.
	r.mem.SetAvailable(false)
	r.clock.Advance(ttl + time.Second)
	r.tick()
	r.mem.SetAvailable(true)
	for _, w := range []int64{0, 1} {
		if _, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "thief", Range: lease.Range{Min: w, Max: w}, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.Advance(ttl / 10)
	r.tick()
	r.wantState("lost")
	r.wantExpiry(time.Time{})
	if got := r.series()["snowflake_lease_renewals_total{lost}"]; got != 1 {
		t.Errorf("lost renewals %v, want 1", got)
	}

	r2 := newRig(t)
	l2, err := r2.k.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2.wantExpiry(l2.LeasedUntil)
	if err := r2.k.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2.wantState("released")
	r2.wantExpiry(time.Time{})
	r2.lint()
	if n := len(r2.seen); n != 2 || r2.seen[1].State != lease.StateReleased {
		t.Errorf("the caller's OnChange saw %v", r2.seen)
	}
}

// TestObserverHandoffWait: a new holder whose clock is behind the previous
// holder's last issued time waits; the wait lands in the histogram once,
// with the lease.acquire span as exemplar.
func TestObserverHandoffWait(t *testing.T) {
	r := newRig(t)
	wall, _ := r.clock.Now()
	prev, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "old", Range: lease.Range{Min: 0, Max: 1}, TTL: time.Second, Prefer: []int64{0}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.mem.Release(context.Background(), prev, wall/1e6+250); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mem.Acquire(context.Background(), lease.Request{Holder: "other", Range: lease.Range{Min: 1, Max: 1}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	l, err := r.k.Acquire(context.Background())
	if err != nil || l.WorkerID != prev.WorkerID {
		t.Fatalf("acquired %v, %v; want worker %d", l, err, prev.WorkerID)
	}
	cp := r.obs.Checkpointer(r.k)
	g, err := generator.New(generator.Settings{
		Node: l.WorkerID, Clock: r.k.Clock(), Fence: r.k, Checkpoint: cp, Policy: generator.PolicyRefuse,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r.want("snowflake_lease_handoff_wait_seconds_count", 1)
	r.want("snowflake_lease_handoff_wait_seconds_sum", 0.25)
	// The generator refuses until its clock passes the previous holder's mark.
	if _, err := g.Next(); err == nil {
		t.Fatal("issued before the previous holder's last issued time")
	}
	r.clock.Advance(251 * time.Millisecond)
	if _, err := g.Next(); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	r.want("snowflake_lease_handoff_wait_seconds_count", 1)
	var ex *dto.Exemplar
	fams, _ := r.reg.Gather()
	for _, f := range fams {
		if f.GetName() == "snowflake_lease_handoff_wait_seconds" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				if b.GetExemplar() != nil {
					ex = b.GetExemplar()
				}
			}
		}
	}
	var acquire string
	for _, s := range r.spans.Ended() {
		if s.Name() == tracing.SpanLeaseAcquire {
			acquire = s.SpanContext().TraceID().String()
		}
	}
	if ex == nil || acquire == "" {
		t.Fatalf("exemplar %v, acquire span trace %q", ex, acquire)
	}
	for _, lp := range ex.GetLabel() {
		if lp.GetName() == "trace_id" && lp.GetValue() != acquire {
			t.Errorf("exemplar trace %s, want the acquire span's %s", lp.GetValue(), acquire)
		}
	}
	r.lint()
}

// TestSync sets the state and expiry of a Keeper whose events were missed.
func TestSync(t *testing.T) {
	clock := leasetest.NewClock(epoch)
	k, err := lease.NewKeeper(lease.KeeperConfig{Registry: lease.NewMemory(clock), Holder: "x", TTL: ttl, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	reg.MustRegister(lc)
	leaseobs.New(lc.MustNode(""), "").Sync(k)
	r := &rig{t: t, reg: reg, k: k}
	r.wantState("held")
	r.wantExpiry(l.LeasedUntil)
}

// TestPeerCheckMetrics: the peer clock check at start sets the skew and
// peer gauges; a refused start counts a refusal and leaves the state
// series as they were (no lease is held).
func TestPeerCheckMetrics(t *testing.T) {
	r := newRig(t)
	peer, err := lease.NewKeeper(lease.KeeperConfig{Registry: r.mem, Holder: "peer", Range: lease.Range{Min: 1, Max: 1}, TTL: ttl,
		Clock: r.clock.Offset(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.k.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.want("snowflake_lease_peer_clock_skew_seconds", -0.3)
	r.want("snowflake_lease_peer_clock_peers", 1)
	r.want("snowflake_lease_peer_clock_refusals_total", 0)
	r.wantState("held")

	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(lc)
	late, err := leaseobs.New(lc.MustNode(""), "late").NewKeeper(lease.KeeperConfig{Registry: r.mem, Holder: "late", Range: lease.Range{Min: 0, Max: 3},
		TTL: ttl, Clock: r.clock.Offset(-5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.TryAcquire(context.Background()); err == nil {
		t.Fatal("a node 5s behind its peers started")
	}
	got := promtest.Samples(t, reg)
	for name, want := range map[string]float64{
		"snowflake_lease_peer_clock_skew_seconds":   -5, // both peers (node-a and peer) are 5 s and 5.3 s ahead: the nearer
		"snowflake_lease_peer_clock_peers":          2,
		"snowflake_lease_peer_clock_refusals_total": 1,
		"snowflake_lease_state{held}":               0,
		"snowflake_lease_expiry_timestamp_seconds":  0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
