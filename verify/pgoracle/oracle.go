// Package pgoracle is an independent judge of uniqueness: every ID a run
// receives is also written to Postgres, and Postgres counts the duplicates
// at the end. It is the classic load-test check (put every ID into a
// database and let the database find repeats), kept off the hot path.
//
// Design: IDs are appended to in-memory batches; full batches go through a
// bounded queue to writer goroutines, each holding one dedicated
// connection, which stream them with binary COPY (pgx's CopyFrom) into an
// UNLOGGED table with no index or constraint. At Finish one query counts
// count(*) - count(DISTINCT id): exactly the verifier's definition of
// duplicates (an ID seen k times is k-1 duplicates), and a GROUP BY ...
// HAVING count(*) > 1 lists the first duplicated IDs with their sources.
//
// Why not a PRIMARY KEY table: a unique violation aborts the whole COPY
// batch, so the count would be per batch, not per ID. COPY into a staging
// table plus INSERT ... ON CONFLICT DO NOTHING would be exact, but it
// writes every row twice and maintains a B-tree on the hot write path; the
// constraint-free unlogged heap takes appends at COPY speed and pays for
// the uniqueness check once, in a single hash or sort at the end.
//
// The verdict is pass, fail or unknown. Anything that leaves a doubt about
// whether every submitted ID reached the table makes it unknown, never
// pass: a failed connection or COPY (Postgres stopped, a backend
// terminated), a batch dropped on a full queue (Config.DropWhenFull), or a
// row count that differs from what was submitted.
package pgoracle

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowchaos/snowchaos/generator"
)

// EnvDSN names the environment variable holding the Postgres DSN.
const EnvDSN = "SNOWCHAOS_PG_DSN"

// DefaultDSN is used when neither Config.DSN nor SNOWCHAOS_PG_DSN is set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Defaults for the zero values of Config.
const (
	DefaultBatchSize  = 65536
	DefaultQueueDepth = 16
	DefaultWriters    = 2
	DefaultMaxDetails = 100
)

// Sentinel errors. Their text never changes once published.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("pgoracle: invalid config")
	// ErrUnavailable: Postgres could not be reached or failed mid-run.
	ErrUnavailable = errors.New("pgoracle: postgres unavailable")
	// ErrClosed: the oracle was finished or closed.
	ErrClosed = errors.New("pgoracle: closed")
)

// DSN returns the DSN to use: dsn if non-empty, else SNOWCHAOS_PG_DSN,
// else DefaultDSN.
func DSN(dsn string) string {
	if dsn != "" {
		return dsn
	}
	if v := os.Getenv(EnvDSN); v != "" {
		return v
	}
	return DefaultDSN
}

// Config configures an Oracle. The zero value is usable.
type Config struct {
	// DSN is the Postgres connection string; empty: DSN("").
	DSN string
	// Schema and Table name the table; an empty Table gets a unique name
	// ("snowchaos_ids_<random>"), an empty Schema the connection's default.
	// The table must not exist; it is created UNLOGGED.
	Schema, Table string
	// Keep leaves the table in place after Close (to inspect it); by
	// default Close drops it.
	Keep bool
	// BatchSize is the number of IDs per COPY. Zero: 65536.
	BatchSize int
	// QueueDepth is the number of full batches that may wait for a writer.
	// Zero: 16.
	QueueDepth int
	// Writers is the number of concurrent COPY connections. Zero: 2.
	Writers int
	// DropWhenFull makes Add drop a batch instead of blocking when the
	// queue is full; any drop makes the verdict unknown. By default Add
	// blocks (backpressure), and the time blocked is reported.
	DropWhenFull bool
	// MaxDetails caps the duplicated IDs listed in the Result. Zero: 100.
	MaxDetails int
	// ApplicationName is the connections' application_name; empty:
	// "snowchaos-pgoracle".
	ApplicationName string
	// Clock times the waits and COPYs reported in Result (monotonic
	// readings only). Nil: generator.SystemClock().
	Clock generator.Clock
}

// Verdict is the oracle's judgement.
type Verdict uint8

