package harness

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// The wide recording path: a call's IDs of the run's kind go from the
// client's buffer through run.record to the verifier, the history and
// the result, as Snowflakes do.

// wideRun returns a run checking kind, and a view per named issuer (each
// its own worker), as the driver would publish them.
func wideRun(kind verify.Kind, names ...string) (*run, []*view) {
	r := &run{opts: &Options{}, kind: kind, startNs: 1_700_000_000_000_000_000}
	r.mu.v = verify.New(verify.Config{Kind: kind})
	var vs []*view
	for i, n := range names {
		sl := &slot{idx: i, name: n}
		id := r.mu.v.Register(verify.IssuerSpec{Name: n, Worker: int64(i + 1)})
		vs = append(vs, &view{sl: sl, up: true, alive: true, issuer: id})
	}
	return r, vs
}

// v7 returns a UUIDv7 of Unix millisecond ms with the 12-bit counter seq
// and the low bits lo.
func v7(ms int64, seq, lo uint64) verify.ID128 {
	return verify.ID128{Hi: uint64(ms)<<16 | 0x7000 | seq&0xfff, Lo: 1<<63 | lo}
}

// wideCall records one successful call of ids by client on v, 1 ms long at
// offset at.
func (r *run) wideCall(v *view, client int, at time.Duration, ids ...verify.ID128) verify.Found {
	b := newIDBuf(r.kind, len(ids))
	b.n = copy(b.wide, ids)
	return r.record(v, client, at, at+time.Millisecond, b, nil, ownOffset(v))
}

// TestRecordWideDuplicate: a UUIDv7 planted in two issuers' calls is
// found exactly once, with both issuers and its canonical text, and the
// other five IDs are not.
func TestRecordWideDuplicate(t *testing.T) {
	r, v := wideRun(verify.KindUUIDv7, "a", "b")
	ms := r.startNs / 1e6
	planted := v7(ms, 2, 7)
	if f := r.wideCall(v[0], 0, 0, v7(ms, 1, 7), planted, v7(ms+1, 1, 7)); f.Any() {
		t.Fatalf("a's first call found %+v", f)
	}
	if f := r.wideCall(v[1], 1, 2*time.Millisecond, v7(ms, 5, 9), planted, v7(ms+2, 0, 9)); f.Duplicates != 1 {
		t.Fatalf("b repeating a's UUID: found %+v, want 1 duplicate", f)
	}
	vr := r.mu.v.Result()
	var res Result
	fillFigures(&res, vr, r.startNs)
	if vr.IDs != 6 || vr.Unique != 5 || vr.Duplicates != 1 || len(res.Duplicates) != 1 {
		t.Fatalf("%d IDs, %d unique, %d duplicates (%d listed); want 6, 5, 1", vr.IDs, vr.Unique, vr.Duplicates, len(res.Duplicates))
	}
	d := res.Duplicates[0]
	if d.ID != planted.UUID() || d.First != "a#0" || d.Second != "b#0" || d.SecondAt != Duration(2*time.Millisecond) {
		t.Fatalf("duplicate %+v; want %s first a#0, again b#0 at 2ms", d, planted.UUID())
	}
	if len(vr.DuplicatePairs) != 1 || vr.DuplicatePairs[0].Count != 1 {
		t.Fatalf("duplicate pairs %+v", vr.DuplicatePairs)
	}
}

// TestRecordWideOrder: a UUIDv7 below its stream's previous one, in a
// later call of the same client, is one order violation; the other
// client's stream, interleaved, has none.
func TestRecordWideOrder(t *testing.T) {
	r, v := wideRun(verify.KindUUIDv7, "a")
	ms := r.startNs / 1e6
	r.wideCall(v[0], 0, 0, v7(ms, 1, 0), v7(ms, 3, 0))
	r.wideCall(v[0], 1, time.Millisecond, v7(ms, 4, 0))
	if f := r.wideCall(v[0], 0, 2*time.Millisecond, v7(ms, 2, 0), v7(ms+1, 0, 0)); f.OrderViolations != 1 {
		t.Fatalf("a stream going from seq 3 to 2: found %+v, want 1 order violation", f)
	}
	vr := r.mu.v.Result()
	if !vr.Ordered || !vr.Timed || vr.OrderViolations != 1 || len(vr.OrderDetails) != 1 {
		t.Fatalf("ordered %v timed %v, %d order violations; want 1", vr.Ordered, vr.Timed, vr.OrderViolations)
	}
	if o := vr.OrderDetails[0]; o.Prev.String() != v7(ms, 3, 0).UUID() || o.ID.String() != v7(ms, 2, 0).UUID() {
		t.Fatalf("violation %s after %s", o.ID, o.Prev)
	}
	if vr.Lead.Count != 5 || vr.Lead.Max != 0 {
		t.Fatalf("lead %+v: want 5 IDs counted, none ahead (their ms is the call's)", vr.Lead)
	}
}

