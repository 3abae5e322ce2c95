// Package leasetest is the conformance suite every lease.Registry passes
// unchanged (memory, Postgres, etcd), plus a manual clock for tests.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
)

// Backend is one fresh, empty registry under test.
type Backend struct {
	// Registry is the registry, in a namespace of its own (cleaned up by
	// the harness with t.Cleanup).
	Registry lease.Registry
	// Advance moves the store's time forward by d; nil when the store runs
	// on real time (the suite then waits, polling).
	Advance func(d time.Duration)
}

// Harness describes a backend to the suite.
type Harness struct {
	// New returns a fresh backend for one subtest.
	New func(t *testing.T) Backend
	// TTL is a lease duration the backend honours exactly enough for
	// expiry tests and short enough to wait out in real time (a few
	// seconds at most); leases that must not expire use 100*TTL.
	TTL time.Duration
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, b Backend)
	}{
		{"AcquireRenewRelease", testAcquireRenewRelease},
		{"InvalidRequests", testInvalid},
		{"SameHolderGetsItsIDBack", testSameHolder},
		{"LiveCloneGetsAnotherID", testClone},
		{"Preferred", testPreferred},
		{"DistinctHoldersAndAllTaken", testAllTaken},
		{"ExpiredTakenWithHigherToken", testExpiry},
		{"LastIssuedCarriedAcrossRelease", testLastIssued},
		{"ForgedLeaseIsLost", testForged},
		{"RecordKeepsTheMaximum", testRecordMax},
		{"RecordNeedsTheLease", testRecordFenced},
		{"RecordSurvivesCrashToNextHolder", testRecordSurvivesCrash},
		{"ConcurrentWritesNeverLowerTheMark", testRecordConcurrent},
		{"ConcurrentAcquirersNeverShare", testConcurrent},
		{"List", testList},
		{"ClockReports", testReports},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, h, h.New(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func req(holder string, r lease.Range, ttl time.Duration) lease.Request {
	return lease.Request{Holder: holder, Range: r, TTL: ttl}
}

func mustAcquire(t *testing.T, reg lease.Registry, rq lease.Request) lease.Lease {
	t.Helper()
	l, err := reg.Acquire(ctxT(t), rq)
	if err != nil {
		t.Fatalf("Acquire(%s, %v): %v", rq.Holder, rq.Range, err)
	}
	if l.Holder != rq.Holder || !rq.Range.Contains(l.WorkerID) || l.Token <= 0 {
		t.Fatalf("Acquire(%s, %v) = %+v: wrong holder, worker out of range or token <= 0", rq.Holder, rq.Range, l)
	}
	return l
}

// tryAcquire asks reg for a lease: true with it when granted, false when
// every worker ID is taken (ErrAllTaken); any other error fails t.
func tryAcquire(t *testing.T, reg lease.Registry, rq lease.Request) (lease.Lease, bool) {
	t.Helper()
	l, err := reg.Acquire(ctxT(t), rq)
	switch {
	case err == nil:
		return l, true
	case errors.Is(err, lease.ErrAllTaken):
		return lease.Lease{}, false
	}
	t.Fatalf("Acquire: %v", err)
	return lease.Lease{}, false
}

func testAcquireRenewRelease(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 3, Max: 6}
	l := mustAcquire(t, reg, req("node-a", r, long))
	if l.WorkerID != 3 {
		t.Errorf("first acquire on an empty store got worker %d, want the first free (3)", l.WorkerID)
	}
	if l.LastIssuedMs != 0 {
		t.Errorf("fresh worker has LastIssuedMs %d, want 0", l.LastIssuedMs)
	}
	if l.TTL < long {
		t.Errorf("lease TTL %v shorter than requested %v", l.TTL, long)
	}
	r2, err := reg.Renew(ctxT(t), l, 42)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if r2.WorkerID != l.WorkerID || r2.Token != l.Token || r2.Holder != l.Holder {
		t.Errorf("Renew changed identity: %+v -> %+v", l, r2)
	}
	if r2.LeasedUntil.Before(l.LeasedUntil) {
		t.Errorf("Renew moved expiry back: %v -> %v", l.LeasedUntil, r2.LeasedUntil)
	}
	if err := reg.Release(ctxT(t), r2, 43); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := reg.Release(ctxT(t), r2, 44); !errors.Is(err, lease.ErrLost) {
		t.Errorf("second Release: %v, want ErrLost", err)
	}
	if _, err := reg.Renew(ctxT(t), r2, 45); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew after Release: %v, want ErrLost", err)
	}
}

