package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
)

func TestPgindexBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--n", "1000"},
		{"--dsn", "postgres://x", "--n", "0"},
		{"--dsn", "postgres://x", "--batch", "0"},
		{"--dsn", "postgres://x", "--schema", "Robert'); DROP TABLE students;--"},
		{"--dsn", "postgres://x", "--timeout", "0s"},
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

// TestPgindexPostgres runs the command against a real Postgres with a
// small n (package pgindex tests the measurement itself).
func TestPgindexPostgres(t *testing.T) {
	_, dsn := pgtest.Connect(t)
	var out, errb bytes.Buffer
	code := runPgindex(context.Background(), []string{"--dsn", dsn, "--n", "300", "--batch", "100", "--schema", fmt.Sprintf("snowchaos_pgindex_cmd_test_%d", os.Getpid())}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"300 keys per table", "| snowflake | bigint |", "| uuidv4 | uuid |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}
