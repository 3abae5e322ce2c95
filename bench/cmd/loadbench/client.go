package main

import (
	"context"
	"fmt"
	"math/bits"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
)

// latHist is a latency histogram with 16 buckets per power of two (a
// quantile is within 1/32 of its true value), cheap enough to record every
// request.
type latHist struct {
	counts [64 * 16]uint64
	n      uint64
}

// bucket returns d's bucket index.
func bucket(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 5
	return 16*(e+1) + int(v>>e) - 16
}

// bucketMid returns the middle of bucket i.
func bucketMid(i int) time.Duration {
	if i < 16 {
		return time.Duration(i)
	}
	e := i/16 - 1
	lo := uint64(16+i%16) << e
	return time.Duration(lo + (uint64(1)<<e)/2)
}

func (h *latHist) add(d time.Duration) { h.counts[bucket(d)]++; h.n++ }

func (h *latHist) merge(o *latHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 without samples).
func (h *latHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return bucketMid(i)
		}
	}
	return bucketMid(len(h.counts) - 1)
}

// loadTarget is what one closed-loop phase requests.
type loadTarget struct {
	base   string // base URL of the server
	path   string // "/v1/id" or "/v1/ids?count=N"
	asJSON bool   // send Accept: application/json
	want   int    // IDs per answer
	// verify receives the IDs of a node's answers (nil for a reference,
	// whose constant answers are parsed but not verified).
	verify func(stream uint64, start, end time.Time, ids []generator.ID, partial string)
}

// loadOutcome is what a closed-loop phase measured.
type loadOutcome struct {
	Requests, IDs, Failures uint64
	Elapsed                 time.Duration
	P50, P99                time.Duration
	FirstError              string
}

// streams numbers the verifier's sequential streams across phases.
var streams atomic.Uint64

// maxConsecutiveFailures stops a connection's loop when the server keeps
// failing (so a dead server costs a few requests, not a busy loop).
const maxConsecutiveFailures = 100

// runClosedLoop keeps conns requests in flight against t for d, each
// connection sending its next request when the last answer is read (the
// load wrk and its kind generate), with fasthttp's client: one request is
// a write and a read on a kept-alive connection, with no allocation.
// Connection i loads targets[i % len(targets)]. Every answer is parsed;
// a node's IDs are handed to its target's verify.
func runClosedLoop(ctx context.Context, targets []loadTarget, conns int, d time.Duration) loadOutcome {
	clients := make([]*fasthttp.HostClient, len(targets))
	for i, t := range targets {
		u, err := url.Parse(t.base)
		if err != nil {
			return loadOutcome{Failures: 1, FirstError: err.Error()}
		}
		clients[i] = &fasthttp.HostClient{
			Addr: u.Host, MaxConns: conns, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			NoDefaultUserAgentHeader: true, MaxIdemponentCallAttempts: 1, MaxResponseBodySize: 64 << 20,
		}
		defer clients[i].CloseIdleConnections()
	}
	var (
		mu    sync.Mutex
		total loadOutcome
		hist  latHist
		wg    sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for w := range conns {
		t, hc := targets[w%len(targets)], clients[w%len(targets)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out loadOutcome
			var h latHist
			stream := streams.Add(1)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(t.base + t.path)
			if t.asJSON {
				req.Header.Set("Accept", "application/json")
			}
			var ids []generator.ID
			fail := func(msg string) {
				out.Failures++
				if out.FirstError == "" {
					out.FirstError = msg
				}
			}
			failedInARow := 0
			for now := time.Now(); now.Before(end) && ctx.Err() == nil && failedInARow < maxConsecutiveFailures; {
				err := hc.Do(req, resp)
				done := time.Now()
				h.add(done.Sub(now))
				ok := false
				switch {
				case err != nil:
					fail(err.Error())
				case resp.StatusCode() != 200:
					fail(fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode(), resp.Body()))
				default:
					ids, err = server.AppendIDs(ids[:0], resp.Body())
					var partial string
					if p := resp.Header.Peek(server.PartialHeader); len(p) > 0 {
						partial = string(p)
					}
					switch {
					case err != nil:
						fail(err.Error())
					case len(ids) != t.want && !(partial != "" && len(ids) < t.want):
						fail(fmt.Sprintf("%d IDs in an answer to a request for %d", len(ids), t.want))
					default:
						ok = true
						out.Requests++
						out.IDs += uint64(len(ids))
						if t.verify != nil {
							t.verify(stream, now, done, ids, partial)
						}
					}
				}
				if ok {
					failedInARow = 0
				} else {
					failedInARow++
				}
				now = done
			}
			mu.Lock()
			defer mu.Unlock()
			total.Requests += out.Requests
			total.IDs += out.IDs
			total.Failures += out.Failures
			if total.FirstError == "" {
				total.FirstError = out.FirstError
			}
			hist.merge(&h)
		}()
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	total.P50, total.P99 = hist.quantile(0.50), hist.quantile(0.99)
	return total
}

// nodeVerifier returns a loadTarget.verify that observes a node's IDs
// with v as issuer id.
func nodeVerifier(v *verify.Concurrent, id verify.IssuerID, sink func(ids []generator.ID)) func(uint64, time.Time, time.Time, []generator.ID, string) {
	return func(stream uint64, start, end time.Time, ids []generator.ID, partial string) {
		outcome := verify.OutcomeOK
		switch {
		case strings.Contains(partial, generator.ErrWaitExceeded.Error()):
			outcome = verify.OutcomeWaitExceeded
		case partial != "":
			outcome = verify.OutcomeRefused
		}
		v.Observe(verify.Observation{Issuer: id, Stream: stream, RefStart: start.UnixNano(), RefEnd: end.UnixNano(), IDs: ids, Outcome: outcome})
		if sink != nil {
			sink(ids)
		}
	}
}