func testInvalid(t *testing.T, h Harness, b Backend) {
	for _, rq := range []lease.Request{
		{Holder: "", Range: lease.Range{Max: 3}, TTL: h.TTL},
		{Holder: "x", Range: lease.Range{Min: 4, Max: 3}, TTL: h.TTL},
		{Holder: "x", Range: lease.Range{Min: -1, Max: 3}, TTL: h.TTL},
		{Holder: "x", Range: lease.Range{Max: lease.MaxWorkerID + 1}, TTL: h.TTL},
		{Holder: "x", Range: lease.Range{Max: 3}, TTL: 0},
		{Holder: strings.Repeat("h", lease.MaxHolderLen+1), Range: lease.Range{Max: 3}, TTL: h.TTL},
		{Holder: "x", Range: lease.Range{Max: 3}, TTL: h.TTL, ClockMs: -1},
	} {
		if _, err := b.Registry.Acquire(ctxT(t), rq); !errors.Is(err, lease.ErrInvalidRequest) {
			t.Errorf("Acquire(%+v): %v, want ErrInvalidRequest", rq, err)
		}
	}
}

func testSameHolder(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 7}
	a := mustAcquire(t, reg, req("node-a", r, long))
	bb := mustAcquire(t, reg, req("node-b", r, long))
	if a.WorkerID == bb.WorkerID {
		t.Fatalf("two holders share worker %d", a.WorkerID)
	}
	for _, l := range []lease.Lease{a, bb} {
		if err := reg.Release(ctxT(t), l, 0); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	// A newcomer takes a never-used worker ID, not one that was released.
	c := mustAcquire(t, reg, req("node-c", r, long))
	if c.WorkerID == a.WorkerID || c.WorkerID == bb.WorkerID {
		t.Errorf("newcomer took released worker %d while never-used ones were free", c.WorkerID)
	}
	// Restarting nodes get their own worker IDs back, even when preferring another.
	rb := req("node-b", r, long)
	rb.Prefer = []int64{a.WorkerID}
	b2 := mustAcquire(t, reg, rb)
	a2 := mustAcquire(t, reg, req("node-a", r, long))
	if a2.WorkerID != a.WorkerID || b2.WorkerID != bb.WorkerID {
		t.Errorf("restart got workers a=%d b=%d, want their own a=%d b=%d", a2.WorkerID, b2.WorkerID, a.WorkerID, bb.WorkerID)
	}
	if a2.Token <= a.Token {
		t.Errorf("re-acquired token %d not above previous %d", a2.Token, a.Token)
	}
}

func testClone(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 3}
	a := mustAcquire(t, reg, req("node-a", r, long))
	clone := mustAcquire(t, reg, req("node-a", r, long))
	if clone.WorkerID == a.WorkerID {
		t.Fatalf("a second process with the same identity took over live worker %d", a.WorkerID)
	}
	if _, err := reg.Renew(ctxT(t), a, 1); err != nil {
		t.Errorf("the original lost its lease to a clone: %v", err)
	}
}

