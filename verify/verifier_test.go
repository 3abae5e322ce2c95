package verify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

var (
	dl      = generator.DefaultLayout()
	epochNs = generator.DefaultEpoch.UnixNano()
	ms      = int64(time.Millisecond)
)

// id composes a default-layout ID.
func id(tick, node, seq int64) generator.ID {
	v, err := dl.Compose(tick, node, seq)
	if err != nil {
		panic(err)
	}
	return v
}

// sv composes a default-layout ID as a Value.
func sv(tick, node, seq int64) Value { return SnowflakeValue(id(tick, node, seq)) }

// at returns the reference time of the start of tick plus off.
func at(tick int64, off time.Duration) int64 { return epochNs + tick*ms + int64(off) }

// inStep is a call in step with reference time: it starts 0.2 ms into the
// tick of its first ID and ends 0.1 ms later.
func inStep(is IssuerID, stream uint64, ids ...generator.ID) Observation {
	t := dl.Decode(ids[0]).Tick
	return Observation{Issuer: is, Stream: stream, RefStart: at(t, 200*time.Microsecond), RefEnd: at(t, 300*time.Microsecond), IDs: ids}
}

func TestCleanRun(t *testing.T) {
	v := New(Config{})
	a := v.Issuer("node-a", 0, 1)
	b := v.Issuer("node-b", 0, 2)
	for tick := int64(1000); tick < 1100; tick++ {
		for _, f := range []Found{
			v.Observe(inStep(a, 1, id(tick, 1, 0), id(tick, 1, 1))),
			v.Observe(inStep(b, 2, id(tick, 2, 0))),
		} {
			if f.Any() {
				t.Fatalf("tick %d: found %+v", tick, f)
			}
		}
	}
	r := v.Result()
	if r.IDs != 300 || r.Unique != 300 || r.Duplicates != 0 || r.OrderViolations != 0 || r.RestartViolations != 0 {
		t.Fatalf("totals: %+v", r)
	}
	if r.Calls.Total != 200 || r.Calls.Availability() != 1 || r.Streams != 2 {
		t.Fatalf("calls: %+v streams %d", r.Calls, r.Streams)
	}
	if r.Lead.Max != 0 || r.Lag.Max != 0 || r.Lead.Count != 300 {
		t.Fatalf("lead %+v lag %+v", r.Lead, r.Lag)
	}
	if r.LongestGap != time.Millisecond {
		t.Fatalf("longest gap %v, want 1ms (one success per ms)", r.LongestGap)
	}
	if len(r.Issuers) != 2 || r.Issuers[0].IDs != 200 || r.Issuers[0].MinID != sv(1000, 1, 0) || r.Issuers[0].MaxID != sv(1099, 1, 1) {
		t.Fatalf("issuers %+v", r.Issuers)
	}
	if p := v.Progress(); p.IDs != 300 || p.Calls != 200 {
		t.Fatalf("progress %+v", p)
	}
}

