package throughput

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv/pgtest"
)

// TestMain runs every measurement for a fixed, small number of ops.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := flag.Set("test.benchtime", "50x"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func TestEachContenderIssues(t *testing.T) {
	cs := append([]Contender{Snowchaos(generator.PolicyWait), Snowchaos(generator.PolicyLogical), SnowchaosBatch(10)}, Peers()...)
	var results []Result
	for _, c := range cs {
		for _, g := range []int{1, 2} {
			r := Measure(c, g)
			if r.Err != nil {
				t.Fatalf("%s at %d: %v", c.Name, g, r.Err)
			}
			if r.IDs < int64(50*c.PerOp) || r.PerSecond() <= 0 || r.NsPerID() <= 0 {
				t.Fatalf("%s at %d: %d IDs in %s", c.Name, g, r.IDs, r.Elapsed)
			}
			results = append(results, r)
		}
	}
	var b strings.Builder
	m := Machine{CPU: "test CPU", Cores: 2, Go: "go", OS: "os", BenchTime: time.Second}
	if err := Render(&b, m, append(results, Result{Contender: Contender{Name: "broken", CeilingNote: "x"}, Goroutines: 1, Err: context.Canceled}), "snowchaos wait", []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Machine: test CPU, 2 cores", "| snowchaos wait | 4,096,000/s", " 1× |", "| sony/sonyflake | 25,600/s", "| broken | x | unavailable: context canceled | — | — | — | — | — |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestPostgresTicketServer(t *testing.T) {
	_, dsn := pgtest.Connect(t)
	for _, con := range Postgres(dsn, 100) {
		for _, g := range []int{1, 2} {
			r := Measure(con, g)
			if r.Err != nil {
				t.Fatalf("%s at %d: %v", con.Name, g, r.Err)
			}
			if r.IDs < int64(50*con.PerOp) {
				t.Fatalf("%s at %d: %d IDs", con.Name, g, r.IDs)
			}
		}
	}
}

func TestCount(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 4096000: "4,096,000", 25600: "25,600"} {
		if got := count(v); got != want {
			t.Errorf("count(%v) = %q, want %q", v, got, want)
		}
	}
}
