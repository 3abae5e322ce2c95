package pgoracle

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify"
)

// admin connects to the test database or calls testenv.Missing.
func admin(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, DSN(""))
	if err != nil {
		testenv.Missing(t, "Postgres at %s (set %s): %v", DSN(""), EnvDSN, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// testSchema creates a schema of its own for the test and drops it after.
func testSchema(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	var b [4]byte
	crand.Read(b[:])
	name := "pgoracle_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())) + "_" + hex.EncodeToString(b[:])
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	id := pgx.Identifier{name}.Sanitize()
	if _, err := c.Exec(context.Background(), "CREATE SCHEMA "+id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Exec(context.Background(), "DROP SCHEMA "+id+" CASCADE") })
	return name
}

// workload returns per-source ID lists with injected duplicates: repeats
// within a call, across calls of one source, and across sources (a clone).
func workload(seed uint64, sources, calls, per int) (lists [][][]generator.ID, dups int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	l := generator.DefaultLayout()
	tick := l.TickOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	var all []generator.ID
	lists = make([][][]generator.ID, sources)
	for s := range sources {
		for c := range calls {
			call := make([]generator.ID, 0, per)
			for i := range per {
				id, _ := l.Compose(tick+int64(c), int64(s), int64(i))
				switch r := rng.IntN(1000); {
				case r < 3 && len(call) > 0: // within this call
					id = call[rng.IntN(len(call))]
					dups++
				case r < 6 && len(all) > 0: // anywhere earlier, any source
					id = all[rng.IntN(len(all))]
					dups++
				}
				call = append(call, id)
				all = append(all, id)
			}
			lists[s] = append(lists[s], call)
		}
	}
	return lists, dups
}

// TestAgreesWithVerifier feeds the same calls to the in-memory verifier, a
// plain map and the oracle, and checks all three count the same duplicates.
func TestAgreesWithVerifier(t *testing.T) {
	c := admin(t)
	schema := testSchema(t, c)
	for _, seed := range []uint64{1, 2, 3} {
		lists, injected := workload(seed, 3, 40, 500)
		o, err := New(context.Background(), Config{Schema: schema, BatchSize: 977, QueueDepth: 2, Writers: 2})
		if err != nil {
			t.Fatal(err)
		}
		v := verify.New(verify.Config{})
		ref := map[generator.ID]int{}
		var refDups uint64
		for s, calls := range lists {
			iss := v.Issuer("node", s, int64(s))
			for _, call := range calls {
				v.Observe(verify.Observation{Issuer: iss, IDs: call})
				if err := o.Add(int16(s), call); err != nil {
					t.Fatal(err)
				}
				for _, id := range call {
					if ref[id] > 0 {
						refDups++
					}
					ref[id]++
				}
			}
		}
		res, err := o.Finish(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		vr := v.Result()
		t.Logf("seed %d: %d IDs, injected %d, map %d, verifier %d, postgres %d (%d batches, copy %v, count %v)",
			seed, res.Submitted, injected, refDups, vr.Duplicates, res.Duplicates, res.Batches, res.CopyTime, res.CountTime)
		if res.Verdict != VerdictFail || res.Reason != "" {
			t.Fatalf("verdict %v (%s), want fail", res.Verdict, res.Reason)
		}
		if res.Duplicates != refDups || vr.Duplicates != refDups || res.Rows != res.Submitted || res.Written != res.Submitted {
			t.Fatalf("postgres %d, verifier %d, map %d duplicates; rows %d submitted %d written %d",
				res.Duplicates, vr.Duplicates, refDups, res.Rows, res.Submitted, res.Written)
		}
		if len(res.Details) == 0 || res.Details[0].Count < 2 || len(res.Details[0].Sources) != int(res.Details[0].Count) {
			t.Fatalf("details %+v", res.Details)
		}
		if n := ref[res.Details[0].ID]; int64(n) != res.Details[0].Count {
			t.Fatalf("detail %+v, map count %d", res.Details[0], n)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		var exists bool
		c.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", res.Table).Scan(&exists)
		if exists {
			t.Fatalf("table %s left behind", res.Table)
		}
	}
}

func TestPassOnUniqueIDs(t *testing.T) {
	c := admin(t)
	schema := testSchema(t, c)
	g, _ := generator.New(generator.Settings{Node: 1})
	defer g.Close()
	o, err := New(context.Background(), Config{Schema: schema, Table: "ids", BatchSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	buf := make([]generator.ID, 1000)
	for range 100 {
		n, err := g.NextN(buf)
		if err != nil {
			t.Fatal(err)
		}
		o.Add(0, buf[:n])
	}
	res, err := o.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictPass || res.Rows != 100000 || res.Duplicates != 0 || res.Table != `"`+schema+`"."ids"` {
		t.Fatalf("%+v", res)
	}
	if err := o.Add(0, buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Finish: %v", err)
	}
	if _, err := o.Finish(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Finish: %v", err)
	}
}

// TestBackendTerminatedIsUnknown kills a writer's backend mid-run: the
// oracle must report it could not judge, never pass.
func TestBackendTerminatedIsUnknown(t *testing.T) {
	c := admin(t)
	schema := testSchema(t, c)
	o, err := New(context.Background(), Config{Schema: schema, BatchSize: 1000, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	g, _ := generator.New(generator.Settings{Node: 2})
	defer g.Close()
	buf := make([]generator.ID, 1000)
	add := func(k int) {
		for range k {
			n, _ := g.NextN(buf)
			o.Add(0, buf[:n])
		}
	}
	add(5)
	waitFor(t, func() bool { return o.Progress().Written >= 5000 })
	for _, pid := range o.Backends() {
		var ok bool
		if err := c.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminating backend %d: %v %v", pid, ok, err)
		}
	}
	add(5)
	res, err := o.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnknown || !strings.Contains(res.Reason, "COPY") || res.Dropped == 0 {
		t.Fatalf("after a terminated backend: %v (%s), dropped %d", res.Verdict, res.Reason, res.Dropped)
	}
	t.Logf("verdict %v: %s", res.Verdict, res.Reason)
}

// TestBackpressure holds a lock on the table so COPY stalls: with the
// default blocking queue Add waits and reports it; with DropWhenFull it
// drops and the verdict is unknown.
func TestBackpressure(t *testing.T) {
	c := admin(t)
	schema := testSchema(t, c)
	for _, drop := range []bool{false, true} {
		o, err := New(context.Background(), Config{Schema: schema, BatchSize: 100, QueueDepth: 1, Writers: 1, DropWhenFull: drop})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(context.Background(), "LOCK TABLE "+o.Table()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		g, _ := generator.New(generator.Settings{Node: 3})
		buf := make([]generator.ID, 100)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 5 {
				n, _ := g.NextN(buf)
				o.Add(0, buf[:n])
			}
		}()
		if drop {
			<-done // never blocks
		} else {
			// One batch in COPY, one queued, the third Add blocks.
			waitFor(t, func() bool { return o.Progress().Queued == 1 })
			select {
			case <-done:
				t.Fatal("Add did not block on a full queue")
			default:
			}
		}
		tx.Rollback(context.Background())
		<-done
		res, err := o.Finish(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if drop {
			if res.Verdict != VerdictUnknown || res.Dropped == 0 || !strings.Contains(res.Reason, "dropped") {
				t.Fatalf("drop mode: %+v", res)
			}
		} else if res.Verdict != VerdictPass || res.BlockedAdds == 0 || res.Blocked <= 0 || res.Rows != 500 {
			t.Fatalf("block mode: %+v", res)
		}
		t.Logf("drop=%v: %v %s, dropped %d, blocked %d adds for %v", drop, res.Verdict, res.Reason, res.Dropped, res.BlockedAdds, res.Blocked)
		o.Close()
		g.Close()
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := New(ctx, Config{DSN: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("New on a closed port: %v, want ErrUnavailable naming the address", err)
	}
	if _, err := New(ctx, Config{DSN: "::not a dsn::"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad DSN: %v", err)
	}
	if _, err := New(ctx, Config{Writers: -1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad writers: %v", err)
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond) // polling the condition
	}
}

func TestTickets(t *testing.T) {
	admin(t)
	for _, tc := range []TicketConfig{{Batch: 1, Conns: 2, Duration: 200 * time.Millisecond}, {Batch: 1000, Conns: 1, Duration: 200 * time.Millisecond}} {
		r, err := Tickets(context.Background(), tc)
		if err != nil {
			t.Fatal(err)
		}
		if r.Calls == 0 || r.IDs != r.Calls*uint64(tc.Batch) || r.P50 <= 0 || r.P99 < r.P50 {
			t.Fatalf("%+v", r)
		}
		t.Log(r)
	}
	if _, err := Tickets(context.Background(), TicketConfig{DSN: "postgres://postgres@127.0.0.1:1/test?connect_timeout=2"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unreachable: %v", err)
	}
}