func TestDuplicateAcrossClones(t *testing.T) {
	v := New(Config{Windows: []Window{{Name: "clone-up", Start: at(2000, 0), End: at(3000, 0)}}})
	a := v.Issuer("node-a", 0, 7)
	c := v.Issuer("node-a-clone", 0, 7)
	for tick := int64(1990); tick < 2010; tick++ {
		v.Observe(inStep(a, 1, id(tick, 7, 0), id(tick, 7, 1)))
		if tick >= 2000 {
			// The clone issues the same tick's first sequence number.
			f := v.Observe(inStep(c, 2, id(tick, 7, 0)))
			if f.Duplicates != 1 {
				t.Fatalf("tick %d: found %+v", tick, f)
			}
		}
	}
	r := v.Result()
	if r.Duplicates != 10 || r.Unique != 40 {
		t.Fatalf("duplicates %d unique %d", r.Duplicates, r.Unique)
	}
	want := DuplicatePair{First: IssuerRef{"node-a", 0, 7}, Second: IssuerRef{"node-a-clone", 0, 7}, Count: 10}
	if !reflect.DeepEqual(r.DuplicatePairs, []DuplicatePair{want}) {
		t.Fatalf("pairs %+v", r.DuplicatePairs)
	}
	d := r.DuplicateDetails[0]
	if d.ID != sv(2000, 7, 0) || d.First != want.First || d.Second != want.Second {
		t.Fatalf("detail %+v", d)
	}
	// The first issue happened in node-a's call for tick 2000; the bracket
	// must hold it and be no wider than the time records allow.
	if d.FirstRefStart > at(2000, 200*time.Microsecond) || d.FirstRefEnd < at(2000, 300*time.Microsecond) {
		t.Fatalf("first bracket [%d, %d] misses the call", d.FirstRefStart, d.FirstRefEnd)
	}
	if d.FirstRefEnd-d.FirstRefStart > int64(100*time.Millisecond) {
		t.Fatalf("first bracket %v wide", time.Duration(d.FirstRefEnd-d.FirstRefStart))
	}
	if d.SecondRefStart != at(2000, 200*time.Microsecond) || !slices.Equal(d.Windows, []string{"clone-up"}) || d.Stream != 2 {
		t.Fatalf("detail %+v", d)
	}
	if r.Windows[0].Duplicates != 10 || r.Issuers[1].Duplicates != 10 || r.Issuers[0].Duplicates != 0 {
		t.Fatalf("window %+v issuers %+v", r.Windows[0], r.Issuers)
	}
}

func TestRestartRepeatsIDs(t *testing.T) {
	v := New(Config{})
	a0 := v.Issuer("node-a", 0, 3)
	for tick := int64(100); tick < 200; tick++ {
		v.Observe(inStep(a0, 1, id(tick, 3, 0)))
	}
	// The restarted node forgot its last tick and its clock is 50 ms behind.
	a1 := v.Issuer("node-a", 1, 3)
	var found Found
	for tick := int64(150); tick < 260; tick++ {
		f := v.Observe(inStep(a1, 2, id(tick, 3, 0)))
		found.Duplicates += f.Duplicates
		found.RestartViolations += f.RestartViolations
	}
	if found.Duplicates != 50 || found.RestartViolations != 50 {
		t.Fatalf("found %+v", found)
	}
	r := v.Result()
	rv := r.RestartDetails[0]
	if rv.Issuer != (IssuerRef{"node-a", 1, 3}) || rv.FloorIssuer != (IssuerRef{"node-a", 0, 3}) || rv.Floor != sv(199, 3, 0) || rv.ID != sv(150, 3, 0) {
		t.Fatalf("restart detail %+v", rv)
	}
	d := r.DuplicateDetails[0]
	if d.First.Incarnation != 0 || d.Second.Incarnation != 1 || d.ID != sv(150, 3, 0) {
		t.Fatalf("dup detail %+v", d)
	}
	if d.FirstRefStart > at(150, 200*time.Microsecond) || d.FirstRefEnd < at(150, 300*time.Microsecond) {
		t.Fatalf("first bracket [%d, %d] misses tick 150", d.FirstRefStart-epochNs, d.FirstRefEnd-epochNs)
	}
	if r.Issuers[1].RestartViolations != 50 {
		t.Fatalf("issuer %+v", r.Issuers[1])
	}
	// A restart that waits out the old mark is clean.
	a2 := v.Issuer("node-a", 2, 3)
	if f := v.Observe(inStep(a2, 3, id(300, 3, 0))); f.Any() {
		t.Fatalf("clean restart found %+v", f)
	}
}

