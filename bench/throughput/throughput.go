// Package throughput measures how fast each peer library, snowchaos's
// generator and a Postgres nextval() ticket server issue IDs, at a given
// number of goroutines, with testing.Benchmark, and renders the results as
// a Markdown table beside each one's theoretical ceiling.
package throughput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"github.com/sony/sonyflake"
	sonyflakev2 "github.com/sony/sonyflake/v2"

	"github.com/snowchaos/snowchaos/bench/internal/mdwrite"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/pgindex"
)

// Contender is one way of getting IDs.
type Contender struct {
	// Name is the row name.
	Name string
	// Ceiling is the theoretical ceiling per instance in IDs per second;
	// 0 means none that matters.
	Ceiling float64
	// CeilingNote explains the ceiling.
	CeilingNote string
	// PerOp is how many IDs one op issues (1, or a batch size).
	PerOp int
	// Refusal, when set, says which errors are refusals the contender is
	// built to make (the logical policy past its lead bound): they are
	// counted, not fatal, and their ops issue no IDs.
	Refusal func(error) bool
	// Open returns one op per goroutine, all sharing one instance (one
	// process's generator, or one ticket server), and a func that frees
	// what Open took.
	Open func(goroutines int) (ops []func() error, close func(), err error)
}

// shared returns an Open whose goroutines all call next on one instance
// built by mk.
func shared(mk func() (func() error, error)) func(int) ([]func() error, func(), error) {
	return func(g int) ([]func() error, func(), error) {
		next, err := mk()
		if err != nil {
			return nil, nil, err
		}
		ops := make([]func() error, g)
		for i := range ops {
			ops[i] = next
		}
		return ops, func() {}, nil
	}
}

// Snowchaos is snowchaos's generator with policy p on the default layout
// and the system clock, one Next per op.
func Snowchaos(p generator.Policy) Contender {
	var refusal func(error) bool
	if p == generator.PolicyLogical {
		refusal = func(err error) bool { return errors.Is(err, generator.ErrLeadExceeded) }
	}
	note := "41/10/12: 4096 per 1 ms"
	if p == generator.PolicyLogical {
		note += "; bursts past it by borrowing up to MaxLead (1 s) of future ticks, then refuses"
	}
	return Contender{
		Refusal:     refusal,
		Name:        "snowchaos " + p.String(),
		Ceiling:     4096 * 1000,
		CeilingNote: note,
		PerOp:       1,
		Open: shared(func() (func() error, error) {
			g, err := generator.New(generator.Settings{Node: 1, Policy: p})
			if err != nil {
				return nil, err
			}
			return func() error { _, err := g.Next(); return err }, nil
		}),
	}
}

// SnowchaosBatch is snowchaos's generator (wait policy) filling n IDs per
// NextN call.
func SnowchaosBatch(n int) Contender {
	return Contender{
		Name:        fmt.Sprintf("snowchaos wait, NextN(%d)", n),
		Ceiling:     4096 * 1000,
		CeilingNote: "41/10/12: 4096 per 1 ms",
		PerOp:       n,
		Open: func(g int) ([]func() error, func(), error) {
			gen, err := generator.New(generator.Settings{Node: 1})
			if err != nil {
				return nil, nil, err
			}
			ops := make([]func() error, g)
			for i := range ops {
				buf := make([]generator.ID, n)
				ops[i] = func() error { _, err := gen.NextN(buf); return err }
			}
			return ops, func() {}, nil
		},
	}
}

