package sink

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

// BenchmarkIngest measures the sink's wall time per ID for 64 bodies of
// 4,096 Snowflakes (8 nodes interleaved, one tick per body, received in
// that tick), as plain lines and as one JSON
// array per body, against verify.Verifier fed the same IDs directly in the
// same iteration: x-lines and x-json are what parsing and batching cost
// over verifying alone.
func BenchmarkIngest(b *testing.B) {
	const perBody = 4096
	var plain, js [][]byte
	var ids [][]generator.ID
	for body := range 64 {
		var p, j bytes.Buffer
		var raw []generator.ID
		j.WriteByte('[')
		for k := range perBody {
			id, _ := dl.Compose(int64(1_000_000+body), int64(k%8), int64(k/8))
			raw = append(raw, id)
			fmt.Fprintf(&p, "%d\n", id)
			if k > 0 {
				j.WriteByte(',')
			}
			fmt.Fprintf(&j, "%q", id.String())
		}
		j.WriteString("]\n")
		plain, js, ids = append(plain, p.Bytes()), append(js, j.Bytes()), append(ids, raw)
	}
	// Each body's IDs are of one tick, received during that tick.
	tickNs := func(body int) int64 {
		return dl.Epoch.UnixNano() + int64(1_000_000+body)*int64(time.Millisecond) + 500_000
	}
	ingest := func(bodies [][]byte) {
		calls := 0
		s, _ := New(Config{Now: func() int64 { calls++; return tickNs((calls - 1) / 2) }})
		for _, body := range bodies {
			if res, err := s.Ingest(body, Source{}); err != nil || res.IDs != perBody || res.Duplicates != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	direct := func() {
		v := verify.New(verify.Config{})
		var iss [8]verify.IssuerID
		for n := range iss {
			iss[n] = v.Issuer(fmt.Sprint("node-", n), 0, int64(n))
		}
		// One call per ID: consecutive IDs are of different nodes, so the
		// sink makes one call per ID too.
		for body, raw := range ids {
			ref := tickNs(body)
			for k := range raw {
				v.Observe(verify.Observation{Issuer: iss[k%8], RefStart: ref, RefEnd: ref, IDs: raw[k : k+1]})
			}
		}
	}
	// The three in turn in each iteration, so that the machine's load
	// weighs on all alike.
	var tl, tj, tv time.Duration
	for range b.N {
		tl += timed(func() { ingest(plain) })
		tj += timed(func() { ingest(js) })
		tv += timed(direct)
	}
	n := float64(b.N * len(ids) * perBody)
	b.ReportMetric(float64(tl.Nanoseconds())/n, "lines-ns/ID")
	b.ReportMetric(float64(tj.Nanoseconds())/n, "json-ns/ID")
	b.ReportMetric(float64(tv.Nanoseconds())/n, "verifier-ns/ID")
	b.ReportMetric(float64(tl)/float64(tv), "x-lines")
	b.ReportMetric(float64(tj)/float64(tv), "x-json")
}

// timed returns how long f took, after a garbage collection.
func timed(f func()) time.Duration {
	runtime.GC()
	t0 := time.Now()
	f()
	return time.Since(t0)
}
