package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/internal/testenv/etcdtest"
	"github.com/snowchaos/snowchaos/lease"
	leasepg "github.com/snowchaos/snowchaos/lease/postgres"
)

func TestLeasesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"lsit"},
		{"list"},
		{"list", "--dsn", "mysql://x"},
		{"list", "--dsn", "etcd://"},
		{"list", "--dsn", "etcd://h:1", "extra"},
		{"list", "--bogus"},
	} {
		var out, errb bytes.Buffer
		if code := runLeases(context.Background(), args, &out, &errb); code != exitInvalid {
			t.Errorf("leases %q: exit %d, want %d (stderr %q)", args, code, exitInvalid, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("leases %q: nothing on stderr", args)
		}
	}
}

func TestLeaseRows(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	rows := leaseRows([]lease.Lease{
		{WorkerID: 1, Holder: "a", Token: 3, LeasedUntil: now.Add(1500 * time.Millisecond), LastIssuedMs: now.UnixMilli()},
		{WorkerID: 2, Holder: "b", Token: 1, LeasedUntil: now},
	}, now)
	if rows[0].State != "held" || rows[0].ExpiresIn != "1.5s" || rows[0].LastIssued != "2025-06-01T00:00:00.000Z" {
		t.Errorf("held row %+v", rows[0])
	}
	if rows[1].State != "free" || rows[1].ExpiresIn != "" || rows[1].LastIssued != "" {
		t.Errorf("free row %+v", rows[1])
	}
	var buf bytes.Buffer
	writeLeaseTable(&buf, rows)
	for _, want := range []string{"WORKER", "1.5s", "held", "free", "2025-06-01T00:00:00.000Z"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestLeasesListPostgres(t *testing.T) {
	dsn := os.Getenv("SNOWCHAOS_TEST_PG_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	schema := "snowchaos_cli_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	reg, err := leasepg.Open(ctx, dsn, leasepg.Options{Schema: schema})
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no Postgres at %s: %v", dsn, err)
		}
		t.Fatalf("CI: Postgres at %s unreachable: %v", dsn, err)
	}
	defer reg.Close()
	defer func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(context.Background())
		}
	}()
	l, err := reg.Acquire(ctx, lease.Request{Holder: "node-cli", Range: lease.Range{Min: 5, Max: 9}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Renew(ctx, l, 1748736000000); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runLeases(ctx, []string{"list", "--dsn", dsn, "--schema", schema, "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []leaseRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	if len(rows) != 1 || rows[0].WorkerID != 5 || rows[0].Holder != "node-cli" || rows[0].State != "held" ||
		rows[0].LastIssuedMs != 1748736000000 || rows[0].LastIssued != "2025-06-01T00:00:00.000Z" {
		t.Errorf("rows %+v", rows)
	}
	out.Reset()
	if code := runLeases(ctx, []string{"list", "--dsn", dsn, "--schema", schema}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "node-cli") {
		t.Errorf("table exit %d:\n%s%s", code, out.String(), errb.String())
	}
	// A missing table is reported, not created.
	errb.Reset()
	if code := runLeases(ctx, []string{"list", "--dsn", dsn, "--schema", schema, "--table", "nope"}, &out, &errb); code != exitInvalid || errb.Len() == 0 {
		t.Errorf("missing table: exit %d, stderr %q", code, errb.String())
	}
}

// TestServeAndListEtcdPrefix: serve --lease and leases list --dsn read an
// etcd URL the same way, its key prefix included: the node's lease is
// listed under the prefix it was given, and not under the default one.
func TestServeAndListEtcdPrefix(t *testing.T) {
	srv := etcdtest.Start(t)
	u := "etcd://" + srv.ClientURL.Host + "/serve-test/"
	_, stop, stderr := startServe(t, "--listen", "127.0.0.1:0", "--lease", u, "--worker", "6", "--holder", "node-p", "--lease-ttl", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	if code := runLeases(ctx, []string{"list", "--dsn", u, "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("leases list %s: exit %d: %s", u, code, errb.String())
	}
	var rows []leaseRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].WorkerID != 6 || rows[0].Holder != "node-p" || rows[0].State != "held" {
		t.Fatalf("leases under %s: %s (%v), want worker 6 held by node-p", u, out.String(), err)
	}
	out.Reset()
	if code := runLeases(ctx, []string{"list", "--dsn", "etcd://" + srv.ClientURL.Host, "--json"}, &out, &errb); code != exitOK || strings.TrimSpace(out.String()) != "[]" {
		t.Fatalf("leases under the default prefix: exit %d, %s %s; want none", code, out.String(), errb.String())
	}
	if code := stop(); code != exitOK {
		t.Fatalf("serve exit %d:\n%s", code, stderr)
	}
}
