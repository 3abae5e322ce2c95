package ntpcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/beevik/ntp"
)

// hour24 is one UTC day; leap seconds happen at a UTC midnight.
const hour24 = 24 * time.Hour

// Sample is one query's result: a response, an error, or both (a response
// that failed authentication).
type Sample struct {
	// Response is the server's answer; nil when none arrived.
	Response *ntp.Response
	// Err is the query's error; nil on success.
	Err error
}

// Check queries every server in cfg concurrently, Samples times each, and
// evaluates the answers. It never fails: unreachable servers and invalid
// settings are findings in the Report (an invalid server address gets
// OutcomeError). It returns when every server has answered, failed or timed
// out, or ctx is done: at most about Samples * (Timeout + SampleGap).
func Check(ctx context.Context, cfg Config) Report {
	cfg = cfg.withDefaults()
	results := make([]ServerResult, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range cfg.Servers {
		wg.Go(func() { results[i] = queryServer(ctx, s, cfg) })
	}
	wg.Wait()
	r := Evaluate(cfg, results)
	r.Time = time.Now()
	return r
}

// queryServer takes up to cfg.Samples samples from one server.
func queryServer(ctx context.Context, server string, cfg Config) ServerResult {
	addr, err := ParseServer(server)
	if err != nil {
		return Summarize(server, []Sample{{Err: err}}, cfg)
	}
	var local func() time.Time
	if cfg.LocalTime != nil {
		local = func() time.Time { return cfg.LocalTime(addr) }
	}
	samples := make([]Sample, 0, cfg.Samples)
	for i := 0; i < cfg.Samples; i++ {
		if i > 0 && cfg.SampleGap > 0 {
			t := time.NewTimer(cfg.SampleGap)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			if len(samples) == 0 {
				samples = append(samples, Sample{Err: ctx.Err()})
			}
			break
		}
		resp, err := queryOnce(ctx, addr, cfg.Timeout, local)
		samples = append(samples, Sample{Response: resp, Err: err})
		// A kiss-of-death asks us to stop; nothing listening will not
		// change within this check.
		if o := classify(resp, err); o == OutcomeKissOfDeath || o == OutcomeRefused {
			break
		}
	}
	return Summarize(addr, samples, cfg)
}

// queryOnce sends one NTP query, bounded by timeout and ctx.
func queryOnce(ctx context.Context, addr string, timeout time.Duration, local func() time.Time) (*ntp.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		if rem <= 0 {
			return nil, context.DeadlineExceeded
		}
		timeout = min(timeout, rem)
	}
	var stop func() bool
	opts := ntp.QueryOptions{
		Timeout:       timeout,
		GetSystemTime: local,
		// Dialer is called synchronously by QueryWithOptions; closing the
		// socket when ctx ends unblocks the read at once.
		Dialer: func(_, remote string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "udp", remote)
			if err != nil {
				return nil, err
			}
			stop = context.AfterFunc(ctx, func() { c.Close() })
			return c, nil
		},
	}
	resp, err := ntp.QueryWithOptions(addr, opts)
	if stop != nil {
		stop()
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, err
}

// classify maps one query's result to an Outcome.
func classify(resp *ntp.Response, err error) Outcome {
	if resp == nil || err != nil {
		var ne net.Error
		switch {
		case err == nil:
			return OutcomeError
		case errors.Is(err, syscall.ECONNREFUSED):
			return OutcomeRefused
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			return OutcomeTimeout
		case errors.Is(err, ntp.ErrServerResponseMismatch), errors.Is(err, ntp.ErrInvalidMode),
			errors.Is(err, ntp.ErrInvalidTransmitTime), errors.Is(err, ntp.ErrServerTickedBackwards),
			errors.Is(err, ntp.ErrInvalidTime), errors.Is(err, ntp.ErrAuthFailed):
			return OutcomeInvalid
		}
		return OutcomeError
	}
	switch {
	case resp.Stratum == 0 && resp.KissCode != "":
		return OutcomeKissOfDeath
	case resp.Leap == ntp.LeapNotInSync || resp.Stratum == 0 || resp.Stratum >= 16:
		return OutcomeUnsynchronised
	case resp.Validate() != nil:
		return OutcomeInvalid
	}
	return OutcomeOK
}

