package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

func TestPgindexBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--n", "1000"},
		{"--dsn", "postgres://x", "--n", "0"},
		{"--dsn", "postgres://x", "--batch", "0"},
		{"--dsn", "postgres://x", "--schema", "Robert'); DROP TABLE students;--"},
		{"--dsn", "postgres://x", "extra"},
		{"--bogus"},
		{"--dsn", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", "--timeout", "2s"},
	} {
		var out, errb bytes.Buffer
		if code := runPgindex(context.Background(), args, &out, &errb); code != exitInvalid {
			t.Errorf("pgindex %q: exit %d, want %d (stderr %q)", args, code, exitInvalid, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("pgindex %q: nothing on stderr", args)
		}
	}
}

func TestPgindexRenderWithoutPgstattuple(t *testing.T) {
	p := &pgindex{n: 1000, batch: 100, version: "15.0", statErr: errors.New(`permission denied to create extension "pgstattuple"`)}
	var b bytes.Buffer
	p.render(&b, []pgindexRow{
		{kind: pgindexKinds[0], load: time.Second, indexSize: 8192 * 4, tableSize: 8192 * 8},
		{kind: pgindexKinds[1], load: 2 * time.Second, indexSize: 8192 * 6, tableSize: 8192 * 8},
		{kind: pgindexKinds[2], load: 3 * time.Second, indexSize: 8192 * 8, tableSize: 8192 * 8},
	})
	out := b.String()
	for _, want := range []string{
		"Leaf density and fragmentation unavailable: pgstattuple could not be used (permission denied",
		"| uuidv4 | uuid | 3s | 333 | 64 KiB | 65.5 | 2.00× | n/a | n/a | n/a | n/a | 64 KiB |",
		"uuidv7 2.00× uuidv4 3.00×",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPgindexPostgres runs pgindex against a real Postgres with a small n
// in a schema of its own, and checks that it leaves nothing behind.
func TestPgindexPostgres(t *testing.T) {
	dsn := os.Getenv("SNOWCHAOS_PG_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		testenv.Missing(t, "postgres at %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("snowchaos_pgindex_test_%d", os.Getpid())

	var out, errb bytes.Buffer
	code := runPgindex(context.Background(), []string{"--dsn", dsn, "--n", "3000", "--batch", "1000", "--schema", schema}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{"3,000 keys per table", "| snowflake | bigint |", "| uuidv7 | uuid |", "| uuidv4 | uuid |", "| 1.00× |"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "unavailable: pgstattuple") && strings.Contains(text, "n/a") {
		t.Errorf("pgstattuple figures missing without a reason:\n%s", text)
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("schema %s left behind (DROP SCHEMA without CASCADE fails while a table is left)", schema)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}