func TestRestartFloorFollowsOldIncarnation(t *testing.T) {
	// The old incarnation is still issuing (a zombie) after the restart
	// registered: the floor rises with it.
	v := New(Config{})
	a0 := v.Issuer("n", 0, 1)
	a1 := v.Issuer("n", 1, 1)
	v.Observe(inStep(a1, 0, id(10, 1, 0)))
	v.Observe(inStep(a0, 0, id(20, 1, 0)))
	if f := v.Observe(inStep(a1, 0, id(15, 1, 0))); f.RestartViolations != 1 {
		t.Fatalf("found %+v", f)
	}
	if f := v.Observe(inStep(a1, 0, id(21, 1, 0))); f.Any() {
		t.Fatalf("found %+v", f)
	}
	// An incarnation registered after a higher one still raises its floor.
	late0 := v.Issuer("late", 0, 1)
	v.Observe(inStep(late0, 0, id(40, 1, 0)))
	if f := v.Observe(inStep(a1, 0, id(30, 1, 0))); f.RestartViolations != 1 {
		t.Fatalf("found %+v", f)
	}
	// Another worker's incarnations do not matter.
	b1 := v.Issuer("m", 1, 2)
	if f := v.Observe(inStep(b1, 0, id(1, 2, 0))); f.Any() {
		t.Fatalf("found %+v", f)
	}
}

func TestOutOfOrderStream(t *testing.T) {
	v := New(Config{MaxDetails: 2})
	a := v.Issuer("a", 0, 1)
	v.Observe(inStep(a, 9, id(10, 1, 0), id(10, 1, 1)))
	if f := v.Observe(inStep(a, 9, id(9, 1, 5))); f.OrderViolations != 1 || f.Duplicates != 0 {
		t.Fatalf("backwards across calls: %+v", f)
	}
	if f := v.Observe(inStep(a, 9, id(11, 1, 3), id(11, 1, 2))); f.OrderViolations != 1 {
		t.Fatalf("backwards within a batch: %+v", f)
	}
	if f := v.Observe(inStep(a, 9, id(12, 1, 0), id(12, 1, 0))); f.OrderViolations != 1 || f.Duplicates != 1 {
		t.Fatalf("repeat within a batch: %+v", f)
	}
	// Another stream of the same issuer, and calls without a stream, are
	// checked separately (or not at all).
	if f := v.Observe(inStep(a, 10, id(5, 1, 9))); f.OrderViolations != 0 {
		t.Fatalf("other stream: %+v", f)
	}
	if f := v.Observe(inStep(a, 0, id(4, 1, 9))); f.OrderViolations != 0 {
		t.Fatalf("no stream: %+v", f)
	}
	r := v.Result()
	if r.OrderViolations != 3 || r.Streams != 2 || len(r.OrderDetails) != 2 {
		t.Fatalf("order %d streams %d details %d", r.OrderViolations, r.Streams, len(r.OrderDetails))
	}
	want := StreamResult{Stream: 9, Calls: 4, IDs: 7, Violations: 3,
		First: OrderViolation{Stream: 9, Issuer: IssuerRef{"a", 0, 1}, Prev: sv(10, 1, 1), ID: sv(9, 1, 5), RefStart: at(9, 200*time.Microsecond)}}
	if !reflect.DeepEqual(r.ViolatedStreams, []StreamResult{want}) {
		t.Fatalf("streams %+v", r.ViolatedStreams)
	}
	if len(r.DuplicateDetails) != 1 || r.DuplicateDetails[0].First.Name != "a" ||
		r.DuplicateDetails[0].FirstRefStart != at(12, 200*time.Microsecond) || r.DuplicateDetails[0].FirstRefEnd != at(12, 300*time.Microsecond) {
		t.Fatalf("in-call duplicate detail %+v", r.DuplicateDetails)
	}
}

