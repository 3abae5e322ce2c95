// Package pgindex measures what BIGINT Snowflake IDs, UUIDv7 and UUIDv4 cost
// as a Postgres primary key: it inserts the same number of keys of each
// format, in generation order, into three tables and reads each primary-key
// index's size, leaf density and fragmentation.
//
// It is the only place besides lease/postgres and verify/pgoracle that
// talks to Postgres (pgx); cmd/snowchaos's pgindex command parses flags and
// prints the table.
//
//	res, err := pgindex.Measure(ctx, pgindex.Config{DSN: dsn, N: 1_000_000})
//	if err == nil {
//		err = res.WriteMarkdown(os.Stdout)
//	}
package pgindex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowchaos/snowchaos/generator"
)

// Defaults for the zero values of Config.
const (
	DefaultN              = 1_000_000
	DefaultBatch          = 10_000
	DefaultSchema         = "public"
	DefaultConnectTimeout = 10 * time.Second
)

// Sentinel errors. Their text never changes once published.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("pgindex: invalid config")
	// ErrUnavailable: Postgres could not be reached.
	ErrUnavailable = errors.New("pgindex: postgres unavailable")
)

// Kind is one key format.
type Kind struct {
	// Name is the row name: snowflake, uuidv7, uuidv4.
	Name string
	// SQLType is the primary key's column type.
	SQLType string
}

var kinds = []Kind{
	{"snowflake", "bigint"},
	{"uuidv7", "uuid"},
	{"uuidv4", "uuid"},
}

// Kinds returns the key formats measured, in table order; the first,
// BIGINT Snowflake, is the reference the ratios are taken against.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// Config says what to measure. The zero value (plus DSN) measures
// 1,000,000 keys per table in batches of 10,000 in schema public.
type Config struct {
	// DSN is the Postgres connection string.
	DSN string
	// ConnectTimeout bounds reaching the database; zero: 10 s.
	ConnectTimeout time.Duration
	// N is the number of keys per table; zero: DefaultN.
	N int
	// Batch is the number of rows per COPY; zero: DefaultBatch.
	Batch int
	// Schema holds the tables; it is created, and dropped afterwards, when
	// missing. A lower-case identifier (see ValidSchema); empty: public.
	Schema string
	// Warn, when set, is told of cleanup failures (a table or the schema
	// that could not be dropped); they do not fail the measurement.
	Warn func(error)
}

// withDefaults returns c with its zero fields filled in.
func (c Config) withDefaults() Config {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.N == 0 {
		c.N = DefaultN
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	return c
}

// Validate reports the first out-of-range field, wrapping ErrConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DSN == "":
		return fmt.Errorf("%w: DSN is empty", ErrConfig)
	case c.N < 1:
		return fmt.Errorf("%w: N %d: want at least 1", ErrConfig, c.N)
	case c.Batch < 1:
		return fmt.Errorf("%w: Batch %d: want at least 1", ErrConfig, c.Batch)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("%w: ConnectTimeout %v is negative", ErrConfig, c.ConnectTimeout)
	case !ValidSchema(c.Schema):
		return fmt.Errorf("%w: Schema %q: want a lower-case identifier (letters, digits, _)", ErrConfig, c.Schema)
	}
	return nil
}

// pgIdent accepts a plain, unquoted-safe Postgres identifier.
var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidSchema reports whether name is a plain lower-case Postgres
// identifier (letters, digits and _, at most 63 bytes, not starting with a
// digit): the only schema names Config accepts.
func ValidSchema(name string) bool { return pgIdent.MatchString(name) }

// Row is one table's figures.
type Row struct {
	Kind Kind
	// Load is the sum of the table's COPY batches.
	Load time.Duration
	// IndexSize and TableSize are pg_relation_size of the primary-key
	// index and of the table, bytes.
	IndexSize, TableSize int64
	// Stat says whether the pgstatindex figures below are valid.
	Stat bool
	// TreeLevel, LeafPages, LeafDensity (%) and Fragmentation (%) are
	// pgstatindex's figures for the primary-key index.
	TreeLevel, LeafPages       int64
	LeafDensity, Fragmentation float64
}

// Result is one measurement: a Row per Kind, in Kinds order.
type Result struct {
	// N and Batch are the keys per table and rows per COPY used.
	N, Batch int
	// Version is the server's server_version.
	Version string
	// StatErr says why pgstatindex was unavailable (nil: it was used).
	StatErr error
	Rows    []Row
}

