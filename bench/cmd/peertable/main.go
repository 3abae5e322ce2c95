// Command peertable measures the throughput of each peer library,
// snowchaos's generator (each policy) and a Postgres nextval() ticket
// server, at 1 and 2 goroutines in one run, and prints a Markdown table
// with each one's theoretical ceiling and its ratio to snowchaos's
// generator (wait policy) measured in the same run.
//
//	go run ./cmd/peertable [-benchtime 1s] [-dsn postgres://...] [-o RESULTS.md]
//
// A Postgres that cannot be reached gives "unavailable" rows, not a
// failure (use -require-postgres to fail instead).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/bench/throughput"
	"github.com/snowchaos/snowchaos/generator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	testing.Init()
	fl := flag.NewFlagSet("peertable", flag.ContinueOnError)
	fl.SetOutput(stderr)
	benchtime := fl.Duration("benchtime", time.Second, "how long testing.Benchmark runs each contender at each goroutine count")
	dsn := fl.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "Postgres for the nextval() ticket server (empty: skip)")
	batch := fl.Int("batch", 1000, "IDs per round trip of the batched ticket server")
	counts := fl.String("goroutines", "1,2", "goroutine counts, comma-separated")
	requirePG := fl.Bool("require-postgres", false, "fail when Postgres cannot be reached")
	out := fl.String("o", "", "also write the table to this file")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintf(stderr, "peertable: %v\n", err)
		return 2
	}
	var gs []int
	for _, s := range strings.Split(*counts, ",") {
		g, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || g < 1 {
			fmt.Fprintf(stderr, "peertable: -goroutines %q: want positive integers\n", *counts)
			return 2
		}
		gs = append(gs, g)
	}

	m := throughput.ThisMachine()
	m.BenchTime = *benchtime
	cs := []throughput.Contender{
		throughput.Snowchaos(generator.PolicyWait),
		throughput.Snowchaos(generator.PolicyRefuse),
		throughput.Snowchaos(generator.PolicyLogical),
		throughput.SnowchaosBatch(*batch),
	}
	cs = append(cs, throughput.Peers()...)
	if *dsn != "" {
		v, err := pgVersion(*dsn)
		if err != nil && *requirePG {
			fmt.Fprintf(stderr, "peertable: postgres: %v\n", err)
			return 1
		}
		if err == nil {
			m.Postgres = v
		}
		cs = append(cs, throughput.Postgres(*dsn, *batch)...)
	}
	var results []throughput.Result
	for _, c := range cs {
		for _, g := range gs {
			r := throughput.Measure(c, g)
			if r.Err != nil {
				fmt.Fprintf(stderr, "peertable: %s at %d goroutines: %v\n", c.Name, g, r.Err)
			} else {
				fmt.Fprintf(stderr, "peertable: %-32s %d goroutines: %12.0f IDs/s\n", c.Name, g, r.PerSecond())
			}
			results = append(results, r)
		}
	}
	var b strings.Builder
	if err := throughput.Render(&b, m, results, "snowchaos wait", gs); err != nil {
		fmt.Fprintf(stderr, "peertable: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintf(stderr, "peertable: %v\n", err)
			return 1
		}
	}
	return 0
}

// pgVersion returns the server's version string, shortened.
func pgVersion(dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", err
	}
	return "PostgreSQL " + strings.Fields(v)[0] + " on 127.0.0.1 (loopback)", nil
}