func TestSelfDuplicateAfterRewind(t *testing.T) {
	// A generator without a rewind check: its clock steps back 150 ms and
	// it re-issues IDs it issued 150 ms before.
	v := New(Config{})
	a := v.Issuer("bad", 0, 1)
	for i := range int64(300) {
		tick := 1000 + i
		if i >= 200 {
			tick -= 150
		}
		o := Observation{Issuer: a, Stream: 1, RefStart: at(1000+i, 200*time.Microsecond), RefEnd: at(1000+i, 300*time.Microsecond), IDs: []generator.ID{id(tick, 1, 0)}}
		v.Observe(o)
	}
	r := v.Result()
	if r.Duplicates != 100 || r.OrderViolations != 1 || r.DuplicatePairs[0].First != r.DuplicatePairs[0].Second {
		t.Fatalf("dups %d order %d pairs %+v", r.Duplicates, r.OrderViolations, r.DuplicatePairs)
	}
	d := r.DuplicateDetails[0]
	if d.ID != sv(1050, 1, 0) || d.SecondRefStart != at(1200, 200*time.Microsecond) {
		t.Fatalf("detail %+v", d)
	}
	if d.FirstRefStart > at(1050, 200*time.Microsecond) || d.FirstRefEnd < at(1050, 300*time.Microsecond) || d.FirstRefEnd >= d.SecondRefStart {
		t.Fatalf("first bracket [%v, %v] for a first issue at 1050 ms", time.Duration(d.FirstRefStart-epochNs), time.Duration(d.FirstRefEnd-epochNs))
	}
	// The ID's time lags the reference by 150 ms, less the tick.
	if r.Lag.Max != 149*time.Millisecond+200*time.Microsecond {
		t.Fatalf("lag %+v", r.Lag)
	}
}

func TestLeadBeyondBound(t *testing.T) {
	v := New(Config{Windows: []Window{{Name: "logical", Start: at(500, 0), End: at(600, 0)}}})
	a := v.Issuer("logical", 0, 1)
	// In step before 500 ms; from then on the IDs run 0..300 ms ahead.
	for i := range int64(100) {
		v.Observe(inStep(a, 1, id(400+i, 1, 0)))
	}
	for i := range int64(100) {
		lead := i * 3
		o := Observation{Issuer: a, Stream: 1, RefStart: at(500+i, 0), RefEnd: at(500+i, 100*time.Microsecond), IDs: []generator.ID{id(500+i+lead, 1, 0)}}
		v.Observe(o)
	}
	r := v.Result()
	wantMax := 297*time.Millisecond - 100*time.Microsecond
	if r.Lead.Max != wantMax || r.Issuers[0].MaxLead != wantMax || r.Windows[0].Lead.Max != wantMax {
		t.Fatalf("lead %+v issuer %v window %+v, want max %v", r.Lead, r.Issuers[0].MaxLead, r.Windows[0].Lead, wantMax)
	}
	// p99 of the window: rank 99 of 100 is i=98: 294 ms - 0.1 ms, to 1/64.
	p99 := 294*time.Millisecond - 100*time.Microsecond
	if r.Windows[0].Lead.P99 < p99 || r.Windows[0].Lead.P99 > p99+p99/64 {
		t.Fatalf("window p99 %v, want %v (+1/64)", r.Windows[0].Lead.P99, p99)
	}
	// Over the whole run, half the IDs were in step.
	if r.Lead.P50 != 0 || r.Lead.Count != 200 || r.Lag.Max != 0 {
		t.Fatalf("run lead %+v lag %+v", r.Lead, r.Lag)
	}
	if r.Lead.Max <= 200*time.Millisecond {
		t.Fatal("a 200 ms lead bound would pass")
	}
}