// Measure connects to c.DSN, creates the tables (and the schema when
// missing), loads them, measures them and drops what it created, even
// when ctx is cancelled. Errors wrap ErrConfig for a bad c, ErrUnavailable
// when the database cannot be reached; any other is a failed step.
// It costs c.N keys of each kind in memory (about 40 bytes each) and the
// tables' disk space while it runs.
func Measure(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	cctx, cancel := context.WithTimeout(ctx, c.ConnectTimeout)
	conn, err := pgx.Connect(cctx, c.DSN)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: connect: %w", ErrUnavailable, err)
	}
	defer conn.Close(context.Background())
	m := &measurement{conn: conn, cfg: c, suffix: fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)}
	defer m.cleanup()
	return m.run(ctx)
}

// measurement is one Measure call's state.
type measurement struct {
	conn          *pgx.Conn
	cfg           Config
	suffix        string
	createdSchema bool
	tables        []string // created, to drop
}

func (m *measurement) table(k Kind) pgx.Identifier {
	return pgx.Identifier{m.cfg.Schema, "snowchaos_pgindex_" + k.Name + "_" + m.suffix}
}

func (m *measurement) run(ctx context.Context) (*Result, error) {
	res := &Result{N: m.cfg.N, Batch: m.cfg.Batch}
	if err := m.conn.QueryRow(ctx, "SHOW server_version").Scan(&res.Version); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	var exists bool
	if err := m.conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", m.cfg.Schema).Scan(&exists); err != nil {
		return nil, fmt.Errorf("schema %s: %w", m.cfg.Schema, err)
	}
	if !exists {
		if _, err := m.conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{m.cfg.Schema}.Sanitize()); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", m.cfg.Schema, err)
		}
		m.createdSchema = true
	}
	if _, err := m.conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgstattuple"); err != nil {
		res.StatErr = err
	}

	keys, err := generate(m.cfg.N)
	if err != nil {
		return nil, err
	}
	res.Rows = make([]Row, len(kinds))
	for i, k := range kinds {
		res.Rows[i].Kind = k
		tbl := m.table(k)
		if _, err := m.conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY)", tbl.Sanitize(), k.SQLType)); err != nil {
			return nil, fmt.Errorf("%s: create table: %w", k.Name, err)
		}
		m.tables = append(m.tables, tbl.Sanitize())
	}
	// The tables take their batches in turn, so warm-up, WAL segment
	// creation and checkpoints fall on all three alike; each table still
	// gets its keys in generation order.
	n, batch := m.cfg.N, m.cfg.Batch
	for off := 0; off < n; off += batch {
		size := min(batch, n-off)
		for i, k := range kinds {
			start := time.Now()
			got, err := m.conn.CopyFrom(ctx, m.table(k), []string{"id"}, pgx.CopyFromSlice(size, func(j int) ([]any, error) { return keys[i](off + j) }))
			res.Rows[i].Load += time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s: copy rows %d..%d: %w", k.Name, off, off+size, err)
			}
			if got != int64(size) {
				return nil, fmt.Errorf("%s: copy rows %d..%d: copied %d", k.Name, off, off+size, got)
			}
		}
	}
	for i := range res.Rows {
		if err := m.measure(ctx, res, &res.Rows[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", res.Rows[i].Kind.Name, err)
		}
	}
	return res, nil
}

// generate makes n keys of each kind, in generation order: the order a
// service would insert them as it issues them.
func generate(n int) ([3]func(int) ([]any, error), error) {
	var keys [3]func(int) ([]any, error)
	g, err := generator.New(generator.Settings{Node: 1, Policy: generator.PolicyWait})
	if err != nil {
		return keys, err
	}
	defer g.Close()
	ids := make([]generator.ID, n)
	if _, err := g.NextN(ids); err != nil {
		return keys, fmt.Errorf("snowflake IDs: %w", err)
	}
	v7 := make([]uuid.UUID, n)
	v4 := make([]uuid.UUID, n)
	for i := range n {
		if v7[i], err = uuid.NewV7(); err != nil {
			return keys, fmt.Errorf("uuidv7: %w", err)
		}
		if v4[i], err = uuid.NewRandom(); err != nil {
			return keys, fmt.Errorf("uuidv4: %w", err)
		}
	}
	keys[0] = func(i int) ([]any, error) { return []any{int64(ids[i])}, nil }
	keys[1] = func(i int) ([]any, error) { return []any{pgtype.UUID{Bytes: v7[i], Valid: true}}, nil }
	keys[2] = func(i int) ([]any, error) { return []any{pgtype.UUID{Bytes: v4[i], Valid: true}}, nil }
	return keys, nil
}