// TestRecordUUIDv4NotApplicable: UUIDv4s have no order and no time: IDs
// out of order are no violation, and the order, restart, lead and lag
// checks are n/a with the reason (not counted in the verdict), while
// duplicates are checked.
func TestRecordUUIDv4NotApplicable(t *testing.T) {
	r, v := wideRun(verify.KindUUIDv4, "a")
	v4 := func(x uint64) verify.ID128 { return verify.ID128{Hi: x<<16 | 0x4000, Lo: 1<<63 | x} }
	r.wideCall(v[0], 0, 0, v4(9), v4(5))
	r.wideCall(v[0], 0, time.Millisecond, v4(1))
	r.wideCall(v[0], 0, 2*time.Millisecond, v4(5))
	vr := r.mu.v.Result()
	if vr.Ordered || vr.Timed || vr.OrderViolations != 0 || vr.Duplicates != 1 {
		t.Fatalf("uuidv4: ordered %v timed %v, %d order violations, %d duplicates; want no order, no time, 0, 1", vr.Ordered, vr.Timed, vr.OrderViolations, vr.Duplicates)
	}
	s := waitScenario(t, `"duplicates <= 1", "order_violations == 0", "restart_violations == 0", "max_lead <= 1ms", "lag p99 <= 1ms"`)
	checks := evaluate(s, "wait", scenario.ModeSimulated, vr, nil, Figures{}, nil)
	for i, c := range checks {
		switch {
		case i == 0 && c.Verdict != Pass:
			t.Errorf("%s: %s, want pass", c.Expr, c.Verdict)
		case i > 0 && (c.Verdict != NA || c.Observed != "-" || !strings.Contains(c.Reason, "uuidv4 IDs")):
			t.Errorf("%s: %s %q (%s), want n/a naming uuidv4", c.Expr, c.Verdict, c.Observed, c.Reason)
		}
	}
}

// TestRecordStrings: a string repeated by a restarted node is found
// once, naming both incarnations, and the history writes the strings as
// JSON strings, escaped.
func TestRecordStrings(t *testing.T) {
	r, v := wideRun(verify.KindString, "a")
	var hist bytes.Buffer
	r.mu.hist = newHistoryWriter(&hist, false)
	r.s = &scenario.Scenario{Name: "s"}
	b := newIDBuf(verify.KindString, 2)
	b.n = copy(b.strs, []string{`order-"1"`, "order-2"})
	r.record(v[0], 0, 0, time.Millisecond, b, nil, 0)
	again := &view{sl: v[0].sl, up: true, incarnation: 1, issuer: r.mu.v.Register(verify.IssuerSpec{Name: "a", Incarnation: 1, Worker: 1})}
	b.n = copy(b.strs, []string{"order-3", `order-"1"`})
	if f := r.record(again, 0, 5*time.Millisecond, 6*time.Millisecond, b, nil, 0); f.Duplicates != 1 {
		t.Fatalf("found %+v, want 1 duplicate", f)
	}
	vr := r.mu.v.Result()
	if d := vr.DuplicateDetails; len(d) != 1 || d[0].ID.String() != `order-"1"` || d[0].First.String() != "a#0" || d[0].Second.String() != "a#1" {
		t.Fatalf("duplicates %+v", d)
	}
	if err := r.mu.hist.flush(); err != nil {
		t.Fatal(err)
	}
	if want := `"ids":["order-\"1\"","order-2"]`; !strings.Contains(hist.String(), want) {
		t.Fatalf("history %s; want %s", hist.String(), want)
	}
}

// TestHistoryWide: the history writes UUIDs and ULIDs in their canonical
// text, and a call without IDs as an empty list.
func TestHistoryWide(t *testing.T) {
	for _, c := range []struct {
		kind verify.Kind
		want string
	}{
		{verify.KindUUIDv7, `"ids":["0189ab12-3456-7001-8000-000000000007"]`},
		{verify.KindULID, `"ids":["01H6NH4D2PE00R000000000007"]`},
	} {
		r, v := wideRun(c.kind, "a")
		var hist bytes.Buffer
		r.mu.hist = newHistoryWriter(&hist, false)
		r.s = &scenario.Scenario{Name: "s"}
		r.wideCall(v[0], 0, 0, v7(0x0189ab123456, 1, 7))
		r.recordDown(&view{sl: v[0].sl, issuer: v[0].issuer, downReason: "restarting"}, 0, time.Millisecond)
		r.mu.hist.flush()
		lines := strings.Split(strings.TrimSpace(hist.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], c.want) || !strings.Contains(lines[1], `"ids":[]`) {
			t.Errorf("%s history:\n%s\nwant %s, then an empty list", c.kind, hist.String(), c.want)
		}
	}
}