func testPreferred(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 10, Max: 20}
	rq := req("node-p", r, long)
	rq.Prefer = []int64{99, 17, 18}
	if l := mustAcquire(t, reg, rq); l.WorkerID != 17 {
		t.Errorf("prefer [99 17 18], got %d", l.WorkerID)
	}
	rq = req("node-q", r, long)
	rq.Prefer = []int64{17} // taken: falls back to the first free
	if l := mustAcquire(t, reg, rq); l.WorkerID != 10 {
		t.Errorf("preferred 17 (taken), got %d, want first free 10", l.WorkerID)
	}
	rq = req("node-r", r, long)
	rq.Prefer = []int64{99, -1} // out of range: ignored
	if l := mustAcquire(t, reg, rq); l.WorkerID != 11 {
		t.Errorf("preferred 99 (out of range), got %d, want 11", l.WorkerID)
	}
}

func testAllTaken(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 4, Max: 7}
	seen := map[int64]string{}
	for i := range 4 {
		holder := fmt.Sprintf("node-%d", i)
		l := mustAcquire(t, reg, req(holder, r, long))
		if prev, dup := seen[l.WorkerID]; dup {
			t.Fatalf("%s and %s share worker %d", prev, holder, l.WorkerID)
		}
		seen[l.WorkerID] = holder
	}
	_, err := reg.Acquire(ctxT(t), req("node-late", r, long))
	if !errors.Is(err, lease.ErrAllTaken) {
		t.Fatalf("fifth acquire on 4 workers: %v, want ErrAllTaken", err)
	}
	var ate *lease.AllTakenError
	if !errors.As(err, &ate) {
		t.Fatalf("error %v is not an *AllTakenError", err)
	}
	if ate.Range != r || len(ate.Holders) != 4 {
		t.Errorf("AllTakenError range %v holders %d, want %v and 4", ate.Range, len(ate.Holders), r)
	}
	msg := err.Error()
	for id, holder := range seen {
		if !strings.Contains(msg, fmt.Sprintf("%d=%s", id, holder)) {
			t.Errorf("error %q does not name %d=%s", msg, id, holder)
		}
	}
	if !strings.Contains(msg, r.String()) {
		t.Errorf("error %q does not name the range %v", msg, r)
	}
}

// eventually polls cond until it holds, advancing store time by step per
// attempt (or waiting in real time), within a generous deadline.
func eventually(t *testing.T, b Backend, step time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30*step + 20*time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if b.Advance != nil {
			b.Advance(step)
		} else {
			time.Sleep(step / 10)
		}
	}
}

func testExpiry(t *testing.T, h Harness, b Backend) {
	reg := b.Registry
	r := lease.Range{Min: 9, Max: 9}
	a := mustAcquire(t, reg, req("node-a", r, h.TTL))
	if _, err := reg.Renew(ctxT(t), a, 1234); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	var got lease.Lease
	eventually(t, b, h.TTL/4, "node-b to take the expired worker", func() bool {
		l, ok := tryAcquire(t, reg, req("node-b", r, 100*h.TTL))
		if ok {
			got = l
		}
		return ok
	})
	if got.WorkerID != 9 || got.Token <= a.Token {
		t.Errorf("takeover got worker %d token %d, want 9 with token above %d", got.WorkerID, got.Token, a.Token)
	}
	if got.LastIssuedMs != 1234 {
		t.Errorf("takeover LastIssuedMs %d, want 1234 carried across expiry", got.LastIssuedMs)
	}
	if _, err := reg.Renew(ctxT(t), a, 2000); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of the expired lease: %v, want ErrLost", err)
	}
	if err := reg.Release(ctxT(t), a, 2000); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release of the expired lease: %v, want ErrLost", err)
	}
	if _, err := reg.Renew(ctxT(t), got, 1); err != nil {
		t.Errorf("the new holder lost its lease: %v", err)
	}
	ls, err := reg.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.WorkerID == 9 && l.LastIssuedMs != 1234 {
			t.Errorf("a lost holder's Renew/Release changed LastIssuedMs to %d", l.LastIssuedMs)
		}
	}
}

