// Package pgtest connects tests to the real Postgres they need: the DSN in
// $SNOWCHAOS_PG_DSN, else postgres://postgres@127.0.0.1:5432/test (see
// verify/pgoracle.DSN). When it cannot be reached the test skips outside
// CI and fails with CI=true (testenv.Missing).
//
// It is the one test helper that imports pgx, so the rest of
// internal/testenv stays free of it.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify/pgoracle"
)

// DSN returns the test database's connection string: $SNOWCHAOS_PG_DSN,
// else pgoracle.DefaultDSN.
func DSN() string { return pgoracle.DSN("") }

// Connect opens a connection to DSN() within 5 s, closed when the test
// ends, or calls testenv.Missing. It returns the connection and the DSN.
func Connect(t testing.TB) (*pgx.Conn, string) {
	t.Helper()
	dsn := DSN()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		testenv.Missing(t, "Postgres at %s (set %s): %v", dsn, pgoracle.EnvDSN, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn, dsn
}