func TestAvailabilityGapsAndWaits(t *testing.T) {
	v := New(Config{})
	step := v.FaultWindow("step-back", at(1000, 0), at(1100, 0))
	open := v.FaultWindow("open", at(1050, 0), math.MaxInt64)
	a := v.Issuer("refuse", 0, 1)
	b := v.Issuer("wait", 0, 2)
	for i := range int64(200) {
		tick := 950 + i
		oa := inStep(a, 1, id(tick, 1, 0))
		if tick >= 1000 && tick < 1040 {
			oa.IDs, oa.Outcome = nil, OutcomeRefused // refuses for 40 ms
		}
		v.Observe(oa)
		ob := inStep(b, 2, id(tick, 2, 0))
		if tick == 1010 {
			ob.Wait = 25 * time.Millisecond
		}
		if tick == 1020 {
			ob.IDs, ob.Outcome, ob.Wait = nil, OutcomeWaitExceeded, time.Second
		}
		v.Observe(ob)
	}
	v.EndWindow(open, at(1150, 0))
	r := v.Result()
	if r.Calls.Total != 400 || r.Calls.OK != 359 || r.Calls.Refused != 40 || r.Calls.WaitExceeded != 1 {
		t.Fatalf("calls %+v", r.Calls)
	}
	w := r.Windows[step]
	if w.Calls.Total != 200 || w.Calls.OK != 159 || w.Calls.Availability() != 159.0/200 {
		t.Fatalf("window calls %+v", w.Calls)
	}
	if w.LongestGap != 2*time.Millisecond {
		t.Fatalf("window gap %v: node b kept the system up except at 1020 ms", w.LongestGap)
	}
	// Node a last succeeded at 999.3 ms, then at 1040.3 ms: within the
	// window that is 40 ms, over the run 41 ms.
	if w.LongestIssuerGap != 40*time.Millisecond || w.GapIssuer.Name != "refuse" {
		t.Fatalf("issuer gap %v by %v", w.LongestIssuerGap, w.GapIssuer)
	}
	if w.Wait.Max != time.Second || r.Wait.Max != time.Second || r.MaxWaitIssuer.Name != "wait" || r.MaxWaitAt != at(1020, 200*time.Microsecond) {
		t.Fatalf("waits %+v %+v %v %d", w.Wait, r.Wait, r.MaxWaitIssuer, r.MaxWaitAt)
	}
	if r.Issuers[0].LongestGap != 41*time.Millisecond || r.Issuers[1].MaxWait != time.Second {
		t.Fatalf("issuers %+v", r.Issuers)
	}
	if o := r.Windows[open]; o.Calls.Total != 0 {
		// Calls were fed before EndWindow, while the window was open: they count.
		if o.Calls.Total != 200 {
			t.Fatalf("open window calls %+v", o.Calls)
		}
	}
	// A window added after the fact still gets gap figures.
	late := v.FaultWindow("late", at(990, 0), at(1060, 0))
	r = v.Result()
	if g := r.Windows[late]; g.Calls.Total != 0 || g.LongestIssuerGap != 41*time.Millisecond {
		t.Fatalf("late window %+v", g)
	}
}

func TestOutcomeOf(t *testing.T) {
	cases := map[error]Outcome{
		nil:                            OutcomeOK,
		generator.ErrWaitExceeded:      OutcomeWaitExceeded,
		generator.ErrClockBackwards:    OutcomeRefused,
		generator.ErrLeadExceeded:      OutcomeRefused,
		generator.ErrFenced:            OutcomeRefused,
		generator.ErrClosed:            OutcomeRefused,
		errors.New("connection reset"): OutcomeError,
		&generator.RewindError{Err: generator.ErrWaitExceeded}: OutcomeWaitExceeded,
		fmt.Errorf("wrapped: %w", generator.ErrCheckpoint):     OutcomeRefused,
	}
	for err, want := range cases {
		if got := OutcomeOf(err); got != want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", err, got, want)
		}
	}
	for o := range numOutcomes + 1 {
		if o.String() == "" {
			t.Errorf("outcome %d has no name", o)
		}
	}
}

func TestRegister(t *testing.T) {
	v := New(Config{})
	a := v.Issuer("a", 0, 1)
	if v.Issuer("a", 0, 1) != a || v.Issuer("a", 1, 1) == a {
		t.Fatal("registration not idempotent per name and incarnation")
	}
	mustPanic(t, "worker mismatch", func() { v.Issuer("a", 0, 2) })
	mustPanic(t, "unknown issuer", func() { v.Observe(Observation{Issuer: 99}) })
	if s := (IssuerRef{Name: "a", Incarnation: 2}).String(); s != "a#2" {
		t.Fatal(s)
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s: no panic", what)
		}
	}()
	f()
}