// Verdicts. The zero value is VerdictUnknown.
const (
	// VerdictUnknown: the oracle could not judge (see Result.Reason).
	VerdictUnknown Verdict = iota
	// VerdictPass: every submitted ID is in the table and none repeats.
	VerdictPass
	// VerdictFail: every submitted ID is in the table and some repeat.
	VerdictFail
)

// String returns "unknown", "pass" or "fail".
func (v Verdict) String() string {
	switch v {
	case VerdictPass:
		return "pass"
	case VerdictFail:
		return "fail"
	}
	return "unknown"
}

// Duplicate is an ID Postgres found more than once.
type Duplicate struct {
	// ID is the repeated ID; Count how often it was written.
	ID    generator.ID
	Count int64
	// Sources are the source tags (Add's src) of its copies.
	Sources []int16
}

// Result is the oracle's report.
type Result struct {
	// Verdict is pass, fail or unknown; Reason explains unknown.
	Verdict Verdict
	Reason  string
	// Submitted IDs were given to Add; Written were committed by COPY;
	// Dropped were lost to a full queue (DropWhenFull) or a failed writer.
	Submitted, Written, Dropped uint64
	// Rows is count(*) of the table at Finish, Distinct count(DISTINCT id),
	// Duplicates Rows - Distinct (valid only when the verdict is not
	// unknown, or at least Rows == Submitted).
	Rows, Distinct, Duplicates uint64
	// Details are the first MaxDetails duplicated IDs, in ID order.
	Details []Duplicate
	// Batches is the number of COPY statements that committed.
	Batches uint64
	// Blocked is the total time Add spent waiting for a full queue, and
	// BlockedAdds how many Add calls waited.
	Blocked     time.Duration
	BlockedAdds uint64
	// CopyTime is the writers' total time inside COPY; CountTime the time
	// of the final counting queries.
	CopyTime, CountTime time.Duration
	// Table is the qualified table name.
	Table string
}

// batch is a set of IDs with their sources, encoded as COPY BINARY rows.
type batch struct {
	buf  []byte // COPY binary tuples (no header or trailer)
	rows int
}

// rowSize is the size of one encoded tuple: field count, (len, int8), (len, int2).
const rowSize = 2 + 4 + 8 + 4 + 2

// copyHeader starts a COPY BINARY stream: signature, flags, extension length.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyTrailer ends it.
var copyTrailer = []byte{0xff, 0xff}

// Oracle writes IDs to Postgres off the hot path and judges them at the
// end. Add is safe for concurrent use.
type Oracle struct {
	cfg   Config
	table pgx.Identifier
	name  string
	dsn   string

	queue chan *batch
	// free holds batches whose buffers no one reads any more, for reuse.
	// A batch goes back only when pgx can no longer read it: after a COPY
	// that failed, pgx's copy goroutine may still be reading the buffer
	// (CopyFrom returns on a server error without waiting for it), so
	// that batch is left to the garbage collector instead.
	free    chan *batch
	writers sync.WaitGroup

	mu struct {
		sync.Mutex
		cur    *batch
		closed bool
	}
	submitted, written, dropped, batches atomic.Uint64
	blockedNs, blockedAdds, copyNs       atomic.Int64
	failed                               atomic.Bool
	errMu                                sync.Mutex
	firstErr                             error
	conns                                []*pgx.Conn
	finished                             bool
}

