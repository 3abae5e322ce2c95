package pgoracle

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowchaos/snowchaos/generator"
)

// TicketConfig describes a run of the central ticket counter users build
// instead of Snowflake IDs: a Postgres sequence, each ID one nextval().
type TicketConfig struct {
	// DSN as for Config; empty: DSN("").
	DSN string
	// Batch is the IDs fetched per round trip: 1 is "SELECT nextval(seq)",
	// more is "SELECT nextval(seq) FROM generate_series(1, Batch)".
	// Zero: 1.
	Batch int
	// Conns is the number of connections calling concurrently. Zero: 1.
	Conns int
	// Duration bounds the run. Zero: 2 s.
	Duration time.Duration
	// Clock times the run (monotonic readings). Nil: generator.SystemClock().
	Clock generator.Clock
}

// TicketResult is what a ticket run achieved.
type TicketResult struct {
	// Batch and Conns echo the config.
	Batch, Conns int
	// Calls are round trips; IDs the values fetched.
	Calls, IDs uint64
	// Duration is the measured time.
	Duration time.Duration
	// CallRate and IDRate are per second.
	CallRate, IDRate float64
	// P50 and P99 are round-trip latency percentiles.
	P50, P99 time.Duration
}

// String summarises the result in one line.
func (r TicketResult) String() string {
	return fmt.Sprintf("nextval batch %d x %d conns: %d calls (%.0f/s), %d IDs (%.0f/s), p50 %v p99 %v",
		r.Batch, r.Conns, r.Calls, r.CallRate, r.IDs, r.IDRate, r.P50, r.P99)
}

// Tickets runs the ticket counter: Conns connections fetch IDs from one
// new sequence for Duration, and the sequence is dropped afterwards. The
// error wraps ErrUnavailable when Postgres cannot be used. Each returned
// value is also checked to be unique and the run fails if one repeats
// (a sequence never repeats, so this checks the harness, not Postgres).
func Tickets(ctx context.Context, cfg TicketConfig) (TicketResult, error) {
	if cfg.Batch == 0 {
		cfg.Batch = 1
	}
	if cfg.Conns == 0 {
		cfg.Conns = 1
	}
	if cfg.Duration == 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = generator.SystemClock()
	}
	if cfg.Batch < 1 || cfg.Batch > 1<<20 || cfg.Conns < 1 || cfg.Conns > 256 || cfg.Duration < 0 {
		return TicketResult{}, fmt.Errorf("%w: batch %d, conns %d, duration %v", ErrConfig, cfg.Batch, cfg.Conns, cfg.Duration)
	}
	o := &Oracle{dsn: DSN(cfg.DSN), cfg: Config{ApplicationName: "snowchaos-tickets"}}
	var b [6]byte
	crand.Read(b[:])
	seq := pgx.Identifier{"snowchaos_tickets_" + hex.EncodeToString(b[:])}.Sanitize()
	conns := make([]*pgx.Conn, 0, cfg.Conns)
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for range cfg.Conns {
		c, err := o.connect(ctx)
		if err != nil {
			return TicketResult{}, err
		}
		conns = append(conns, c)
	}
	if _, err := conns[0].Exec(ctx, "CREATE SEQUENCE "+seq); err != nil {
		return TicketResult{}, fmt.Errorf("%w: creating sequence: %v", ErrUnavailable, err)
	}
	defer conns[0].Exec(context.WithoutCancel(ctx), "DROP SEQUENCE IF EXISTS "+seq)
	q := "SELECT nextval('" + seq + "')"
	if cfg.Batch > 1 {
		q = "SELECT nextval('" + seq + "') FROM generate_series(1, $1)"
	}
	mono := func() int64 { _, m := cfg.Clock.Now(); return m }
	type part struct {
		lat []time.Duration
		ids []int64
		err error
	}
	parts := make([]part, cfg.Conns)
	start := mono()
	end := start + int64(cfg.Duration)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[i]
			var args []any
			if cfg.Batch > 1 {
				args = []any{cfg.Batch}
			}
			for t0 := mono(); t0 < end && ctx.Err() == nil; t0 = mono() {
				rows, err := c.Query(ctx, q, args...)
				if err != nil {
					p.err = err
					return
				}
				n := 0
				for rows.Next() {
					var v int64
					if err := rows.Scan(&v); err != nil {
						rows.Close()
						p.err = err
						return
					}
					p.ids = append(p.ids, v)
					n++
				}
				if err := rows.Err(); err != nil {
					p.err = err
					return
				}
				if n != cfg.Batch {
					p.err = fmt.Errorf("%d values for a batch of %d", n, cfg.Batch)
					return
				}
				p.lat = append(p.lat, time.Duration(mono()-t0))
			}
		}()
	}
	wg.Wait()
	r := TicketResult{Batch: cfg.Batch, Conns: cfg.Conns, Duration: time.Duration(mono() - start)}
	var lat []time.Duration
	var all []int64
	for _, p := range parts {
		if p.err != nil {
			return r, fmt.Errorf("%w: nextval: %v", ErrUnavailable, p.err)
		}
		lat = append(lat, p.lat...)
		all = append(all, p.ids...)
	}
	r.Calls, r.IDs = uint64(len(lat)), uint64(len(all))
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return r, fmt.Errorf("pgoracle: sequence value %d returned twice", all[i])
		}
	}
	if s := r.Duration.Seconds(); s > 0 {
		r.CallRate, r.IDRate = float64(r.Calls)/s, float64(r.IDs)/s
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, nil
}