func TestMixedLayouts(t *testing.T) {
	sony, _ := generator.LayoutByName("sonyflake")
	v := New(Config{})
	a := v.Register(IssuerSpec{Name: "sony", Worker: 5, Layout: sony})
	b := v.Issuer("classic", 0, 5)
	// Raw values collide across layouts: still a duplicate, exactly once.
	v.Observe(Observation{Issuer: a, IDs: []generator.ID{42, 43, 1 << 40}})
	if f := v.Observe(Observation{Issuer: b, IDs: []generator.ID{43, 44, 1 << 40, 1 << 40}}); f.Duplicates != 3 {
		t.Fatalf("found %+v", f)
	}
	// Sonyflake ticks are 10 ms: tick 100 starts 1 s after the epoch.
	s, _ := sony.Compose(100, 5, 0)
	a2 := v.Register(IssuerSpec{Name: "sony", Incarnation: 1, Worker: 5, Layout: sony})
	v.Observe(Observation{Issuer: a2, RefStart: epochNs + int64(400*time.Millisecond), RefEnd: epochNs + int64(400*time.Millisecond), IDs: []generator.ID{s}})
	if r := v.Result(); r.Issuers[2].MaxLead != 600*time.Millisecond {
		t.Fatalf("sonyflake lead %v", r.Issuers[2].MaxLead)
	}
}

// refModel is the dumb reference: a map from ID to its first issue.
type refModel struct {
	first   map[generator.ID]refFirst
	dups    int
	pairs   map[[2]IssuerID]uint64
	details []refDup
	order   int
	restart int
	last    map[uint64]generator.ID
	maxByIs map[IssuerID]int64
}

type refFirst struct {
	is         IssuerID
	start, end int64
}

type refDup struct {
	id     generator.ID
	first  refFirst
	second IssuerID
}

type testIssuer struct {
	name   string
	inc    int
	worker int64
}

func TestAgainstReferenceModel(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compareWithModel(t, seed) })
	}
}

// compareWithModel feeds a random run with clones, restarts, rewinds and
// random foreign IDs to a Verifier and to the reference model, and
// compares every count and every detail.
func compareWithModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	specs := []testIssuer{{"a", 0, 1}, {"b", 0, 2}, {"a-clone", 0, 1}, {"a", 1, 1}, {"b", 1, 2}, {"c", 0, 1023}}
	v := New(Config{MaxDetails: 1 << 20})
	ids := make([]IssuerID, len(specs))
	for i, s := range specs {
		ids[i] = v.Issuer(s.name, s.inc, s.worker)
	}
	m := refModel{first: map[generator.ID]refFirst{}, pairs: map[[2]IssuerID]uint64{}, last: map[uint64]generator.ID{}, maxByIs: map[IssuerID]int64{}}
	ticks := make([]int64, len(specs))
	for i := range ticks {
		ticks[i] = 1000 + r.Int64N(50)
	}
	now := int64(1000)
	for range 3000 {
		now += r.Int64N(2)
		k := r.IntN(len(specs))
		s := specs[k]
		var batch []generator.ID
		switch r.IntN(10) {
		case 0: // rewind
			ticks[k] -= r.Int64N(30)
		case 1: // foreign garbage, near other IDs
			batch = append(batch, generator.ID(r.Int64N(1<<20))+id(1000, s.worker, 0))
		}
		ticks[k] = max(ticks[k]+r.Int64N(3), 0)
		n := 1 + r.IntN(5)
		seq := r.Int64N(3)
		for j := range n {
			batch = append(batch, id(ticks[k], s.worker, seq+int64(j)))
		}
		stream := uint64(k + 1)
		if r.IntN(4) == 0 {
			stream = 0
		}
		o := Observation{Issuer: ids[k], Stream: stream, RefStart: at(now, 0), RefEnd: at(now, time.Duration(r.Int64N(int64(time.Millisecond)))), IDs: batch}
		v.Observe(o)
		m.observe(specs, ids, o)
	}
	res := v.Result()
	if int(res.Duplicates) != m.dups || int(res.OrderViolations) != m.order || int(res.RestartViolations) != m.restart {
		t.Fatalf("dups %d/%d order %d/%d restart %d/%d", res.Duplicates, m.dups, res.OrderViolations, m.order, res.RestartViolations, m.restart)
	}
	if int(res.Unique) != len(m.first) {
		t.Fatalf("unique %d, model %d", res.Unique, len(m.first))
	}
	gotPairs := map[[2]IssuerRef]uint64{}
	for _, p := range res.DuplicatePairs {
		gotPairs[[2]IssuerRef{p.First, p.Second}] = p.Count
	}
	ref := func(i IssuerID) IssuerRef { s := specs[i]; return IssuerRef{s.name, s.inc, s.worker} }
	for k, n := range m.pairs {
		if gotPairs[[2]IssuerRef{ref(k[0]), ref(k[1])}] != n {
			t.Fatalf("pair %v: %d, model %d", k, gotPairs[[2]IssuerRef{ref(k[0]), ref(k[1])}], n)
		}
	}
	if len(res.DuplicateDetails) != len(m.details) {
		t.Fatalf("details %d, model %d", len(res.DuplicateDetails), len(m.details))
	}
	for i, d := range res.DuplicateDetails {
		w := m.details[i]
		if d.ID != SnowflakeValue(w.id) || d.First != ref(w.first.is) || d.Second != ref(w.second) {
			t.Fatalf("detail %d: %+v, model %+v", i, d, w)
		}
		if d.FirstRefStart > w.first.start || d.FirstRefEnd < w.first.end {
			t.Fatalf("detail %d: bracket [%d, %d] misses the first call [%d, %d]", i, d.FirstRefStart, d.FirstRefEnd, w.first.start, w.first.end)
		}
	}
}

