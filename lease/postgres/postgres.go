// Package postgres is a lease.Registry on a PostgreSQL table:
//
//	worker_leases(worker_id integer PRIMARY KEY CHECK (worker_id BETWEEN 0 AND max),
//	              holder text, token bigint, leased_until timestamptz, last_issued_ms bigint,
//	              reported_ms bigint, reported_at timestamptz)
//
// The table (and its schema) is created or migrated on start, under an
// advisory lock so that concurrent starts are safe. A claim is one atomic
// INSERT ... ON CONFLICT DO UPDATE WHERE expired statement; the store's
// now() decides expiry. Each claim and renewal stores the holder's clock
// report (reported_ms) with the store's now() (reported_at); List computes
// each report's age on the server, now() - reported_at, exactly.
package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snowchaos/snowchaos/lease"
)

var _ lease.Registry = (*Registry)(nil)

// Options name the table. The zero value is the default table
// public.worker_leases accepting every worker ID up to lease.MaxWorkerID.
type Options struct {
	// Schema is created if missing; zero: "public".
	Schema string
	// Table is created if missing; zero: "worker_leases".
	Table string
	// MaxWorkerID is the table's CHECK bound on worker_id; zero:
	// lease.MaxWorkerID. Changing it migrates the constraint.
	MaxWorkerID int64
	// NoMigrate skips creating and migrating the table, for read-only
	// tools (snowchaos leases list); calls then fail if it is missing.
	NoMigrate bool
}

// Registry is a lease.Registry on PostgreSQL. Each call is one statement
// (Acquire may retry under contention); it is safe for concurrent use.
type Registry struct {
	pool    *pgxpool.Pool
	ownPool bool
	opts    Options
	table   string // quoted schema.table
	q       queries
}

type queries struct{ acquire, held, renew, record, release, list string }

func init() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		lease.RegisterScheme(scheme, openURL)
	}
}

