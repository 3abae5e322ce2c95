package soak

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Write writes r as text: the setup, a timeline of the serve process
// (every 30 s: incarnation, RSS, goroutines, requests answered and failed,
// IDs so far), the events, the faults, the sink's verdict, the flatness
// and the verdict.
func Write(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	c := r.Config
	ew.printf("soak: %s of snowchaos serve (--checkpoint, --lease on a Postgres cluster of its own, --policy wait, --lease-ttl %s)\n", c.Duration, c.LeaseTTL)
	ew.printf("  load: %d requests/s of %d IDs (GET /v1/ids) on %d connections, every ID forwarded to snowchaos verify --listen\n", c.Rate, c.Batch, c.Clients)
	ew.printf("  faults: kill -9 every %s; a clock fault through the admin API every %s (%d kinds in turn); the lease store crashed at %s for %s\n",
		c.RestartEvery, c.FaultEvery, len(Rotation), c.OutageAt, c.OutageFor)
	ew.printf("  load average: %s at the start, %s at the end\n\n", r.LoadStart, r.LoadEnd)

	ew.printf("  %5s  %3s  %8s  %10s  %9s  %8s  %6s\n", "time", "inc", "rss MiB", "goroutines", "sink MiB", "req ok", "failed")
	var ok, failed uint64
	next := time.Duration(0)
	for i, sm := range r.Samples {
		sec := min(int(sm.At/time.Second), len(r.OK)-1)
		if sm.At < next && (i != len(r.Samples)-1 || sm.At < next-20*time.Second) {
			continue // every 30 s, and the last sample unless a row is 10 s before it
		}
		next = sm.At.Truncate(30*time.Second) + 30*time.Second
		ok, failed = 0, 0
		for j := max(0, sec-29); j <= sec; j++ {
			ok += r.OK[j]
			failed += r.Failed[j]
		}
		g := fmt.Sprint(sm.Goroutines)
		if sm.Goroutines < 0 {
			g = "-"
		}
		ew.printf("  %5s  %3d  %8.1f  %10s  %9.1f  %8d  %6d\n", fmtDur(sm.At), sm.Incarnation, mib(sm.RSS), g, mib(r.SinkRSS[i]), ok, failed)
	}
	ew.printf("  (req ok and failed: the 30 s up to the row)\n\n")

	var tot, bad uint64
	for i := range r.OK {
		tot += r.OK[i]
		bad += r.Failed[i]
	}
	ew.printf("  requests: %d answered with IDs, %d failed (restarts, faults past --max-wait, the store outage)\n", tot, bad)
	ew.printf("  restarts: %d (kill -9), workers by incarnation %v\n", r.Restarts, r.Workers)
	var kinds []string
	for k, n := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	ew.printf("  faults injected: %s; not taken: %d\n", strings.Join(kinds, ", "), len(r.Refused))
	for _, n := range r.Refused {
		ew.printf("    %s\n", n)
	}
	for _, e := range r.Events {
		if strings.HasPrefix(e.What, "lease store") {
			ew.printf("  %s %s\n", fmtDur(e.At), e.What)
		}
	}
	if from, to := outageWindow(r); to > from {
		var o, f uint64
		for j := from; j < to && j < len(r.OK); j++ {
			o += r.OK[j]
			f += r.Failed[j]
		}
		ew.printf("  during the outage and one lease TTL after: %d requests answered, %d failed\n", o, f)
	}
	k := r.Sink
	ew.printf("\n  IDs: %d received and forwarded, %d verified by the sink (%d unique), %d not taken\n", r.Received, k.IDs, k.Unique, r.Unverified)
	ew.printf("  duplicates %d, order violations %d, restart violations %d, bad lines %d; sink verdict %s (exit %d)\n",
		k.Duplicates, k.OrderViolations, k.RestartViolations, k.BadLines, k.Verdict, k.Exit)
	fl, l := r.Flatness, c.Limits
	ew.printf("  flatness (samples after %s of the soak and %s of their process: %d from %d incarnations):\n", l.WarmSoak, l.WarmIncarnation, fl.Samples, fl.Incarnations)
	ew.printf("    RSS slope within incarnations %s MiB/min (limit %g), of the incarnations' means %s MiB/min (limit %g); largest RSS %.1f MiB\n",
		num(fl.Within), l.MaxWithin, num(fl.Between), l.MaxBetween, mib(fl.MaxRSS))
	ew.printf("    goroutines: largest spread within an incarnation %d (limit %d)\n", fl.GoroutineSpread, l.MaxGoroutineSpread)
	if r.Pass {
		ew.printf("verdict: pass\n")
	} else {
		ew.printf("verdict: FAIL\n")
		for _, y := range r.Why {
			ew.printf("  %s\n", y)
		}
	}
	return ew.err
}

// outageWindow is the store outage plus one lease TTL, in seconds of the
// soak.
func outageWindow(r *Report) (from, to int) {
	c := r.Config
	return int(c.OutageAt / time.Second), int((c.OutageAt + c.OutageFor + c.LeaseTTL) / time.Second)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func num(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%+.2f", f)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// WriteSamples writes r's samples as CSV: seconds into the soak, seconds
// into the incarnation, incarnation, serve RSS bytes, goroutines (-1:
// not read), sink RSS bytes.
func WriteSamples(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	ew.printf("at_s,age_s,incarnation,rss_bytes,goroutines,sink_rss_bytes\n")
	for i, sm := range r.Samples {
		ew.printf("%.1f,%.1f,%d,%d,%d,%d\n", sm.At.Seconds(), sm.Age.Seconds(), sm.Incarnation, sm.RSS, sm.Goroutines, r.SinkRSS[i])
	}
	return ew.err
}