func (m *refModel) observe(specs []testIssuer, ids []IssuerID, o Observation) {
	me := specs[o.Issuer]
	floor := int64(-1)
	for i, s := range specs {
		if s.worker == me.worker && s.inc < me.inc {
			if mx, ok := m.maxByIs[ids[i]]; ok {
				floor = max(floor, mx)
			}
		}
	}
	for _, x := range o.IDs {
		if o.Stream != 0 {
			if last, ok := m.last[o.Stream]; ok && x <= last {
				m.order++
			}
			m.last[o.Stream] = x
		}
		if int64(x) <= floor {
			m.restart++
		}
		if f, ok := m.first[x]; ok {
			m.dups++
			m.pairs[[2]IssuerID{f.is, o.Issuer}]++
			m.details = append(m.details, refDup{id: x, first: f, second: o.Issuer})
			continue
		}
		m.first[x] = refFirst{is: o.Issuer, start: o.RefStart, end: o.RefEnd}
	}
	for _, x := range o.IDs {
		if mx, ok := m.maxByIs[o.Issuer]; !ok || int64(x) > mx {
			m.maxByIs[o.Issuer] = int64(x)
		}
	}
}

func TestDeterministic(t *testing.T) {
	run := func() Result {
		v := New(Config{Windows: []Window{{Name: "w", Start: at(1010, 0), End: at(1500, 0)}}})
		r := rand.New(rand.NewPCG(5, 5))
		var iss []IssuerID
		for i := range 8 {
			iss = append(iss, v.Issuer(fmt.Sprint("n", i%5), i/5, int64(i%4)))
		}
		for i := range 5000 {
			k := r.IntN(len(iss))
			tick := 1000 + int64(i/10) - r.Int64N(20)
			v.Observe(Observation{Issuer: iss[k], Stream: uint64(k + 1), RefStart: at(1000+int64(i/10), 0), RefEnd: at(1000+int64(i/10), 0),
				IDs: []generator.ID{id(tick, int64(k%4), r.Int64N(4))}, Outcome: Outcome(r.IntN(4)), Wait: time.Duration(r.Int64N(1e6))})
		}
		return v.Result()
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("equal inputs gave different results")
	}
	if a.Duplicates == 0 || a.OrderViolations == 0 || a.RestartViolations == 0 {
		t.Fatalf("the run should find something: %d %d %d", a.Duplicates, a.OrderViolations, a.RestartViolations)
	}
}

