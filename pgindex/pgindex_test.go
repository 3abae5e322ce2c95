package pgindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
)

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{},
		{DSN: "postgres://x", N: -1},
		{DSN: "postgres://x", Batch: -1},
		{DSN: "postgres://x", ConnectTimeout: -time.Second},
		{DSN: "postgres://x", Schema: "Robert'); DROP TABLE students;--"},
		{DSN: "postgres://x", Schema: "1abc"},
	} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", c, err)
		}
		if _, err := Measure(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Measure = %v, want ErrConfig", c, err)
		}
	}
	if err := (Config{DSN: "postgres://x"}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if !ValidSchema("snowchaos_pgindex_1") || ValidSchema("Public") || ValidSchema(strings.Repeat("a", 64)) {
		t.Error("ValidSchema")
	}
}

func TestMeasureUnreachable(t *testing.T) {
	_, err := Measure(context.Background(), Config{DSN: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", ConnectTimeout: 2 * time.Second})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Measure = %v, want ErrUnavailable", err)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 999: "999", 1000: "1,000", 4096000: "4,096,000", -1234: "-1,234", -999: "-999",
		-9223372036854775808: "-9,223,372,036,854,775,808",
	} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWriteMarkdownWithoutPgstattuple(t *testing.T) {
	ks := Kinds()
	r := &Result{N: 1000, Batch: 100, Version: "15.0", StatErr: errors.New("permission denied to create extension \"pgstattuple\"\nDETAIL: more"), Rows: []Row{
		{Kind: ks[0], Load: time.Second, IndexSize: 8192 * 4, TableSize: 8192 * 8},
		{Kind: ks[1], Load: 2 * time.Second, IndexSize: 8192 * 6, TableSize: 8192 * 8},
		{Kind: ks[2], Load: 3 * time.Second, IndexSize: 8192 * 8, TableSize: 8192 * 8},
	}}
	var b strings.Builder
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"1,000 keys per table, inserted in generation order with COPY (100 rows per batch, the tables in turn), PostgreSQL 15.0.\n",
		"Leaf density and fragmentation unavailable: pgstattuple could not be used (permission denied to create extension \"pgstattuple\"); the other figures stand.\n\n| key |",
		"| uuidv4 | uuid | 3s | 333 | 64 KiB | 65.5 | 2.00× | n/a | n/a | n/a | n/a | 64 KiB |",
		"\nLoad time vs BIGINT: uuidv7 2.00× uuidv4 3.00×\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteMarkdownWithPgstattuple(t *testing.T) {
	r := &Result{N: 3, Batch: 3, Version: "16.1", Rows: []Row{
		{Kind: Kinds()[0], Load: time.Millisecond, IndexSize: 20 << 20, TableSize: 8192, Stat: true, TreeLevel: 2, LeafPages: 2741, LeafDensity: 90.06, Fragmentation: 0},
	}}
	var b strings.Builder
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if want := "| snowflake | bigint | 1ms | 3,000 | 20.0 MiB | 6990506.7 | 1.00× | 2,741 | 90.1% | 0.0% | 2 | 8 KiB |"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "unavailable") {
		t.Errorf("pgstattuple reported unavailable:\n%s", b.String())
	}
}

// TestMeasurePostgres measures a small n against a real Postgres in a
// schema of its own, and checks that it leaves nothing behind.
func TestMeasurePostgres(t *testing.T) {
	conn, dsn := pgtest.Connect(t)
	schema := fmt.Sprintf("snowchaos_pgindex_test_%d", os.Getpid())
	var warnings []error
	res, err := Measure(context.Background(), Config{DSN: dsn, N: 3000, Batch: 1000, Schema: schema, Warn: func(err error) { warnings = append(warnings, err) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("cleanup warnings: %v", warnings)
	}
	if len(res.Rows) != 3 || res.N != 3000 || res.Batch != 1000 || res.Version == "" {
		t.Fatalf("result %+v", res)
	}
	for i, r := range res.Rows {
		if r.Kind != Kinds()[i] || r.Load <= 0 || r.IndexSize <= 0 || r.TableSize <= 0 {
			t.Errorf("row %d: %+v", i, r)
		}
		if res.StatErr == nil && (!r.Stat || r.LeafPages <= 0) {
			t.Errorf("row %d: pgstatindex figures missing without a reason: %+v", i, r)
		}
	}
	var b strings.Builder
	if err := res.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3,000 keys per table", "| snowflake | bigint |", "| uuidv7 | uuid |", "| uuidv4 | uuid |", "| 1.00× |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("schema %s left behind (DROP SCHEMA without CASCADE fails while a table is left)", schema)
	}
}