// measure reads the size of row's table and primary-key index, and the
// index's pgstatindex figures while pgstattuple is usable.
func (m *measurement) measure(ctx context.Context, res *Result, row *Row) error {
	var index string
	err := m.conn.QueryRow(ctx, `SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid), pg_relation_size(i.indrelid)
		FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisprimary`, m.table(row.Kind).Sanitize()).Scan(&index, &row.IndexSize, &row.TableSize)
	if err != nil {
		return fmt.Errorf("index size: %w", err)
	}
	if res.StatErr == nil {
		err := m.conn.QueryRow(ctx, "SELECT tree_level, leaf_pages, avg_leaf_density, leaf_fragmentation FROM pgstatindex($1)", index).
			Scan(&row.TreeLevel, &row.LeafPages, &row.LeafDensity, &row.Fragmentation)
		if err != nil {
			res.StatErr = err
		} else {
			row.Stat = true
		}
	}
	return nil
}

// cleanup drops the tables, and the schema when this run created it,
// even after an interrupt.
func (m *measurement) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warn := m.cfg.Warn
	if warn == nil {
		warn = func(error) {}
	}
	for _, t := range m.tables {
		if _, err := m.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			warn(fmt.Errorf("drop %s: %w", t, err))
		}
	}
	if m.createdSchema {
		if _, err := m.conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{m.cfg.Schema}.Sanitize()); err != nil {
			warn(fmt.Errorf("drop schema %s: %w", m.cfg.Schema, err))
		}
	}
}

// WriteMarkdown writes the figures as a Markdown table with ratios to the
// first row (BIGINT), and says why pgstatindex's columns are missing when
// they are.
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s keys per table, inserted in generation order with COPY (%s rows per batch, the tables in turn), PostgreSQL %s.\n", Thousands(int64(r.N)), Thousands(int64(r.Batch)), r.Version)
	if r.StatErr != nil {
		fmt.Fprintf(&b, "Leaf density and fragmentation unavailable: pgstattuple could not be used (%s); the other figures stand.\n", firstLine(r.StatErr.Error()))
	}
	b.WriteString("\n| key | type | load time | rows/s | PK index size | bytes/key | index vs BIGINT | leaf pages | avg leaf density | leaf fragmentation | tree level | table size |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	if len(r.Rows) > 0 {
		base := r.Rows[0]
		for _, row := range r.Rows {
			rate := float64(r.N) / row.Load.Seconds()
			ratio := float64(row.IndexSize) / float64(base.IndexSize)
			leaf, density, frag, level := "n/a", "n/a", "n/a", "n/a"
			if row.Stat {
				leaf = Thousands(row.LeafPages)
				density = fmt.Sprintf("%.1f%%", row.LeafDensity)
				frag = fmt.Sprintf("%.1f%%", row.Fragmentation)
				level = fmt.Sprint(row.TreeLevel)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f | %.2f× | %s | %s | %s | %s | %s |\n",
				row.Kind.Name, row.Kind.SQLType, row.Load.Round(time.Millisecond), Thousands(int64(rate)),
				mib(row.IndexSize), float64(row.IndexSize)/float64(r.N), ratio, leaf, density, frag, level, mib(row.TableSize))
		}
		if base.Load > 0 {
			b.WriteString("\nLoad time vs BIGINT:")
			for _, row := range r.Rows[1:] {
				fmt.Fprintf(&b, " %s %.2f×", row.Kind.Name, row.Load.Seconds()/base.Load.Seconds())
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mib renders a size in KiB below 10 MiB, else in MiB.
func mib(b int64) string {
	if b < 10<<20 {
		return Thousands(b>>10) + " KiB"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// Thousands renders n in decimal with comma thousands separators
// (1234567: "1,234,567"), as the tables of this project print counts.
func Thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	var b strings.Builder
	if d, neg := strings.CutPrefix(digits, "-"); neg {
		b.WriteByte('-')
		digits = d
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