// BenchmarkRecord: one call of one ID through run.record, per kind, beside
// the reference measured in the same run: the verifier's Observe of the
// same call alone (what record adds is its lock and the kind's branch).
func BenchmarkRecord(b *testing.B) {
	for _, kind := range []verify.Kind{verify.KindSnowflake, verify.KindUUIDv7} {
		b.Run(kind.String(), func(b *testing.B) {
			r, v := wideRun(kind, "a")
			buf := newIDBuf(kind, 1)
			buf.n = 1
			ms := r.startNs / 1e6
			b.ReportAllocs()
			for i := range b.N {
				if kind == verify.KindSnowflake {
					buf.sf[0] = generator.ID(int64(i) << 22)
				} else {
					buf.wide[0] = v7(ms+int64(i>>12), uint64(i), 0)
				}
				at := time.Duration(i>>12) * time.Millisecond
				r.record(v[0], 0, at, at, buf, nil, 0)
			}
		})
	}
	b.Run("reference-observe-snowflake", func(b *testing.B) {
		vf := verify.New(verify.Config{})
		is := vf.Register(verify.IssuerSpec{Name: "a", Worker: 1})
		ids := make([]generator.ID, 1)
		b.ReportAllocs()
		for i := range b.N {
			ids[0] = generator.ID(int64(i) << 22)
			at := int64(1_700_000_000_000_000_000) + int64(i>>12)*int64(time.Millisecond)
			vf.Observe(verify.Observation{Issuer: is, Stream: 1 << 32, RefStart: at, RefEnd: at, IDs: ids})
		}
	})
}

// TestEvaluateModeScoped: a check scoped to one mode ("in simulated
// mode") is judged in that mode and n/a, with the reason, in the other.
func TestEvaluateModeScoped(t *testing.T) {
	s := waitScenario(t, `"duplicates == 0", "refusals >= 5 in simulated mode"`)
	var vr verify.Result
	sim := evaluate(s, "wait", scenario.ModeSimulated, vr, nil, Figures{}, nil)
	real := evaluate(s, "wait", scenario.ModeReal, vr, nil, Figures{}, nil)
	if sim[1].Verdict == NA || sim[1].Verdict == Pass {
		t.Errorf("simulated: %s is %s, want it judged (0 refusals fails it)", sim[1].Expr, sim[1].Verdict)
	}
	if real[1].Verdict != NA || !strings.Contains(real[1].Reason, "simulated mode only") {
		t.Errorf("real: %s is %s (%s), want n/a saying it is judged in simulated mode only", real[1].Expr, real[1].Verdict, real[1].Reason)
	}
	if sim[0].Verdict != Pass || real[0].Verdict != Pass {
		t.Errorf("duplicates: %s / %s, want pass in both modes", sim[0].Verdict, real[0].Verdict)
	}
}

// waitScenario parses a one-second scenario of one node, judged on the
// wait target by the given invariants (a YAML flow list's items).
func waitScenario(t *testing.T, invariants string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse("w.yaml", []byte(`
name: w
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 10/s}
invariants: [`+invariants+`]
targets: [wait]
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stepMidCall is a node whose one call reads its clock, then sees the
// host's clock stepped back (a fault landing during the call) before it
// answers with an ID of the tick it read.
type stepMidCall struct {
	target.Node
	host *hostTruth
	by   time.Duration
}

func (n *stepMidCall) Issue(_ context.Context, dst []generator.ID) (int, error) {
	own, _ := n.host.shadow.Now() // the node's clock at the call's start
	n.host.shadow.Step(n.by)
	id, err := generator.DefaultLayout().Compose(generator.DefaultLayout().TickOf(own), 1, 0)
	dst[0] = id
	return 1, err
}

// TestLeadOwnStepMidCall: an ID read from the node's own clock just before
// a 300 ms step back that lands during the call has no lead over that
// clock; judged by the offset at the call's end alone it showed one of
// 299 ms (the wall-clock false alarm in step-forward / logical).
func TestLeadOwnStepMidCall(t *testing.T) {
	r, v := wideRun(verify.KindSnowflake, "a")
	r.startNs = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	r.ctx, r.mu.v = context.Background(), verify.New(verify.Config{})
	v[0].issuer = r.mu.v.Register(verify.IssuerSpec{Name: "a", Worker: 1})
	shadow := faults.New(faults.NewVirtual(time.Unix(0, r.startNs), true))
	shadow.Step(300 * time.Millisecond)
	v[0].host = &hostTruth{shadow: shadow}
	v[0].node = &stepMidCall{host: v[0].host, by: -300 * time.Millisecond}
	buf := newIDBuf(verify.KindSnowflake, 1)
	if _, err := r.call(v[0], 0, 0, buf, func() time.Duration { return time.Millisecond }); err != nil {
		t.Fatal(err)
	}
	if got := r.mu.v.Result().MaxLeadOwn; got > time.Millisecond {
		t.Fatalf("max_lead_own %s for an ID read from the node's own clock before the step, want none", got)
	}
}