func TestConcurrentFeeders(t *testing.T) {
	c := NewConcurrent(Config{})
	const feeders, calls = 8, 500
	var iss []IssuerID
	for i := range feeders {
		iss = append(iss, c.Issuer(fmt.Sprint("n", i), 0, int64(i)))
	}
	w := c.FaultWindow("all", 0, math.MaxInt64)
	var wg sync.WaitGroup
	for i := range feeders {
		wg.Go(func() {
			for k := range int64(calls) {
				// Feeders 0 and 1 both issue node 0's IDs: a clone pair.
				node := int64(i)
				if i == 1 {
					node = 0
				}
				c.Observe(Observation{Issuer: iss[i], Stream: uint64(i + 1), RefStart: at(k, 0), RefEnd: at(k, 0), IDs: []generator.ID{id(1000+k, node, 0), id(1000+k, node, 1)}})
			}
		})
	}
	wg.Wait()
	c.EndWindow(w, at(calls, 0))
	r := c.Result()
	if r.IDs != feeders*calls*2 || r.Duplicates != calls*2 || r.OrderViolations != 0 || c.Progress().Duplicates != calls*2 {
		t.Fatalf("ids %d dups %d order %d", r.IDs, r.Duplicates, r.OrderViolations)
	}
	if c.Register(IssuerSpec{Name: "n0"}) != iss[0] {
		t.Fatal("re-register")
	}
}

func TestHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 99, 100, 1000, 12345} {
		var h, a, b hist
		vals := make([]int64, n)
		for i := range vals {
			switch r.IntN(3) {
			case 0:
				vals[i] = 0
			case 1:
				vals[i] = r.Int64N(100)
			default:
				vals[i] = r.Int64N(1 << 50)
			}
			if vals[i] > 0 {
				h.add(vals[i], 1)
				// Two halves merged give the same histogram.
				if i%2 == 0 {
					a.add(vals[i], 1)
				} else {
					b.add(vals[i], 1)
				}
			}
		}
		a.merge(&b)
		slices.Sort(vals)
		for _, q := range []float64{0.5, 0.99, 1} {
			rank := int(math.Ceil(q * float64(n)))
			want := vals[max(rank, 1)-1]
			got := h.quantile(q, uint64(n))
			if got < want || got > want+want/64 {
				t.Fatalf("n=%d q=%v: got %d, want %d (+1/64)", n, q, got, want)
			}
			if m := a.quantile(q, uint64(n)); m != got {
				t.Fatalf("n=%d q=%v: merged halves give %d, whole %d", n, q, m, got)
			}
		}
		if d := h.dist(uint64(n)); d.Max != time.Duration(vals[n-1]) || d.Count != uint64(n) {
			t.Fatalf("dist %+v, want max %d count %d", d, vals[n-1], n)
		}
		c := h.clone()
		h.reset()
		if h.dist(0) != (Dist{}) || c.dist(uint64(n)).Max != time.Duration(vals[n-1]) {
			t.Fatal("reset or clone")
		}
	}
	for i := 1; i < histBuckets; i++ {
		if histIndex(histUpper(i)) != i || histIndex(histUpper(i-1)+1) != i {
			t.Fatalf("bucket %d bounds wrong", i)
		}
	}
	var empty hist
	if empty.dist(0) != (Dist{}) || empty.dist(5) != (Dist{Count: 5}) {
		t.Fatal("empty")
	}
}

func TestLeadSaturates(t *testing.T) {
	// Garbage IDs and absurd reference times must not wrap around.
	v := New(Config{})
	a := v.Register(IssuerSpec{Name: "x", Layout: generator.Layout{TimeBits: 63}})
	v.Observe(Observation{Issuer: a, RefStart: math.MinInt64, RefEnd: math.MinInt64, IDs: []generator.ID{math.MaxInt64, -1}})
	v.Observe(Observation{Issuer: a, RefStart: math.MaxInt64, RefEnd: math.MaxInt64, IDs: []generator.ID{0}})
	v.Observe(Observation{Issuer: a, RefStart: math.MinInt64 + 5, RefEnd: math.MinInt64 + 5})
	v.Observe(Observation{Issuer: a, RefStart: math.MaxInt64 - 1, RefEnd: math.MaxInt64 - 1})
	r := v.Result()
	if r.Lead.Max != math.MaxInt64 || r.Lag.Max <= 0 || r.LongestGap <= 0 {
		t.Fatalf("lead %+v lag %+v", r.Lead, r.Lag)
	}
}
