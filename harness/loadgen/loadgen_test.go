package loadgen

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
)

// exactHits is the reference: the hits due by t under the stages, the
// integral of their rate.
func exactHits(stages []Stage, t time.Duration) float64 {
	var h float64
	for _, s := range stages {
		x := min(t, s.Duration).Seconds()
		if x <= 0 {
			break
		}
		h += s.From*x + (s.To-s.From)/s.Duration.Seconds()*x*x/2
		t -= s.Duration
	}
	return h
}

// attack runs p as vegeta's attacker does, every hit sent when due, and
// returns when each was sent.
func attack(t *testing.T, p *StagedPacer) []time.Duration {
	var sent []time.Duration
	var elapsed time.Duration
	for {
		w, stop := p.Pace(elapsed, uint64(len(sent)))
		if stop {
			return sent
		}
		if w < 0 || len(sent) > 1e6 {
			t.Fatalf("Pace(%v, %d) = %v", elapsed, len(sent), w)
		}
		elapsed += w
		sent = append(sent, elapsed)
	}
}

func TestStagedPacer(t *testing.T) {
	for _, stages := range [][]Stage{
		{Constant(100, time.Second), Ramp(100, 300, 2*time.Second), Constant(0, time.Second)},
		{Ramp(0, 1000, time.Second), Ramp(1000, 0, time.Second)},
		{Constant(3, 500*time.Millisecond), Constant(0.5, 3*time.Second), Ramp(1, 100, 10*time.Second)},
		{Constant(0, 200*time.Millisecond), Constant(333.3, time.Second)},
	} {
		p, err := NewStagedPacer(stages...)
		if err != nil {
			t.Fatal(err)
		}
		sent := attack(t, p)
		// Each hit sent when the reference has it due (a ramp's steps
		// stray from it by slope·step²/8, an eighth of a hit at most
		// here); all of them sent.
		for k, at := range sent {
			if h := exactHits(stages, at); math.Abs(h-float64(k+1)) > 0.15 {
				t.Fatalf("%v: hit %d sent at %v, when %.2f were due", p, k+1, at, h)
			}
		}
		if want := exactHits(stages, p.Duration()); math.Abs(float64(len(sent))-want) > 1 {
			t.Errorf("%v: %d hits, want %.1f", p, len(sent), want)
		}
		if len(sent) > 0 && sent[len(sent)-1] > p.Duration() {
			t.Errorf("%v: a hit at %v, after the stages", p, sent[len(sent)-1])
		}
	}

	p, err := NewStagedPacer(Constant(100, time.Second), Ramp(100, 300, 2*time.Second), Constant(0, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Duration
		rate float64
	}{{0, 100}, {500 * time.Millisecond, 100}, {2 * time.Second, 200}, {3 * time.Second, 0}, {5 * time.Second, 0}} {
		if r := p.Rate(tc.at); math.Abs(r-tc.rate) > 1 {
			t.Errorf("Rate(%v) = %v, want %v", tc.at, r, tc.rate)
		}
	}
	// Behind schedule: hit at once.
	if w, stop := p.Pace(time.Second, 10); w != 0 || stop {
		t.Errorf("behind: Pace = %v, %v", w, stop)
	}
	// On schedule at 100/s: the next hit is 10ms away.
	if w, stop := p.Pace(time.Second, 100); stop || w < 9*time.Millisecond || w > 11*time.Millisecond {
		t.Errorf("on time: Pace = %v, %v", w, stop)
	}
	// All 500 hits sent: nothing more fits, stop.
	if _, stop := p.Pace(3*time.Second+time.Millisecond, 500); !stop {
		t.Error("Pace did not stop after the last hit")
	}
	if _, stop := p.Pace(4*time.Second, 0); !stop {
		t.Error("Pace did not stop after the stages")
	}
	for _, bad := range [][]Stage{nil, {Constant(-1, time.Second)}, {Constant(1, 0)}, {Ramp(1, math.Inf(1), time.Second)}, {Constant(math.NaN(), time.Second)}, {Constant(2e9, time.Second)}} {
		if _, err := NewStagedPacer(bad...); !errors.Is(err, ErrConfig) {
			t.Errorf("NewStagedPacer(%v) = %v, want ErrConfig", bad, err)
		}
	}
}

// testNode starts a server node with the given worker ID.
func testNode(t *testing.T, worker int64) (*httptest.Server, *generator.Generator) {
	t.Helper()
	nd, err := node.New(context.Background(), node.Config{Settings: generator.Settings{Node: worker}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Node: nd, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); nd.Stop(context.Background(), true) })
	return ts, nd.Generator()
}