func testLastIssued(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 2, Max: 2}
	a := mustAcquire(t, reg, req("node-a", r, long))
	if _, err := reg.Renew(ctxT(t), a, 5000); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Renew(ctxT(t), a, 4000); err != nil { // never moves back
		t.Fatal(err)
	}
	if err := reg.Release(ctxT(t), a, 4500); err != nil {
		t.Fatal(err)
	}
	c := mustAcquire(t, reg, req("node-c", r, long))
	if c.LastIssuedMs != 5000 {
		t.Errorf("next holder LastIssuedMs %d, want 5000 (the maximum recorded)", c.LastIssuedMs)
	}
	if err := reg.Release(ctxT(t), c, 7000); err != nil {
		t.Fatal(err)
	}
	a2 := mustAcquire(t, reg, req("node-a", r, long))
	if a2.LastIssuedMs != 7000 {
		t.Errorf("after release with 7000, LastIssuedMs %d", a2.LastIssuedMs)
	}
}

func testForged(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 1}
	a := mustAcquire(t, reg, req("node-a", r, long))
	for _, f := range []lease.Lease{
		func() lease.Lease { l := a; l.Token++; return l }(),
		func() lease.Lease { l := a; l.Holder = "node-x"; return l }(),
		func() lease.Lease { l := a; l.WorkerID = 1; return l }(),
	} {
		if _, err := reg.Renew(ctxT(t), f, 1); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew(%+v): %v, want ErrLost", f, err)
		}
		if err := reg.Release(ctxT(t), f, 1); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Release(%+v): %v, want ErrLost", f, err)
		}
	}
	if _, err := reg.Renew(ctxT(t), a, 1); err != nil {
		t.Errorf("real lease lost after forged calls: %v", err)
	}
}

func testConcurrent(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 15}
	const n = 32
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   = map[int64]string{}
		taken int
		start = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("racer-%02d", i)
			<-start
			l, err := reg.Acquire(ctxT(t), req(holder, r, long))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := got[l.WorkerID]; dup {
					t.Errorf("%s and %s share worker %d", prev, holder, l.WorkerID)
				}
				got[l.WorkerID] = holder
			case errors.Is(err, lease.ErrAllTaken):
				taken++
			default:
				t.Errorf("%s: %v", holder, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(got) != 16 || taken != n-16 {
		t.Errorf("%d acquired, %d all-taken; want 16 and %d", len(got), taken, n-16)
	}
}

func testList(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 3}
	a := mustAcquire(t, reg, req("node-a", r, long))
	bb := mustAcquire(t, reg, req("node-b", r, long))
	if err := reg.Release(ctxT(t), bb, 777); err != nil {
		t.Fatal(err)
	}
	ls, err := reg.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]lease.Lease{}
	for i, l := range ls {
		if i > 0 && ls[i-1].WorkerID >= l.WorkerID {
			t.Errorf("List not ordered by worker ID: %v", ls)
		}
		byID[l.WorkerID] = l
	}
	la, ok := byID[a.WorkerID]
	if !ok || la.Holder != "node-a" || la.Token != a.Token {
		t.Errorf("List entry for worker %d = %+v, want holder node-a token %d", a.WorkerID, la, a.Token)
	}
	lb, ok := byID[bb.WorkerID]
	if !ok || lb.Holder != "node-b" || lb.LastIssuedMs != 777 {
		t.Errorf("List entry for released worker %d = %+v, want holder node-b last issued 777", bb.WorkerID, lb)
	}
	if !la.LeasedUntil.After(lb.LeasedUntil) || !lb.ExpiredAt(la.LeasedUntil) || la.ExpiredAt(lb.LeasedUntil) {
		t.Errorf("held lease expiry %v not after released lease expiry %v", la.LeasedUntil, lb.LeasedUntil)
	}
	if d := la.LeasedUntil.Sub(a.LeasedUntil); d < -time.Second || d > time.Second {
		t.Errorf("List expiry %v far from the granted %v", la.LeasedUntil, a.LeasedUntil)
	}
}