// New connects Config.Writers connections, creates the table, and starts
// the writers. The error wraps ErrUnavailable when Postgres cannot be
// reached or the table cannot be created, ErrConfig for a bad Config.
func New(ctx context.Context, cfg Config) (*Oracle, error) {
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.QueueDepth == 0 {
		cfg.QueueDepth = DefaultQueueDepth
	}
	if cfg.Writers == 0 {
		cfg.Writers = DefaultWriters
	}
	if cfg.MaxDetails == 0 {
		cfg.MaxDetails = DefaultMaxDetails
	}
	if cfg.Clock == nil {
		cfg.Clock = generator.SystemClock()
	}
	if cfg.ApplicationName == "" {
		cfg.ApplicationName = "snowchaos-pgoracle"
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1<<24 || cfg.QueueDepth < 1 || cfg.Writers < 1 || cfg.Writers > 64 || cfg.MaxDetails < 0 {
		return nil, fmt.Errorf("%w: batch %d, queue %d, writers %d, details %d", ErrConfig, cfg.BatchSize, cfg.QueueDepth, cfg.Writers, cfg.MaxDetails)
	}
	if cfg.Table == "" {
		var b [6]byte
		rand.Read(b[:])
		cfg.Table = "snowchaos_ids_" + hex.EncodeToString(b[:])
	}
	o := newOracle(cfg)
	for range cfg.Writers {
		c, err := o.connect(ctx)
		if err != nil {
			o.closeConns()
			return nil, err
		}
		o.conns = append(o.conns, c)
	}
	if _, err := o.conns[0].Exec(ctx, "CREATE UNLOGGED TABLE "+o.name+" (id bigint NOT NULL, src smallint NOT NULL)"); err != nil {
		o.closeConns()
		return nil, fmt.Errorf("%w: creating %s: %v", ErrUnavailable, o.name, err)
	}
	for _, c := range o.conns {
		o.start(c.PgConn())
	}
	return o, nil
}

// newOracle returns an Oracle for a validated, defaulted cfg, with no
// connection and no writer yet.
func newOracle(cfg Config) *Oracle {
	o := &Oracle{
		cfg: cfg, dsn: DSN(cfg.DSN),
		queue: make(chan *batch, cfg.QueueDepth),
		// At most QueueDepth batches wait, Writers are being copied and
		// one is being filled.
		free: make(chan *batch, cfg.QueueDepth+cfg.Writers+1),
	}
	if cfg.Schema != "" {
		o.table = pgx.Identifier{cfg.Schema, cfg.Table}
	} else {
		o.table = pgx.Identifier{cfg.Table}
	}
	o.name = o.table.Sanitize()
	return o
}

// copier is the part of *pgconn.PgConn a writer uses.
type copier interface {
	CopyFrom(ctx context.Context, r io.Reader, sql string) (pgconn.CommandTag, error)
}

// start runs one writer over c.
func (o *Oracle) start(c copier) {
	o.writers.Add(1)
	go o.writer(c)
}

// getBatch returns an empty batch, reused when one is free.
func (o *Oracle) getBatch() *batch {
	select {
	case b := <-o.free:
		b.buf, b.rows = b.buf[:0], 0
		return b
	default:
		return &batch{buf: make([]byte, 0, o.cfg.BatchSize*rowSize)}
	}
}

// putBatch offers b for reuse; the caller must be its last reader.
func (o *Oracle) putBatch(b *batch) {
	select {
	case o.free <- b:
	default:
	}
}

// mono reads the monotonic clock.
func (o *Oracle) mono() int64 {
	_, m := o.cfg.Clock.Now()
	return m
}

// connect opens one connection.
func (o *Oracle) connect(ctx context.Context) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(o.dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: DSN: %v", ErrConfig, err)
	}
	cc.RuntimeParams["application_name"] = o.cfg.ApplicationName
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = 5 * time.Second
	}
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to %s@%s:%d/%s: %v", ErrUnavailable, cc.User, cc.Host, cc.Port, cc.Database, err)
	}
	return c, nil
}

// Table returns the qualified, quoted table name.
func (o *Oracle) Table() string { return o.name }

// Backends returns the process IDs of the writers' server backends (to
// terminate one in a test).
func (o *Oracle) Backends() []uint32 {
	var out []uint32
	for _, c := range o.conns {
		out = append(out, c.PgConn().PID())
	}
	return out
}

