package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowchaos/snowchaos/generator"
)

func init() {
	register(command{name: "pgindex", summary: "measure what BIGINT Snowflake, UUIDv7 and UUIDv4 keys cost as a Postgres primary key", run: runPgindex})
}

const pgindexUsage = `usage: snowchaos pgindex --dsn DSN [--n 1000000] [--schema name] [--batch 10000]

Inserts the same number of keys, in the order they are generated, into
three tables whose primary key is the key: BIGINT Snowflake IDs (this
project's generator), UUIDv7 and UUIDv4 (github.com/google/uuid), with COPY
in batches that the three tables take in turn (so warm-up and checkpoints
fall on all three alike; load time is the sum of a table's batches). Then reports, per table, the load time, the primary-key index's
size (pg_relation_size), and its leaf density and fragmentation
(pgstattuple's pgstatindex; the extension is created if permitted, and its
absence is reported while the other figures are still shown), with ratios
to the BIGINT table. The tables are dropped at the end, as is the schema if
this command created it.

Exit codes: 0 measured, 1 a step failed, 2 bad flags or the database
unreachable.
`

// pgindexKind is one key format.
type pgindexKind struct {
	name, sqlType string
}

var pgindexKinds = []pgindexKind{
	{"snowflake", "bigint"},
	{"uuidv7", "uuid"},
	{"uuidv4", "uuid"},
}

// pgindexRow is one table's figures.
type pgindexRow struct {
	kind      pgindexKind
	load      time.Duration
	indexSize int64
	tableSize int64
	// From pgstatindex; valid only when stat is true.
	stat          bool
	treeLevel     int64
	leafPages     int64
	leafDensity   float64
	fragmentation float64
}

// pgIdent accepts a plain, unquoted-safe Postgres identifier.
var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func runPgindex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, pgindexUsage, "\nflags:\n"); fs.PrintDefaults() }
	dsn := fs.String("dsn", "", "Postgres DSN, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	n := fs.Int("n", 1_000_000, "keys per table")
	schema := fs.String("schema", "public", "schema for the tables (created, and dropped afterwards, if missing)")
	batch := fs.Int("batch", 10_000, "rows per COPY")
	timeout := fs.Duration("timeout", 10*time.Second, "deadline for reaching the database")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitInvalid
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "snowchaos pgindex: unexpected argument %q\n", fs.Arg(0))
		return exitInvalid
	case *dsn == "":
		fmt.Fprintln(stderr, "snowchaos pgindex: --dsn is required")
		fs.Usage()
		return exitInvalid
	case *n < 1:
		fmt.Fprintf(stderr, "snowchaos pgindex: --n %d: want at least 1\n", *n)
		return exitInvalid
	case *batch < 1:
		fmt.Fprintf(stderr, "snowchaos pgindex: --batch %d: want at least 1\n", *batch)
		return exitInvalid
	case !pgIdent.MatchString(*schema):
		fmt.Fprintf(stderr, "snowchaos pgindex: --schema %q: want a lower-case identifier (letters, digits, _)\n", *schema)
		return exitInvalid
	}

	cctx, cancel := context.WithTimeout(ctx, *timeout)
	conn, err := pgx.Connect(cctx, *dsn)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos pgindex: connect: %v\n", err)
		return exitInvalid
	}
	defer conn.Close(context.Background())

	p := &pgindex{conn: conn, schema: *schema, n: *n, batch: *batch, stderr: stderr,
		suffix: fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)}
	defer p.cleanup()
	rows, err := p.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos pgindex: %v\n", err)
		return exitFailure
	}
	p.render(stdout, rows)
	return exitOK
}

// pgindex is one measurement run.
type pgindex struct {
	conn          *pgx.Conn
	schema        string
	n, batch      int
	suffix        string
	stderr        io.Writer
	version       string
	statErr       error // why pgstatindex is unavailable
	createdSchema bool
	tables        []string // created, to drop
}

func (p *pgindex) table(k pgindexKind) pgx.Identifier {
	return pgx.Identifier{p.schema, "snowchaos_pgindex_" + k.name + "_" + p.suffix}
}