// storedMark returns the LastIssuedMs List reports for worker id.
func storedMark(t *testing.T, reg lease.Registry, id int64) int64 {
	t.Helper()
	ls, err := reg.List(ctxT(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, l := range ls {
		if l.WorkerID == id {
			return l.LastIssuedMs
		}
	}
	t.Fatalf("List has no entry for worker %d: %+v", id, ls)
	return 0
}

func testRecordMax(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 5, Max: 5}
	a := mustAcquire(t, reg, req("node-a", r, long))
	for _, v := range []int64{5000, 4000, 5000} {
		if err := reg.Record(ctxT(t), a, v); err != nil {
			t.Fatalf("Record(%d): %v", v, err)
		}
	}
	if got := storedMark(t, reg, 5); got != 5000 {
		t.Errorf("after Record 5000, 4000, 5000: stored %d, want 5000 (never moves back)", got)
	}
	nl, err := reg.Renew(ctxT(t), a, 3000)
	if err != nil {
		t.Fatal(err)
	}
	if nl.LastIssuedMs != 5000 {
		t.Errorf("Renew with 3000 after Record 5000 returned LastIssuedMs %d, want 5000", nl.LastIssuedMs)
	}
	if err := reg.Record(ctxT(t), nl, 6000); err != nil {
		t.Fatalf("Record with the renewed lease: %v", err)
	}
	if err := reg.Release(ctxT(t), nl, 1); err != nil {
		t.Fatal(err)
	}
	if c := mustAcquire(t, reg, req("node-c", r, long)); c.LastIssuedMs != 6000 {
		t.Errorf("next holder LastIssuedMs %d, want 6000 (recorded)", c.LastIssuedMs)
	}
}

func testRecordFenced(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 1}
	a := mustAcquire(t, reg, req("node-a", r, long))
	if err := reg.Record(ctxT(t), a, 100); err != nil {
		t.Fatal(err)
	}
	for _, f := range []lease.Lease{
		func() lease.Lease { l := a; l.Token++; return l }(),
		func() lease.Lease { l := a; l.Holder = "node-x"; return l }(),
		func() lease.Lease { l := a; l.WorkerID = 1; return l }(),
	} {
		if err := reg.Record(ctxT(t), f, 900); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Record(%+v): %v, want ErrLost", f, err)
		}
	}
	if got := storedMark(t, reg, a.WorkerID); got != 100 {
		t.Errorf("forged Records changed the mark to %d, want 100", got)
	}
	if err := reg.Release(ctxT(t), a, 200); err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(ctxT(t), a, 900); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Record after Release: %v, want ErrLost", err)
	}
	// The next holder of the worker ID takes it over; the old lease still
	// cannot record, the new one can.
	rq := req("node-b", r, long)
	rq.Prefer = []int64{a.WorkerID}
	nb := mustAcquire(t, reg, rq)
	if nb.WorkerID != a.WorkerID || nb.LastIssuedMs != 200 {
		t.Fatalf("next holder got %+v, want worker %d with LastIssuedMs 200", nb, a.WorkerID)
	}
	if err := reg.Record(ctxT(t), a, 900); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Record by the previous holder: %v, want ErrLost", err)
	}
	if got := storedMark(t, reg, a.WorkerID); got != 200 {
		t.Errorf("the previous holder's Record changed the mark to %d, want 200", got)
	}
	if err := reg.Record(ctxT(t), nb, 300); err != nil {
		t.Errorf("the holder's Record: %v", err)
	}
}

