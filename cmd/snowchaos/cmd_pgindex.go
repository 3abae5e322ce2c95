package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/snowchaos/snowchaos/pgindex"
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

flags:
`

func runPgindex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgindex", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "Postgres DSN, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	n := fs.Int("n", pgindex.DefaultN, "keys per table")
	schema := fs.String("schema", pgindex.DefaultSchema, "schema for the tables (created, and dropped afterwards, if missing)")
	batch := fs.Int("batch", pgindex.DefaultBatch, "rows per COPY")
	timeout := fs.Duration("timeout", pgindex.DefaultConnectTimeout, "deadline for reaching the database")
	if code, ok := parseFlags(fs, args, stderr, pgindexUsage); !ok {
		return code
	}
	switch {
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
	case !pgindex.ValidSchema(*schema):
		fmt.Fprintf(stderr, "snowchaos pgindex: --schema %q: want a lower-case identifier (letters, digits, _)\n", *schema)
		return exitInvalid
	case *timeout <= 0:
		fmt.Fprintf(stderr, "snowchaos pgindex: --timeout %v: want a positive duration\n", *timeout)
		return exitInvalid
	}

	res, err := pgindex.Measure(ctx, pgindex.Config{
		DSN: *dsn, ConnectTimeout: *timeout, N: *n, Batch: *batch, Schema: *schema,
		Warn: func(err error) { fmt.Fprintf(stderr, "snowchaos pgindex: %v\n", err) },
	})
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos pgindex: %v\n", err)
		if errors.Is(err, pgindex.ErrUnavailable) || errors.Is(err, pgindex.ErrConfig) {
			return exitInvalid
		}
		return exitFailure
	}
	if err := res.WriteMarkdown(stdout); err != nil {
		fmt.Fprintf(stderr, "snowchaos pgindex: %v\n", err)
		return exitFailure
	}
	return exitOK
}
