package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
	"github.com/snowchaos/snowchaos/lease"
)

// TestProcessPostgresLease: process nodes lease their worker IDs from the
// real Postgres, in the run's own schema. A clone (another host, so
// another holder) gets another worker ID; a restart keeps the node's
// holder and gets its own worker ID back; EndRun drops the schema.
func TestProcessPostgresLease(t *testing.T) {
	conn, dsn := pgtest.Connect(t)
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	if !p.Info().Caps.SupportsLease(dsn) {
		t.Fatalf("process target does not support %s", dsn)
	}
	env := target.Env{Run: "lease-test/" + t.Name() + "/" + time.Now().String()}
	t.Cleanup(func() { p.EndRun(ctx, env.Run) }) // after the deferred Closes, also on failure
	s := spec("a", 5)
	s.Lease = dsn
	a, clone := startWithClone(t, p, s, env)

	schema := p.run(env.Run, scenario.LeasePostgres, dsn).schema
	holders := map[string]int64{}
	rows, err := conn.Query(ctx, "SELECT holder, worker_id FROM "+pgx.Identifier{schema, "worker_leases"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		var w int64
		if err := rows.Scan(&h, &w); err != nil {
			t.Fatal(err)
		}
		holders[h] = w
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(holders) != 2 {
		t.Fatalf("holders in %s: %v, want a's and the clone's", schema, holders)
	}
	for h, w := range holders {
		if !strings.HasPrefix(h, "a.") && !strings.HasPrefix(h, "a-clone.") {
			t.Fatalf("holder %q (worker %d): want the host name and the run tag", h, w)
		}
	}

	checkRestarts(t, a, clone, false)
	closeAndEnd(t, p, env, a, clone)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s still there after EndRun (%v)", schema, err)
	}
	p.EndRun(ctx, env.Run) // nothing left: a no-op
}

// TestProcessLeaseRefused: a node whose range holds no free worker ID
// fails to start with an error wrapping lease.ErrAllTaken, which the
// harness counts as a refused start. The test fills the rest of 41/10/12's
// 1024 worker IDs with squatters in one statement.
func TestProcessLeaseRefused(t *testing.T) {
	conn, dsn := pgtest.Connect(t)
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	env := target.Env{Run: "lease-refused/" + time.Now().String()}
	s := spec("a", 1)
	s.Lease = dsn
	a, err := p.Start(ctx, s, env)
	if err != nil {
		t.Fatal(err)
	}
	defer p.EndRun(ctx, env.Run)
	defer a.Close()
	tbl := pgx.Identifier{p.run(env.Run, scenario.LeasePostgres, dsn).schema, "worker_leases"}.Sanitize()
	if _, err := conn.Exec(ctx, "INSERT INTO "+tbl+" (worker_id, holder, token, leased_until, last_issued_ms) SELECT g, 'squatter-' || g, 1, now() + interval '1 hour', 0 FROM generate_series(0, 1023) g ON CONFLICT DO NOTHING"); err != nil {
		t.Fatal(err)
	}
	cs := s
	cs.Name, cs.Host = "a-clone", "a-clone"
	if _, err := p.Start(ctx, cs, env); !errors.Is(err, lease.ErrAllTaken) {
		t.Fatalf("clone with every worker ID taken: %v, want ErrAllTaken", err)
	}
}

// TestProcessLeaseUnsupported: settings serve has no flag for are refused,
// not ignored.
func TestProcessLeaseUnsupported(t *testing.T) {
	p := &Process{Binary: bin, Dir: t.TempDir()}
	s := spec("a", 1)
	s.Lease = "postgres://postgres@127.0.0.1:5432/test"
	s.WorkerRange = &lease.Range{Min: 0, Max: 3}
	if _, err := p.Start(context.Background(), s, target.Env{}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("worker range: %v", err)
	}
	s.WorkerRange, s.Lease = nil, "redis://h:1"
	if _, err := p.Start(context.Background(), s, target.Env{}); !errors.Is(err, target.ErrUnsupported) {
		t.Fatalf("unknown lease: %v", err)
	}
	// The negative control needs a -tags negativecontrols build: the
	// normal one says so instead of serving the safe behaviour.
	s.Lease, s.NoMarkWriteThrough = "postgres://postgres@127.0.0.1:5432/test", true
	if _, err := p.Start(context.Background(), s, target.Env{Run: "unsupported/" + t.Name()}); !errors.Is(err, target.ErrUnsupported) || !strings.Contains(err.Error(), "-tags negativecontrols") {
		t.Fatalf("mark_write_through: off on a normal build: %v", err)
	}
	caps := p.Info().Caps
	for v, ok := range map[string]bool{"": true, "none": true, "memory": false, "postgres://h/db": true, "etcd://h:2379": true, "redis://h:1": false} {
		if caps.SupportsLease(v) != ok {
			t.Errorf("SupportsLease(%q) = %v", v, !ok)
		}
	}
}

// postgresReachable reports whether the scenarios' Postgres answers;
// outside CI a missing one only skips the scenarios that need it.
func postgresReachable(t *testing.T) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("Postgres at %s: %v", pgtest.DSN(), err)
		}
		return false
	}
	c.Close(ctx)
	return true
}

// TestProcessPeerClockRefused: a process whose clock is 10 s behind the
// live node beside it is refused by serve's peer clock check, an error
// wrapping lease.ErrPeerClockSkew (the harness counts a refused start)
// with serve's message; with peer_clock_check: off (serve's
// --peer-clock-max-skew 0), or a bound above the skew, it starts.
func TestProcessPeerClockRefused(t *testing.T) {
	_, dsn := pgtest.Connect(t)
	ctx := context.Background()
	p := &Process{Binary: bin, Dir: t.TempDir()}
	env := target.Env{Run: "peer-clock/" + time.Now().String()}
	t.Cleanup(func() { p.EndRun(ctx, env.Run) })
	s := spec("a", 1)
	s.Lease = dsn
	a, err := p.Start(ctx, s, env)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	late := s
	late.Name, late.Host, late.Worker, late.ClockOffset = "late", "late", 2, -10*time.Second
	_, err = p.Start(ctx, late, env)
	if !errors.Is(err, lease.ErrPeerClockSkew) || !strings.Contains(err.Error(), "behind the median of its 1 live peers") || !strings.Contains(err.Error(), "released") {
		t.Fatalf("late process: %v, want refused by the peer clock check", err)
	}
	for i, ls := range []target.NodeSpec{{NoPeerClockCheck: true}, {PeerClockMaxSkew: 20 * time.Second}} {
		l := late
		l.Name, l.Host = fmt.Sprintf("late%d", i), fmt.Sprintf("late%d", i)
		l.NoPeerClockCheck, l.PeerClockMaxSkew = ls.NoPeerClockCheck, ls.PeerClockMaxSkew
		n, err := p.Start(ctx, l, env)
		if err != nil {
			t.Fatalf("%s (check off %v, bound %v): %v", l.Name, ls.NoPeerClockCheck, ls.PeerClockMaxSkew, err)
		}
		n.Close()
	}
}