// testRecordSurvivesCrash: a holder records its mark and then neither
// renews nor releases (it crashed). Recording does not keep the lease
// alive: it expires on time, Record then fails, and the next holder gets
// the recorded mark.
func testRecordSurvivesCrash(t *testing.T, h Harness, b Backend) {
	reg := b.Registry
	r := lease.Range{Min: 8, Max: 8}
	a := mustAcquire(t, reg, req("node-a", r, h.TTL))
	if err := reg.Record(ctxT(t), a, 4321); err != nil {
		t.Fatal(err)
	}
	var got lease.Lease
	recorded := 0
	eventually(t, b, h.TTL/4, "the crashed holder's lease to expire while it records", func() bool {
		switch err := reg.Record(ctxT(t), a, 4000); {
		case err == nil:
			recorded++
		case !errors.Is(err, lease.ErrLost):
			t.Fatalf("Record: %v", err)
		}
		l, ok := tryAcquire(t, reg, req("node-b", r, 100*h.TTL))
		if ok {
			got = l
		}
		return ok
	})
	if recorded == 0 {
		t.Errorf("no Record succeeded while the lease was held")
	}
	if got.LastIssuedMs != 4321 {
		t.Errorf("next holder LastIssuedMs %d, want 4321 recorded by the crashed holder", got.LastIssuedMs)
	}
	if err := reg.Record(ctxT(t), a, 9999); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Record of the expired lease: %v, want ErrLost", err)
	}
	if m := storedMark(t, reg, 8); m != 4321 {
		t.Errorf("stored mark %d after the expired holder's Record, want 4321", m)
	}
}