// openURL opens the store a postgres:// URL names, for lease.Open: the
// table o.Schema.o.Table, migrated unless o.ReadOnly.
func openURL(ctx context.Context, u string, o lease.OpenOptions) (lease.Registry, func() error, error) {
	r, err := Open(ctx, u, Options{Schema: o.Schema, Table: o.Table, NoMigrate: o.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	return r, func() error { r.Close(); return nil }, nil
}

// Open connects to dsn (a pgx connection string or URL), migrates the
// schema and returns a Registry that owns the connection pool. Close it.
func Open(ctx context.Context, dsn string, opts Options) (*Registry, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: dsn: %w", lease.ErrInvalidConfig, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	r, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	r.ownPool = true
	return r, nil
}

// New migrates the schema on pool (unless opts.NoMigrate) and returns a
// Registry using it; the caller keeps ownership of pool.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Registry, error) {
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	if opts.Table == "" {
		opts.Table = "worker_leases"
	}
	if opts.MaxWorkerID == 0 {
		opts.MaxWorkerID = lease.MaxWorkerID
	}
	if opts.MaxWorkerID < 0 || opts.MaxWorkerID > lease.MaxWorkerID {
		return nil, fmt.Errorf("%w: max worker ID %d outside [0,%d]", lease.ErrInvalidConfig, opts.MaxWorkerID, lease.MaxWorkerID)
	}
	r := &Registry{pool: pool, opts: opts, table: pgx.Identifier{opts.Schema, opts.Table}.Sanitize()}
	// cols are the columns every query returns (scanLease): the report
	// and its age only while the lease is held.
	cols := `worker_id, holder, token, leased_until, last_issued_ms,
	CASE WHEN leased_until > now() THEN reported_ms ELSE 0 END,
	CASE WHEN leased_until > now() AND reported_ms > 0
		THEN (extract(epoch FROM now() - reported_at) * 1000000)::bigint ELSE 0 END`
	r.q = queries{
		acquire: `WITH cand AS (
	SELECT g.id
	FROM generate_series($2::int, $3::int) AS g(id)
	LEFT JOIN ` + r.table + ` AS l ON l.worker_id = g.id
	WHERE l.worker_id IS NULL OR l.leased_until <= now()
	ORDER BY
		CASE WHEN l.holder = $1 THEN 0 WHEN g.id = ANY($4::int[]) THEN 1 WHEN l.worker_id IS NULL THEN 2 ELSE 3 END,
		CASE WHEN l.holder = $1 THEN l.leased_until END DESC NULLS LAST,
		array_position($4::int[], g.id),
		l.leased_until ASC NULLS FIRST,
		g.id
	LIMIT 1
)
INSERT INTO ` + r.table + ` AS t (worker_id, holder, token, leased_until, last_issued_ms, reported_ms, reported_at)
SELECT id, $1, 1, now() + $5::bigint * interval '1 microsecond', 0, $6, now() FROM cand
ON CONFLICT (worker_id) DO UPDATE
	SET holder = EXCLUDED.holder, token = t.token + 1, leased_until = EXCLUDED.leased_until,
		reported_ms = EXCLUDED.reported_ms, reported_at = EXCLUDED.reported_at
	WHERE t.leased_until <= now()
RETURNING ` + cols,
		held: `SELECT ` + cols + ` FROM ` + r.table + `
WHERE worker_id BETWEEN $1 AND $2 AND leased_until > now() ORDER BY worker_id`,
		renew: `UPDATE ` + r.table + `
SET leased_until = now() + $5::bigint * interval '1 microsecond', last_issued_ms = greatest(last_issued_ms, $4),
	reported_ms = $6, reported_at = now()
WHERE worker_id = $1 AND holder = $2 AND token = $3 AND leased_until > now()
RETURNING ` + cols,
		record: `UPDATE ` + r.table + `
SET last_issued_ms = greatest(last_issued_ms, $4)
WHERE worker_id = $1 AND holder = $2 AND token = $3 AND leased_until > now()`,
		release: `UPDATE ` + r.table + `
SET leased_until = now(), last_issued_ms = greatest(last_issued_ms, $4)
WHERE worker_id = $1 AND holder = $2 AND token = $3 AND leased_until > now()`,
		list: `SELECT ` + cols + ` FROM ` + r.table + ` ORDER BY worker_id`,
	}
	if !opts.NoMigrate {
		if err := r.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Close closes the pool if Open created it.
func (r *Registry) Close() {
	if r.ownPool {
		r.pool.Close()
	}
}

// Table returns the quoted, schema-qualified table name.
func (r *Registry) Table() string { return r.table }

// Migrate creates the schema and table if missing and brings them to the
// current shape (columns, worker_id range check). It is idempotent and
// safe under concurrent starts (a transaction-scoped advisory lock
// serialises them). New calls it.
func (r *Registry) Migrate(ctx context.Context) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return lease.Unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	check := fmt.Sprintf("%s_worker_range_%d", r.opts.Table, r.opts.MaxWorkerID)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('snowchaos.lease:' || $1))`, r.table); err != nil {
		return fmt.Errorf("lease/postgres: migrate %s: %w", r.table, lease.Unavailable(err))
	}
	// CREATE SCHEMA IF NOT EXISTS needs the database's CREATE privilege
	// even when the schema exists: create it only when missing.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, r.opts.Schema).Scan(&exists); err != nil {
		return fmt.Errorf("lease/postgres: migrate %s: %w", r.table, lease.Unavailable(err))
	}
	var stmts []string
	if !exists {
		stmts = append(stmts, `CREATE SCHEMA `+pgx.Identifier{r.opts.Schema}.Sanitize())
	}
	stmts = append(stmts,
		`CREATE TABLE IF NOT EXISTS `+r.table+` (
	worker_id integer PRIMARY KEY,
	holder text NOT NULL,
	token bigint NOT NULL,
	leased_until timestamptz NOT NULL,
	last_issued_ms bigint NOT NULL DEFAULT 0
)`,
		`ALTER TABLE `+r.table+` ADD COLUMN IF NOT EXISTS last_issued_ms bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE `+r.table+` ADD COLUMN IF NOT EXISTS reported_ms bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE `+r.table+` ADD COLUMN IF NOT EXISTS reported_at timestamptz NOT NULL DEFAULT now()`,
	)
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("lease/postgres: migrate %s: %w", r.table, lease.Unavailable(err))
		}
	}
	// Replace the range check when the configured bound changed.
	rows, err := tx.Query(ctx, `SELECT conname FROM pg_constraint
WHERE conrelid = $1::regclass AND contype = 'c' AND conname LIKE $2`, r.table, r.opts.Table+`\_worker\_range\_%`)
	if err != nil {
		return lease.Unavailable(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return lease.Unavailable(err)
	}
	have := false
	for _, n := range names {
		if n == check {
			have = true
			continue
		}
		if _, err := tx.Exec(ctx, `ALTER TABLE `+r.table+` DROP CONSTRAINT `+pgx.Identifier{n}.Sanitize()); err != nil {
			return lease.Unavailable(err)
		}
	}
	if !have {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s CHECK (worker_id BETWEEN 0 AND %d)`,
			r.table, pgx.Identifier{check}.Sanitize(), r.opts.MaxWorkerID)); err != nil {
			return fmt.Errorf("lease/postgres: migrate %s: %w", r.table, lease.Unavailable(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return lease.Unavailable(err)
	}
	return nil
}

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

func scanLease(row pgx.CollectableRow) (lease.Lease, error) {
	var (
		l   lease.Lease
		age int64 // µs
	)
	err := row.Scan(&l.WorkerID, &l.Holder, &l.Token, &l.LeasedUntil, &l.LastIssuedMs, &l.ReportedMs, &age)
	l.ReportAge = time.Duration(age) * time.Microsecond
	return l, err
}

// Acquire implements lease.Registry. Each attempt is one atomic statement;
// when a concurrent acquirer wins the chosen slot it tries again.
func (r *Registry) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := req.Validate(); err != nil {
		return lease.Lease{}, err
	}
	if req.Range.Max > r.opts.MaxWorkerID {
		return lease.Lease{}, fmt.Errorf("%w: range %v beyond the table's maximum worker ID %d", lease.ErrInvalidRequest, req.Range, r.opts.MaxWorkerID)
	}
	ttl := micros(req.TTL)
	pref := make([]int32, 0, len(req.Prefer))
	for _, p := range req.Prefer {
		if req.Range.Contains(p) {
			pref = append(pref, int32(p))
		}
	}
	for attempt := 0; ; attempt++ {
		rows, err := r.pool.Query(ctx, r.q.acquire, req.Holder, req.Range.Min, req.Range.Max, pref, ttl, req.ClockMs)
		if err != nil {
			return lease.Lease{}, lease.Unavailable(err)
		}
		got, err := pgx.CollectRows(rows, scanLease)
		if err != nil {
			return lease.Lease{}, lease.Unavailable(err)
		}
		if len(got) == 1 {
			got[0].TTL = time.Duration(ttl) * time.Microsecond
			return got[0], nil
		}
		// Nothing claimed: either all taken, or a concurrent acquirer won
		// the slot this statement chose.
		rows, err = r.pool.Query(ctx, r.q.held, req.Range.Min, req.Range.Max)
		if err != nil {
			return lease.Lease{}, lease.Unavailable(err)
		}
		held, err := pgx.CollectRows(rows, scanLease)
		if err != nil {
			return lease.Lease{}, lease.Unavailable(err)
		}
		if int64(len(held)) >= req.Range.Len() || attempt > int(req.Range.Len())+64 {
			return lease.Lease{}, &lease.AllTakenError{Range: req.Range, Holders: held}
		}
	}
}