func (p *pgindex) run(ctx context.Context) ([]pgindexRow, error) {
	if err := p.conn.QueryRow(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	var exists bool
	if err := p.conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", p.schema).Scan(&exists); err != nil {
		return nil, fmt.Errorf("schema %s: %w", p.schema, err)
	}
	if !exists {
		if _, err := p.conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{p.schema}.Sanitize()); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", p.schema, err)
		}
		p.createdSchema = true
	}
	if _, err := p.conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgstattuple"); err != nil {
		p.statErr = err
	}

	keys, err := pgindexKeys(p.n)
	if err != nil {
		return nil, err
	}
	rows := make([]pgindexRow, len(pgindexKinds))
	for i, k := range pgindexKinds {
		rows[i].kind = k
		tbl := p.table(k)
		if _, err := p.conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY)", tbl.Sanitize(), k.sqlType)); err != nil {
			return nil, fmt.Errorf("%s: create table: %w", k.name, err)
		}
		p.tables = append(p.tables, tbl.Sanitize())
	}
	// The tables take their batches in turn, so warm-up, WAL segment
	// creation and checkpoints fall on all three alike; each table still
	// gets its keys in generation order.
	for off := 0; off < p.n; off += p.batch {
		m := min(p.batch, p.n-off)
		for i, k := range pgindexKinds {
			start := time.Now()
			got, err := p.conn.CopyFrom(ctx, p.table(k), []string{"id"}, pgx.CopyFromSlice(m, func(j int) ([]any, error) { return keys[i](off + j) }))
			rows[i].load += time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s: copy rows %d..%d: %w", k.name, off, off+m, err)
			}
			if got != int64(m) {
				return nil, fmt.Errorf("%s: copy rows %d..%d: copied %d", k.name, off, off+m, got)
			}
		}
	}
	for i := range rows {
		if err := p.measure(ctx, &rows[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", rows[i].kind.name, err)
		}
	}
	return rows, nil
}

// pgindexKeys generates n keys of each kind, in generation order: the
// order a service would insert them as it issues them.
func pgindexKeys(n int) ([3]func(int) ([]any, error), error) {
	var keys [3]func(int) ([]any, error)
	g, err := generator.New(generator.Settings{Node: 1, Policy: generator.PolicyWait})
	if err != nil {
		return keys, err
	}
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
// index's pgstatindex figures when pgstattuple is available.
func (p *pgindex) measure(ctx context.Context, row *pgindexRow) error {
	var index string
	err := p.conn.QueryRow(ctx, `SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid), pg_relation_size(i.indrelid)
		FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisprimary`, p.table(row.kind).Sanitize()).Scan(&index, &row.indexSize, &row.tableSize)
	if err != nil {
		return fmt.Errorf("index size: %w", err)
	}
	if p.statErr == nil {
		err := p.conn.QueryRow(ctx, "SELECT tree_level, leaf_pages, avg_leaf_density, leaf_fragmentation FROM pgstatindex($1)", index).
			Scan(&row.treeLevel, &row.leafPages, &row.leafDensity, &row.fragmentation)
		if err != nil {
			p.statErr = err
		} else {
			row.stat = true
		}
	}
	return nil
}

// cleanup drops the tables, and the schema when this run created it,
// even after an interrupt.
func (p *pgindex) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range p.tables {
		if _, err := p.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			fmt.Fprintf(p.stderr, "snowchaos pgindex: drop %s: %v\n", t, err)
		}
	}
	if p.createdSchema {
		if _, err := p.conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()); err != nil {
			fmt.Fprintf(p.stderr, "snowchaos pgindex: drop schema %s: %v\n", p.schema, err)
		}
	}
}

// render writes the figures as a Markdown table.
func (p *pgindex) render(w io.Writer, rows []pgindexRow) {
	fmt.Fprintf(w, "%s keys per table, inserted in generation order with COPY (%s rows per batch, the tables in turn), PostgreSQL %s.\n", pgindexThousands(int64(p.n)), pgindexThousands(int64(p.batch)), p.version)
	if p.statErr != nil {
		fmt.Fprintf(w, "Leaf density and fragmentation unavailable: pgstattuple could not be used (%s); the other figures stand.\n", pgindexFirstLine(p.statErr.Error()))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| key | type | load time | rows/s | PK index size | bytes/key | index vs BIGINT | leaf pages | avg leaf density | leaf fragmentation | tree level | table size |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	base := rows[0]
	for _, r := range rows {
		rate := float64(p.n) / r.load.Seconds()
		ratio := float64(r.indexSize) / float64(base.indexSize)
		leaf, density, frag, level := "n/a", "n/a", "n/a", "n/a"
		if r.stat {
			leaf = pgindexThousands(r.leafPages)
			density = fmt.Sprintf("%.1f%%", r.leafDensity)
			frag = fmt.Sprintf("%.1f%%", r.fragmentation)
			level = fmt.Sprint(r.treeLevel)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.1f | %.2f× | %s | %s | %s | %s | %s |\n",
			r.kind.name, r.kind.sqlType, r.load.Round(time.Millisecond), pgindexThousands(int64(rate)),
			pgindexMiB(r.indexSize), float64(r.indexSize)/float64(p.n), ratio, leaf, density, frag, level, pgindexMiB(r.tableSize))
	}
	if base.load > 0 {
		fmt.Fprintf(w, "\nLoad time vs BIGINT:")
		for _, r := range rows[1:] {
			fmt.Fprintf(w, " %s %.2f×", r.kind.name, r.load.Seconds()/base.load.Seconds())
		}
		fmt.Fprintln(w)
	}
}

// pgindexMiB renders a size in KiB below 10 MiB, else in MiB.
func pgindexMiB(b int64) string {
	if b < 10<<20 {
		return pgindexThousands(b>>10) + " KiB"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// pgindexThousands renders n with thousands separators.
func pgindexThousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + pgindexThousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func pgindexFirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