// Peers returns the peer libraries, each used as its documentation shows.
func Peers() []Contender {
	return []Contender{
		{
			Name: "bwmarrin/snowflake", Ceiling: 4096 * 1000, CeilingNote: "41/10/12: 4096 per 1 ms", PerOp: 1,
			Open: shared(func() (func() error, error) {
				n, err := snowflake.NewNode(1)
				if err != nil {
					return nil, err
				}
				return func() error { n.Generate(); return nil }, nil
			}),
		},
		{
			Name: "sony/sonyflake", Ceiling: 256 * 100, CeilingNote: "39/8/16: 256 per 10 ms", PerOp: 1,
			Open: shared(func() (func() error, error) {
				sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
				if err != nil {
					return nil, err
				}
				return func() error { _, err := sf.NextID(); return err }, nil
			}),
		},
		{
			Name: "sony/sonyflake/v2", Ceiling: 256 * 100, CeilingNote: "39/8/16: 256 per 10 ms", PerOp: 1,
			Open: shared(func() (func() error, error) {
				sf, err := sonyflakev2.New(sonyflakev2.Settings{MachineID: func() (int, error) { return 1, nil }})
				if err != nil {
					return nil, err
				}
				return func() error { _, err := sf.NextID(); return err }, nil
			}),
		},
		{
			Name: "google/uuid NewV7", CeilingNote: "none: a 12-bit sub-ms counter, then runs ahead of the clock", PerOp: 1,
			Open: shared(func() (func() error, error) {
				return func() error { _, err := uuid.NewV7(); return err }, nil
			}),
		},
		{
			Name: "oklog/ulid Make", CeilingNote: "none: 80-bit monotonic entropy per ms", PerOp: 1,
			Open: shared(func() (func() error, error) {
				return func() error { ulid.Make(); return nil }, nil
			}),
		},
	}
}

// Postgres returns the ticket-server contenders: one nextval() round trip
// per ID, and batch IDs per round trip with generate_series. Each
// goroutine has its own connection; the sequence is created by Open and
// dropped by its close.
func Postgres(dsn string, batch int) []Contender {
	open := func(perOp int, query string) func(int) ([]func() error, func(), error) {
		return func(g int) ([]func() error, func(), error) {
			ctx := context.Background()
			seq := fmt.Sprintf("snowchaos_ticket_%d_%d", os.Getpid(), time.Now().UnixNano())
			var conns []*pgx.Conn
			closeAll := func() {
				if len(conns) > 0 {
					_, _ = conns[0].Exec(ctx, "DROP SEQUENCE IF EXISTS "+seq)
				}
				for _, c := range conns {
					c.Close(ctx)
				}
			}
			for range g {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				conns = append(conns, c)
			}
			if _, err := conns[0].Exec(ctx, "CREATE SEQUENCE "+seq); err != nil {
				closeAll()
				return nil, nil, err
			}
			q := strings.ReplaceAll(query, "SEQ", seq)
			ops := make([]func() error, g)
			for i, c := range conns {
				if perOp == 1 {
					ops[i] = func() error {
						var id int64
						return c.QueryRow(ctx, q).Scan(&id)
					}
					continue
				}
				ops[i] = func() error {
					rows, err := c.Query(ctx, q, perOp)
					if err != nil {
						return err
					}
					n := 0
					for rows.Next() {
						var id int64
						if err := rows.Scan(&id); err != nil {
							rows.Close()
							return err
						}
						n++
					}
					rows.Close()
					if err := rows.Err(); err != nil {
						return err
					}
					if n != perOp {
						return fmt.Errorf("got %d IDs, want %d", n, perOp)
					}
					return nil
				}
			}
			return ops, closeAll, nil
		}
	}
	return []Contender{
		{Name: "Postgres nextval()", CeilingNote: "one round trip per ID", PerOp: 1,
			Open: open(1, "SELECT nextval('SEQ')")},
		{Name: fmt.Sprintf("Postgres nextval() x%d", batch), CeilingNote: fmt.Sprintf("one round trip per %d IDs (generate_series)", batch), PerOp: batch,
			Open: open(batch, "SELECT nextval('SEQ') FROM generate_series(1, $1)")},
	}
}

// Result is one contender at one number of goroutines.
type Result struct {
	Contender  Contender
	Goroutines int
	// IDs is how many IDs the measured run issued in Elapsed.
	IDs int64
	// Refused counts the ops refused (see Contender.Refusal).
	Refused int64
	Elapsed time.Duration
	// Err is why the contender could not be measured.
	Err error
}

// PerSecond returns IDs per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.IDs) / r.Elapsed.Seconds()
}

// NsPerID returns nanoseconds per ID (wall time over all goroutines).
func (r Result) NsPerID() float64 {
	if r.IDs == 0 {
		return 0
	}
	return float64(r.Elapsed.Nanoseconds()) / float64(r.IDs)
}