func TestRunVerifiesEveryID(t *testing.T) {
	a, ga := testNode(t, 1)
	b, gb := testNode(t, 2)
	for _, tc := range []struct {
		name  string
		batch int
		json  bool
	}{{"single", 0, false}, {"single-json", 1, true}, {"batch", 64, false}, {"batch-json", 100, true}} {
		t.Run(tc.name, func(t *testing.T) {
			v := verify.NewConcurrent(verify.Config{})
			var sunk atomic.Uint64
			rep, err := Run(context.Background(), Config{
				Nodes: []string{a.URL, b.URL}, Batch: tc.batch, JSON: tc.json,
				Stages:   []Stage{Ramp(200, 1000, 300*time.Millisecond), Constant(1000, 200*time.Millisecond)},
				Verifier: v,
				Sink:     func(r *Response) { sunk.Add(uint64(len(r.IDs))) },
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
			res := v.Result()
			if rep.Requests == 0 || rep.OK != rep.Requests || rep.Failures.Total() != 0 {
				t.Fatalf("report %v; errors %q", rep, rep.Errors)
			}
			want := uint64(max(tc.batch, 1)) * rep.OK
			if rep.IDs != want || rep.Verified != want || rep.Dropped != 0 || sunk.Load() != want {
				t.Fatalf("IDs %d, verified %d, dropped %d, sunk %d; want %d", rep.IDs, rep.Verified, rep.Dropped, sunk.Load(), want)
			}
			if res.IDs != want || res.Duplicates != 0 || res.Calls.Total != rep.Requests || res.Calls.OK != rep.OK {
				t.Fatalf("verifier: %d IDs, %d dups, %+v calls; report %v", res.IDs, res.Duplicates, res.Calls, rep)
			}
			if len(rep.Nodes) != 2 || rep.Nodes[0].OK == 0 || rep.Nodes[1].OK == 0 || rep.Nodes[0].OK+rep.Nodes[1].OK != rep.OK {
				t.Fatalf("per node %+v", rep.Nodes)
			}
			if rep.Latency.P50 <= 0 || rep.Latency.P99 < rep.Latency.P50 {
				t.Fatalf("latency %+v", rep.Latency)
			}
		})
	}
	if got := ga.Stats().Issued + gb.Stats().Issued; got == 0 {
		t.Fatal("nothing issued")
	}
}

func TestRunMaxRateBoundedByCount(t *testing.T) {
	a, _ := testNode(t, 1)
	rep, err := Run(context.Background(), Config{Nodes: []string{a.URL}, Workers: 4, MaxRequests: 500, Duration: time.Minute, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 500 || rep.OK != 500 || rep.IDs != 5000 {
		t.Fatalf("report %v", rep)
	}
}

func TestRunCountsFailuresByCause(t *testing.T) {
	var mode atomic.Int32
	block := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			w.Write([]byte("12\n"))
		case 1:
			w.Write([]byte("not an id\n"))
		case 2:
			w.Write([]byte("1\n2\n")) // two IDs for a single request
		case 3:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			w.Write([]byte(`{"error":"unavailable","detail":"generator: clock moved backwards by 1s (policy refuse)"}`))
		case 4:
			<-block
		}
	})
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer close(block) // runs first: frees the blocked handlers
	v := verify.NewConcurrent(verify.Config{})
	iss := v.Issuer("fake", 0, 0)
	for _, tc := range []struct {
		mode  int32
		check func(*Report) bool
	}{
		{1, func(r *Report) bool { return r.Failures.BadBody == r.Requests && r.IDs == 0 }},
		{2, func(r *Report) bool { return r.Failures.BadBody == r.Requests && r.IDs == 0 }},
		{3, func(r *Report) bool { return r.Failures.Status == r.Requests && r.StatusCodes[503] == r.Requests }},
		{4, func(r *Report) bool { return r.Failures.Timeout == r.Requests }},
	} {
		mode.Store(tc.mode)
		rep, err := Run(context.Background(), Config{Nodes: []string{ts.URL}, Workers: 2, MaxRequests: 6, Duration: 10 * time.Second,
			Timeout: 100 * time.Millisecond, Verifier: v, Issuers: []verify.IssuerID{iss}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Requests != 6 || !tc.check(rep) || rep.OK != 0 {
			t.Errorf("mode %d: %v; errors %q", tc.mode, rep, rep.Errors)
		}
	}
	res := v.Result()
	if res.Calls.Total != 24 || res.Calls.Refused != 6 || res.Calls.Errors != 18 {
		t.Errorf("verifier calls %+v", res.Calls)
	}
	// Connection refused: a closed server.
	dead := httptest.NewServer(h)
	url := dead.URL
	dead.Close()
	rep, err := Run(context.Background(), Config{Nodes: []string{url}, Workers: 2, MaxRequests: 5, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failures.Connection != 5 || rep.StatusCodes[0] != 5 {
		t.Errorf("dead node: %v", rep)
	}
}

// TestNodeKilledMidLoad kills one of two nodes during a run: the run
// continues, the dead node's requests are connection failures, and every ID
// received is still verified.
func TestNodeKilledMidLoad(t *testing.T) {
	a, _ := testNode(t, 1)
	b, _ := testNode(t, 2)
	v := verify.NewConcurrent(verify.Config{})
	var seen atomic.Int64
	killed := make(chan struct{})
	rep, err := Run(context.Background(), Config{
		Nodes: []string{a.URL, b.URL}, Batch: 10, Stages: []Stage{Constant(800, 600*time.Millisecond)}, Verifier: v,
		Timeout: time.Second,
		Sink: func(r *Response) {
			if seen.Add(1) == 100 {
				go func() {
					b.CloseClientConnections()
					b.Close()
					close(killed)
				}()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-killed
	t.Log(rep)
	if rep.Nodes[1].Failures.Connection == 0 || rep.Nodes[0].Failures.Total() != 0 || rep.Nodes[0].OK == 0 {
		t.Fatalf("per node %+v", rep.Nodes)
	}
	if rep.Nodes[0].OK < rep.Nodes[1].OK {
		t.Fatalf("the live node served less than the killed one: %+v", rep.Nodes)
	}
	res := v.Result()
	if res.Duplicates != 0 || res.IDs != rep.IDs || rep.Dropped != 0 {
		t.Fatalf("verifier %d IDs %d dups; report %v", res.IDs, res.Duplicates, rep)
	}
}

// TestClonedWorkerIsCaught is the negative control: two nodes with the
// same worker ID and no lease issue the same IDs, and the verifier, fed
// live, must see it.
func TestClonedWorkerIsCaught(t *testing.T) {
	mk := func() string {
		ts, _ := testNode(t, 5)
		return ts.URL
	}
	a, b := mk(), mk()
	v := verify.NewConcurrent(verify.Config{})
	var dups atomic.Int64
	rep, err := Run(context.Background(), Config{Nodes: []string{a, b}, Batch: 50, Workers: 4, Duration: 5 * time.Second, MaxRequests: 4000, Verifier: v,
		Sink: func(r *Response) {}})
	if err != nil {
		t.Fatal(err)
	}
	res := v.Result()
	dups.Store(int64(res.Duplicates))
	if res.Duplicates == 0 {
		t.Fatalf("cloned worker not caught: %v, verifier %d IDs", rep, res.IDs)
	}
	if len(res.DuplicatePairs) == 0 || res.DuplicatePairs[0].First.Worker != 5 {
		t.Fatalf("pairs %+v", res.DuplicatePairs)
	}
	t.Logf("clone caught: %d duplicates between %s and %s", res.Duplicates, res.DuplicatePairs[0].First, res.DuplicatePairs[0].Second)
}

func TestConfigChecks(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:80", "http://example.com", "http://[2001:db8::1]:80"} {
		if err := CheckLoopback(u); !errors.Is(err, ErrRemote) {
			t.Errorf("CheckLoopback(%q) = %v, want ErrRemote", u, err)
		}
		if _, err := Run(context.Background(), Config{Nodes: []string{u}}); !errors.Is(err, ErrRemote) {
			t.Errorf("Run(%q) = %v, want ErrRemote", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:80", "http://localhost:1", "http://[::1]:2"} {
		if err := CheckLoopback(u); err != nil {
			t.Errorf("CheckLoopback(%q) = %v", u, err)
		}
	}
	for name, c := range map[string]Config{
		"no nodes":  {},
		"bad url":   {Nodes: []string{"ftp://127.0.0.1"}},
		"batch":     {Nodes: []string{"http://127.0.0.1:1"}, Batch: -1},
		"too long":  {Nodes: []string{"http://127.0.0.1:1"}, Duration: 2 * MaxDuration},
		"workers":   {Nodes: []string{"http://127.0.0.1:1"}, Workers: 10, MaxWorkers: 5},
		"bad stage": {Nodes: []string{"http://127.0.0.1:1"}, Stages: []Stage{Constant(1, -1)}},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