// Renew implements lease.Registry, extending by l.TTL.
func (r *Registry) Renew(ctx context.Context, l lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	if l.TTL <= 0 {
		return lease.Lease{}, fmt.Errorf("%w: lease without TTL", lease.ErrInvalidRequest)
	}
	rows, err := r.pool.Query(ctx, r.q.renew, l.WorkerID, l.Holder, l.Token, lastIssuedMs, micros(l.TTL), max(l.ReportedMs, 0))
	if err != nil {
		return lease.Lease{}, lease.Unavailable(err)
	}
	got, err := pgx.CollectRows(rows, scanLease)
	if err != nil {
		return lease.Lease{}, lease.Unavailable(err)
	}
	if len(got) == 0 {
		return lease.Lease{}, lost(l)
	}
	got[0].TTL = l.TTL
	return got[0], nil
}

// Record implements lease.Registry: one UPDATE fenced by the holder, the
// token and the store's now().
func (r *Registry) Record(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	return r.fenced(ctx, r.q.record, l, lastIssuedMs)
}

// Release implements lease.Registry.
func (r *Registry) Release(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	return r.fenced(ctx, r.q.release, l, lastIssuedMs)
}

// fenced runs the UPDATE q for l (worker ID, holder, token, lastIssuedMs:
// $1 to $4), fenced in its WHERE by them; no row changed is ErrLost.
func (r *Registry) fenced(ctx context.Context, q string, l lease.Lease, lastIssuedMs int64) error {
	tag, err := r.pool.Exec(ctx, q, l.WorkerID, l.Holder, l.Token, lastIssuedMs)
	if err != nil {
		return lease.Unavailable(err)
	}
	if tag.RowsAffected() == 0 {
		return lost(l)
	}
	return nil
}

// lost is the ErrLost for l.
func lost(l lease.Lease) error {
	return fmt.Errorf("%w: worker %d token %d", lease.ErrLost, l.WorkerID, l.Token)
}

// List implements lease.Registry. Report ages are the server's
// now() - reported_at, to the microsecond (ReportAgeError 0).
func (r *Registry) List(ctx context.Context) ([]lease.Lease, error) {
	rows, err := r.pool.Query(ctx, r.q.list)
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	ls, err := pgx.CollectRows(rows, scanLease)
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	return ls, nil
}

// Now returns the store's clock (now()), for showing expiry.
func (r *Registry) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := r.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Time{}, lease.Unavailable(err)
	}
	return t, nil
}

// DropSchema drops a lease schema and everything in it (a run's own
// schema, as the harness's process target makes one per run), within 10 s.
// It refuses the public schema.
func DropSchema(ctx context.Context, dsn, schema string) error {
	if schema == "" || schema == "public" {
		return fmt.Errorf("%w: refusing to drop schema %q", lease.ErrInvalidConfig, schema)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("dropping lease schema %s: %w", schema, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("dropping lease schema %s: %w", schema, err)
	}
	return nil
}