// Add submits ids from source src (an issuer index; it is stored with each
// row and reported with duplicates). It copies ids, so the caller may reuse
// the slice. When the queue is full it blocks until a writer frees a slot
// (the wait is reported), or drops the batch with Config.DropWhenFull.
// After Finish or Close it fails with ErrClosed.
func (o *Oracle) Add(src int16, ids []generator.ID) error {
	o.mu.Lock()
	if o.mu.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	o.submitted.Add(uint64(len(ids)))
	var full []*batch
	for _, id := range ids {
		b := o.mu.cur
		if b == nil {
			b = o.getBatch()
			o.mu.cur = b
		}
		b.buf = appendRow(b.buf, int64(id), src)
		b.rows++
		if b.rows == o.cfg.BatchSize {
			full = append(full, b)
			o.mu.cur = nil
		}
	}
	o.mu.Unlock()
	for _, b := range full {
		o.enqueue(b)
	}
	return nil
}

// appendRow encodes one COPY BINARY tuple.
func appendRow(buf []byte, id int64, src int16) []byte {
	buf = binary.BigEndian.AppendUint16(buf, 2)
	buf = binary.BigEndian.AppendUint32(buf, 8)
	buf = binary.BigEndian.AppendUint64(buf, uint64(id))
	buf = binary.BigEndian.AppendUint32(buf, 2)
	return binary.BigEndian.AppendUint16(buf, uint16(src))
}

// enqueue hands b to the writers, blocking or dropping when full.
func (o *Oracle) enqueue(b *batch) {
	select {
	case o.queue <- b:
		return
	default:
	}
	if o.cfg.DropWhenFull {
		o.dropped.Add(uint64(b.rows))
		o.putBatch(b)
		return
	}
	start := o.mono()
	o.queue <- b
	o.blockedNs.Add(o.mono() - start)
	o.blockedAdds.Add(1)
}

// fail records the first error and marks the oracle unable to judge.
func (o *Oracle) fail(err error) {
	o.failed.Store(true)
	o.errMu.Lock()
	if o.firstErr == nil {
		o.firstErr = err
	}
	o.errMu.Unlock()
}

// writer copies batches until the queue closes. After its connection
// fails it keeps draining the queue, counting the rows as dropped, so Add
// never blocks forever.
func (o *Oracle) writer(c copier) {
	defer o.writers.Done()
	broken := false
	sql := "COPY " + o.name + " (id, src) FROM STDIN WITH (FORMAT binary)"
	for b := range o.queue {
		if broken || o.failed.Load() {
			o.dropped.Add(uint64(b.rows))
			o.putBatch(b)
			continue
		}
		start := o.mono()
		tag, err := c.CopyFrom(context.Background(), &copyReader{parts: [][]byte{copyHeader, b.buf, copyTrailer}}, sql)
		o.copyNs.Add(o.mono() - start)
		// CopyFrom can return an error while its copy goroutine still
		// reads b.buf: only a COPY that succeeded hands b back.
		reusable := err == nil
		if err == nil && tag.RowsAffected() != int64(b.rows) {
			err = fmt.Errorf("COPY wrote %d rows of %d", tag.RowsAffected(), b.rows)
		}
		if err != nil {
			broken = true
			o.dropped.Add(uint64(b.rows))
			o.fail(fmt.Errorf("%w: COPY into %s: %v", ErrUnavailable, o.name, err))
		} else {
			o.written.Add(uint64(b.rows))
			o.batches.Add(1)
		}
		if reusable {
			o.putBatch(b)
		}
	}
}

// copyReader streams a sequence of byte slices.
type copyReader struct {
	parts [][]byte
}

// Read implements io.Reader.
func (r *copyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.parts) > 0 {
		c := copy(p[n:], r.parts[0])
		n += c
		r.parts[0] = r.parts[0][c:]
		if len(r.parts[0]) == 0 {
			r.parts = r.parts[1:]
		}
	}
	if n == 0 && len(r.parts) == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Progress is a cheap snapshot of the oracle's counters.
type Progress struct {
	Submitted, Written, Dropped uint64
	// Queued is the number of full batches waiting for a writer.
	Queued int
	// Failed is true once a writer has failed (the verdict will be
	// unknown).
	Failed bool
}

// Progress returns the running counters.
func (o *Oracle) Progress() Progress {
	return Progress{Submitted: o.submitted.Load(), Written: o.written.Load(), Dropped: o.dropped.Load(), Queued: len(o.queue), Failed: o.failed.Load()}
}