// testRecordConcurrent races Records of rising marks against Renews of
// lower ones on one lease: the stored mark ends at the highest.
func testRecordConcurrent(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	a := mustAcquire(t, reg, req("node-a", lease.Range{Min: 6, Max: 6}, long))
	const writers, each = 4, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := reg.Record(ctxT(t), a, int64(1000*(i+1)+w)); err != nil {
					t.Errorf("Record: %v", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range each / 2 {
				if _, err := reg.Renew(ctxT(t), a, int64(i)); err != nil {
					t.Errorf("Renew: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := storedMark(t, reg, 6), int64(1000*each+writers-1); got != want {
		t.Errorf("stored mark %d after concurrent writes, want the highest %d", got, want)
	}
}

// reportAge is how long to let a clock report age in testReports: well
// above every backend's ReportAgeError (etcd's half second).
const reportAge = 1500 * time.Millisecond

// span is a stretch of store time known to lie between Min and Max.
type span struct{ Min, Max time.Duration }

// listEntry lists the store and returns worker id's entry, with the window
// of store time the List call's now lies in, measured from since: for a
// store on real time, the real time from since's start (its earliest) and
// end (its latest); for a manual one, exactly the time it was advanced.
func listEntry(t *testing.T, b Backend, id int64, since [2]time.Time, advanced time.Duration) (lease.Lease, span) {
	t.Helper()
	l0 := time.Now()
	ls, err := b.Registry.List(ctxT(t))
	l1 := time.Now()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	w := span{advanced, advanced}
	if b.Advance == nil {
		w = span{l0.Sub(since[1]), l1.Sub(since[0])}
	}
	for _, l := range ls {
		if l.WorkerID == id {
			return l, w
		}
	}
	t.Fatalf("List has no entry for worker %d: %+v", id, ls)
	return lease.Lease{}, w
}

// checkAge checks that l's ReportAge lies in w, give or take its
// ReportAgeError and a millisecond of rounding.
func checkAge(t *testing.T, what string, l lease.Lease, w span) {
	t.Helper()
	slack := l.ReportAgeError + time.Millisecond
	if l.ReportAgeError < 0 || l.ReportAgeError > time.Second {
		t.Errorf("%s: ReportAgeError %v outside [0, 1s]", what, l.ReportAgeError)
	}
	if l.ReportAge < w.Min-slack || l.ReportAge > w.Max+slack {
		t.Errorf("%s: ReportAge %v, want within [%v, %v] (the store time since the report, give or take ReportAgeError %v)",
			what, l.ReportAge, w.Min, w.Max, l.ReportAgeError)
	}
}

// letAge lets store time pass by reportAge: advancing a manual store
// clock, or waiting for real time to pass (the thing under test is a
// duration of real time).
func letAge(b Backend) time.Duration {
	if b.Advance != nil {
		b.Advance(reportAge)
		return reportAge
	}
	time.Sleep(reportAge)
	return 0
}

// testReports checks the clock reports: an acquisition's and a renewal's
// report is stored with its store time, List tells each held lease's
// report and its age by the store's clock (the holder's clock now is
// about ReportedMs+ReportAge), Record leaves it, and released or expired
// leases carry none.
func testReports(t *testing.T, h Harness, b Backend) {
	reg, long := b.Registry, 100*h.TTL
	r := lease.Range{Min: 0, Max: 3}
	const clockA = int64(1767225600000) // node-a's own clock, 2026-01-01
	rq := req("node-a", r, long)
	rq.ClockMs = clockA
	t0 := time.Now()
	a := mustAcquire(t, reg, rq)
	acquired := [2]time.Time{t0, time.Now()}
	if a.ReportedMs != clockA {
		t.Errorf("Acquire with ClockMs %d returned ReportedMs %d", clockA, a.ReportedMs)
	}
	silent := mustAcquire(t, reg, req("node-b", r, long)) // reports nothing
	l, w := listEntry(t, b, a.WorkerID, acquired, 0)
	if l.ReportedMs != clockA {
		t.Fatalf("List: worker %d ReportedMs %d, want the acquisition's %d", a.WorkerID, l.ReportedMs, clockA)
	}
	checkAge(t, "fresh acquisition", l, w)
	advanced := letAge(b)
	l, w = listEntry(t, b, a.WorkerID, acquired, advanced)
	if l.ReportedMs != clockA {
		t.Errorf("List after %v: ReportedMs %d, want %d", reportAge, l.ReportedMs, clockA)
	}
	checkAge(t, "aged acquisition", l, w)
	if c, ok := l.EstimatedClock(); !ok || c != time.UnixMilli(clockA).Add(l.ReportAge) {
		t.Errorf("EstimatedClock = %v, %v; want the report plus its age", c, ok)
	}
	if l, _ := listEntry(t, b, silent.WorkerID, acquired, 0); l.ReportedMs != 0 || l.ReportAge != 0 {
		t.Errorf("a lease acquired without a report lists ReportedMs %d, ReportAge %v", l.ReportedMs, l.ReportAge)
	}

	// A renewal replaces the report; its age starts again.
	const clockA2 = clockA + 60_000
	a.ReportedMs = clockA2
	t2 := time.Now()
	nl, err := reg.Renew(ctxT(t), a, 10)
	renewed := [2]time.Time{t2, time.Now()}
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if nl.ReportedMs != clockA2 {
		t.Errorf("Renew with ReportedMs %d returned %d", clockA2, nl.ReportedMs)
	}
	l, w = listEntry(t, b, a.WorkerID, renewed, 0)
	if l.ReportedMs != clockA2 {
		t.Errorf("List after Renew: ReportedMs %d, want %d", l.ReportedMs, clockA2)
	}
	checkAge(t, "renewal", l, w)
	// Record writes the mark, not a report.
	if err := reg.Record(ctxT(t), nl, 20); err != nil {
		t.Fatalf("Record: %v", err)
	}
	if l, _ = listEntry(t, b, a.WorkerID, renewed, 0); l.ReportedMs != clockA2 {
		t.Errorf("List after Record: ReportedMs %d, want the renewal's %d", l.ReportedMs, clockA2)
	}
	// A released lease has no report.
	if err := reg.Release(ctxT(t), nl, 30); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if l, _ = listEntry(t, b, a.WorkerID, renewed, 0); l.ReportedMs != 0 || l.ReportAge != 0 {
		t.Errorf("released lease lists ReportedMs %d, ReportAge %v; want none", l.ReportedMs, l.ReportAge)
	}
	// Nor has an expired one.
	rq = req("node-c", lease.Range{Min: 7, Max: 7}, h.TTL)
	rq.ClockMs = clockA
	c := mustAcquire(t, reg, rq)
	eventually(t, b, h.TTL/4, "the expired lease to list no report", func() bool {
		l, _ := listEntry(t, b, c.WorkerID, renewed, 0)
		return l.ReportedMs == 0 && l.ReportAge == 0
	})
}