// Summarize turns one server's samples into a ServerResult: it keeps the
// valid answer with the lowest round-trip time (else the last answer, else
// the last error) and judges its sanity. It is pure, so recorded responses
// can be replayed through it.
func Summarize(server string, samples []Sample, cfg Config) ServerResult {
	cfg = cfg.withDefaults()
	res := ServerResult{Server: server, Queries: map[Outcome]int{}, Outcome: OutcomeError}
	best, lastAnswer, lastErr := -1, -1, -1
	for i, s := range samples {
		o := classify(s.Response, s.Err)
		res.Queries[o]++
		switch {
		case o == OutcomeOK:
			if best < 0 || s.Response.RTT < samples[best].Response.RTT {
				best = i
			}
		case s.Response != nil:
			lastAnswer = i
		default:
			lastErr = i
		}
	}
	keep := best
	if keep < 0 {
		keep = lastAnswer
	}
	if keep < 0 {
		if lastErr >= 0 {
			res.Outcome = classify(nil, samples[lastErr].Err)
			res.Error = samples[lastErr].Err.Error()
		} else {
			res.Error = "no query sent"
		}
		return res
	}
	r := samples[keep].Response
	res.Answered = true
	res.Outcome = classify(r, samples[keep].Err)
	res.Usable = res.Outcome == OutcomeOK
	res.Offset = r.ClockOffset
	res.RTT = r.RTT
	res.Stratum = r.Stratum
	res.ReferenceID = r.ReferenceString()
	res.KissCode = r.KissCode
	res.Leap = Leap(r.Leap)
	res.RootDelay = r.RootDelay
	res.RootDispersion = r.RootDispersion
	res.RootDistance = r.RootDistance
	res.MinError = r.MinError
	res.ServerTime = r.Time.UTC()
	res.ReferenceTime = r.ReferenceTime.UTC()
	if res.Outcome != OutcomeOK {
		if err := samples[keep].Err; err != nil {
			res.Error = err.Error()
		} else if res.Outcome == OutcomeUnsynchronised {
			res.Error = fmt.Sprintf("not synchronised (leap %d, stratum %d)", r.Leap, r.Stratum)
		} else if res.Outcome == OutcomeKissOfDeath {
			res.Error = "kiss of death " + r.KissCode
		} else if err := r.Validate(); err != nil {
			res.Error = err.Error()
		} else {
			res.Error = string(res.Outcome)
		}
	}
	if best >= 0 {
		var sum float64
		n := 0
		for i, s := range samples {
			if i != best && classify(s.Response, s.Err) == OutcomeOK {
				d := float64(s.Response.ClockOffset - r.ClockOffset)
				sum += d * d
				n++
			}
		}
		if n > 0 {
			res.Jitter = time.Duration(math.Sqrt(sum / float64(n)))
		}
	}
	res.Sane, res.Insane = sanity(r, cfg)
	return res
}

// sanity follows node_exporter's SNTP sanity heuristic (the ntp collector,
// collector/ntp.go, ntpCollector.Update, in github.com/prometheus/node_exporter):
// an answer is sane when Response.Validate passes, its root distance is at
// most the max distance (default 3.46608 s: ntp.org's MAXDIST of 1.5 s plus
// PHI * 2^maxPoll) and its minimum error at most the offset tolerance. While
// a leap second is announced (leap indicator 1 or 2) node_exporter records
// the next UTC midnight (server transmit time truncated to the day, plus a
// day) and keeps it after the flag drops; within 24 h either side of that
// midnight it allows 1 s more minimum error, to tolerate leap smearing. The
// recorded midnight is Config.LeapMidnight here, carried by the caller.
func sanity(r *ntp.Response, cfg Config) (bool, []string) {
	var why []string
	maxErr := cfg.MaxMinError
	leapMidnight := cfg.LeapMidnight
	if r.Leap == ntp.LeapAddSecond || r.Leap == ntp.LeapDelSecond {
		leapMidnight = r.Time.Truncate(hour24).Add(hour24)
	}
	if leapMidnight.Add(-hour24).Before(r.Time) && r.Time.Before(leapMidnight.Add(hour24)) {
		maxErr += time.Second
	}
	if o := classify(r, nil); o == OutcomeUnsynchronised || o == OutcomeKissOfDeath {
		why = append(why, "not synchronised (stratum 0 or 16, or leap 3)")
	} else if err := r.Validate(); err != nil {
		why = append(why, "invalid: "+err.Error())
	}
	if r.RootDistance > cfg.MaxDistance {
		why = append(why, "root distance "+fmtDur(r.RootDistance)+" > "+fmtDur(cfg.MaxDistance))
	}
	if r.MinError > maxErr {
		why = append(why, "min error "+fmtDur(r.MinError)+" > "+fmtDur(maxErr))
	}
	return len(why) == 0, why
}