// Measure runs c with g goroutines under testing.Benchmark (for the
// -test.benchtime in force) and returns the last, longest run.
func Measure(c Contender, g int) Result {
	res := Result{Contender: c, Goroutines: g}
	var mu sync.Mutex
	var refused atomic.Int64
	fail := func(err error) {
		mu.Lock()
		if res.Err == nil {
			res.Err = err
		}
		mu.Unlock()
	}
	br := testing.Benchmark(func(b *testing.B) {
		refused.Store(0)
		ops, closeFn, err := c.Open(g)
		if err != nil {
			fail(err)
			return
		}
		defer closeFn()
		b.ResetTimer()
		var wg sync.WaitGroup
		for i, op := range ops {
			n := b.N / g
			if i < b.N%g {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if err := op(); err != nil {
						if c.Refusal != nil && c.Refusal(err) {
							refused.Add(1)
							continue
						}
						fail(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	if res.Err == nil && br.N == 0 {
		res.Err = errors.New("benchmark did not run")
	}
	res.Refused = refused.Load()
	res.IDs = (int64(br.N) - res.Refused) * int64(c.PerOp)
	res.Elapsed = br.T
	return res
}

// Machine describes where a table was measured.
type Machine struct {
	CPU       string
	Cores     int
	Go        string
	OS        string
	Postgres  string
	Load      string // /proc/loadavg's 1-minute figure at the start
	BenchTime time.Duration
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.Load = f[0]
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Render writes the results as a Markdown table: per contender, its
// ceiling and, per goroutine count, IDs per second, ns per ID and the
// ratio to the reference (snowchaos's generator) at the same count.
func Render(w io.Writer, m Machine, results []Result, reference string, counts []int) error {
	ew := &mdwrite.Writer{W: w}
	ew.Printf("Machine: %s, %d cores, %s, %s", m.CPU, m.Cores, m.Go, m.OS)
	if m.Postgres != "" {
		ew.Printf(", %s", m.Postgres)
	}
	if m.Load != "" {
		ew.Printf(", load average %s at the start", m.Load)
	}
	ew.Printf(". testing.Benchmark, benchtime %s, one run.\n\n", m.BenchTime)
	ref := map[int]float64{}
	byName := map[string]map[int]Result{}
	var names []string
	for _, r := range results {
		if byName[r.Contender.Name] == nil {
			byName[r.Contender.Name] = map[int]Result{}
			names = append(names, r.Contender.Name)
		}
		byName[r.Contender.Name][r.Goroutines] = r
		if r.Contender.Name == reference && r.Err == nil {
			ref[r.Goroutines] = r.PerSecond()
		}
	}
	ew.Printf("| contender | ceiling per instance |")
	for _, g := range counts {
		ew.Printf(" IDs/s (%s) | ns/ID | vs %s |", goroutines(g), reference)
	}
	ew.Printf("\n|---|---|")
	for range counts {
		ew.Printf("--:|--:|--:|")
	}
	ew.Printf("\n")
	for _, name := range names {
		row := byName[name]
		var c Contender
		for _, r := range row {
			c = r.Contender
		}
		ceiling := c.CeilingNote
		if c.Ceiling > 0 {
			ceiling = fmt.Sprintf("%s/s (%s)", count(c.Ceiling), c.CeilingNote)
		}
		ew.Printf("| %s | %s |", name, ceiling)
		for _, g := range counts {
			r, ok := row[g]
			switch {
			case !ok:
				ew.Printf(" — | — | — |")
			case r.Err != nil:
				ew.Printf(" unavailable: %s | — | — |", oneLine(r.Err.Error()))
			default:
				ratio := "—"
				if ref[g] > 0 {
					ratio = fmt.Sprintf("%.3g×", r.PerSecond()/ref[g])
				}
				refused := ""
				if r.Refused > 0 {
					refused = fmt.Sprintf(" (%s calls refused)", count(float64(r.Refused)))
				}
				ew.Printf(" %s%s | %s | %s |", count(r.PerSecond()), refused, nanos(r.NsPerID()), ratio)
			}
		}
		ew.Printf("\n")
	}
	return ew.Err
}

func goroutines(g int) string {
	if g == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", g)
}

// count renders a rate, rounded, with thousands separators.
func count(v float64) string { return pgindex.Thousands(int64(v + 0.5)) }

func nanos(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e4:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	case ns >= 100:
		return fmt.Sprintf("%.0f ns", ns)
	}
	return fmt.Sprintf("%.1f ns", ns)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