// Finish flushes the last batch, waits for the writers, and asks Postgres
// for the verdict. It can be called once; later calls fail with ErrClosed.
// An error from Finish itself is for misuse only: an unreachable database
// is a Result with VerdictUnknown.
func (o *Oracle) Finish(ctx context.Context) (Result, error) {
	o.mu.Lock()
	if o.mu.closed {
		o.mu.Unlock()
		return Result{}, ErrClosed
	}
	o.mu.closed = true
	last := o.mu.cur
	o.mu.cur = nil
	o.mu.Unlock()
	if last != nil && last.rows > 0 {
		o.enqueue(last)
	}
	close(o.queue)
	o.writers.Wait()
	o.finished = true

	r := Result{
		Submitted: o.submitted.Load(), Written: o.written.Load(), Dropped: o.dropped.Load(), Batches: o.batches.Load(),
		Blocked: time.Duration(o.blockedNs.Load()), BlockedAdds: uint64(o.blockedAdds.Load()), CopyTime: time.Duration(o.copyNs.Load()),
		Table: o.name,
	}
	o.errMu.Lock()
	err := o.firstErr
	o.errMu.Unlock()
	if err != nil {
		r.Reason = err.Error()
		return r, nil
	}
	if r.Dropped > 0 {
		r.Reason = fmt.Sprintf("%d IDs dropped on a full queue: the table is incomplete", r.Dropped)
		return r, nil
	}
	start := o.mono()
	if err := o.count(ctx, &r); err != nil {
		r.Reason = err.Error()
		return r, nil
	}
	r.CountTime = time.Duration(o.mono() - start)
	switch {
	case r.Rows != r.Submitted:
		r.Reason = fmt.Sprintf("the table holds %d rows but %d IDs were submitted", r.Rows, r.Submitted)
	case r.Duplicates > 0:
		r.Verdict = VerdictFail
	default:
		r.Verdict = VerdictPass
	}
	return r, nil
}

// count runs the counting queries on a fresh connection.
func (o *Oracle) count(ctx context.Context, r *Result) error {
	c, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET LOCAL work_mem = '256MB'"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var rows, distinct int64
	if err := tx.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM "+o.name).Scan(&rows, &distinct); err != nil {
		return fmt.Errorf("%w: counting %s: %v", ErrUnavailable, o.name, err)
	}
	r.Rows, r.Distinct, r.Duplicates = uint64(rows), uint64(distinct), uint64(rows-distinct)
	if r.Duplicates == 0 || o.cfg.MaxDetails <= 0 {
		return nil
	}
	q := "SELECT id, count(*), array_agg(src ORDER BY src) FROM " + o.name + " GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT $1"
	res, err := tx.Query(ctx, q, o.cfg.MaxDetails)
	if err != nil {
		return fmt.Errorf("%w: listing duplicates: %v", ErrUnavailable, err)
	}
	for res.Next() {
		var d Duplicate
		var id int64
		if err := res.Scan(&id, &d.Count, &d.Sources); err != nil {
			res.Close()
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		d.ID = generator.ID(id)
		r.Details = append(r.Details, d)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("%w: listing duplicates: %v", ErrUnavailable, err)
	}
	return nil
}

// Close stops the writers (if Finish was not called), drops the table
// unless Config.Keep, and closes the connections.
func (o *Oracle) Close() error {
	o.mu.Lock()
	if !o.mu.closed {
		o.mu.closed = true
		o.mu.cur = nil
		close(o.queue)
	}
	o.mu.Unlock()
	o.writers.Wait()
	var err error
	if !o.cfg.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, cerr := o.connect(ctx)
		if cerr == nil {
			_, err = c.Exec(ctx, "DROP TABLE IF EXISTS "+o.name)
			c.Close(ctx)
		} else {
			err = cerr
		}
	}
	o.closeConns()
	return err
}

// closeConns closes the writers' connections.
func (o *Oracle) closeConns() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range o.conns {
		c.Close(ctx)
	}
}
