package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/snowchaos/snowchaos/lease"

	// The lease stores leases list can name by URL (lease.Open).
	_ "github.com/snowchaos/snowchaos/lease/etcd"
	_ "github.com/snowchaos/snowchaos/lease/postgres"
	_ "github.com/snowchaos/snowchaos/lease/zookeeper"
)

func init() {
	register(command{name: "leases", summary: "show worker-ID leases in a lease store (leases list -h)", run: runLeases})
}

const leasesUsage = `usage: snowchaos leases list --dsn DSN [flags]

Lists every worker ID the lease store knows: holder, fencing token, state
(held or free), expiry, and the last issued time recorded for it. It
only reads: a missing Postgres table is reported, not created.

DSN names the store as serve --lease does:
  postgres://user@host:5432/db?sslmode=disable   (table --schema.--table)
  etcd://host:2379[,host:2379][/prefix/]          (default prefix /snowchaos/leases/)
  zk://host:2181[,host:2181][/root]               (default root /snowchaos/leases)
  memory                                          (this process's: always empty)

Exit codes: 0 listed, 2 bad flags or the store unreachable.
`

// leaseRow is one line of the listing (also its JSON form).
type leaseRow struct {
	lease.Lease
	State      string `json:"state"`
	ExpiresIn  string `json:"expires_in,omitempty"`
	LastIssued string `json:"last_issued,omitempty"`
}

func runLeases(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "list" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, leasesUsage)
			return exitOK
		}
		fmt.Fprint(stderr, leasesUsage)
		return exitInvalid
	}
	fs := flag.NewFlagSet("leases list", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "lease store: postgres://..., etcd://host:port[/prefix/] or zk://host:port[/root]")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	schema := fs.String("schema", "public", "Postgres schema of the lease table")
	table := fs.String("table", "worker_leases", "Postgres lease table")
	timeout := fs.Duration("timeout", 10*time.Second, "deadline for reaching the store")
	if code, ok := parseFlags(fs, args[1:], stderr, leasesUsage+"\nflags:\n"); !ok {
		return code
	}
	if *dsn == "" {
		fmt.Fprintln(stderr, "snowchaos leases list: --dsn is required")
		return exitInvalid
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := lease.Open(ctx, *dsn, lease.OpenOptions{Schema: *schema, Table: *table, ReadOnly: true})
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos leases list: %v\n", err)
		return exitInvalid
	}
	defer st.Close()
	ls, err := st.List(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos leases list: %v\n", err)
		return exitInvalid
	}
	at, err := st.Now(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos leases list: %v\n", err)
		return exitInvalid
	}
	rows := leaseRows(ls, at)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			fmt.Fprintf(stderr, "snowchaos leases list: %v\n", err)
			return exitInvalid
		}
		return exitOK
	}
	writeLeaseTable(stdout, rows)
	return exitOK
}

// leaseRows describes each lease at store time now.
func leaseRows(ls []lease.Lease, now time.Time) []leaseRow {
	rows := make([]leaseRow, 0, len(ls))
	for _, l := range ls {
		r := leaseRow{Lease: l, State: "free"}
		if !l.ExpiredAt(now) {
			r.State = "held"
			r.ExpiresIn = l.LeasedUntil.Sub(now).Round(time.Millisecond).String()
		}
		if l.LastIssuedMs > 0 {
			r.LastIssued = time.UnixMilli(l.LastIssuedMs).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		rows = append(rows, r)
	}
	return rows
}

func writeLeaseTable(w io.Writer, rows []leaseRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHOLDER\tTOKEN\tSTATE\tLEASED UNTIL\tEXPIRES IN\tLAST ISSUED")
	for _, r := range rows {
		until := "-"
		if !r.LeasedUntil.IsZero() {
			until = r.LeasedUntil.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", r.WorkerID, r.Holder, r.Token, r.State, until, orDash(r.ExpiresIn), orDash(r.LastIssued))
	}
	tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(w, "(no worker IDs recorded)")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
