package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one soak. The zero value of every field but Bin is the
// default the docs' figures were taken with.
type Config struct {
	// Bin is the snowchaos binary: it runs serve and the verify sink.
	Bin string
	// Duration is how long the load runs; zero: 10 minutes. Bounds:
	// [30s, 24h].
	Duration time.Duration
	// RestartEvery is the interval of the kill -9 restarts; zero: 1 minute.
	// At least 10s.
	RestartEvery time.Duration
	// FaultEvery is the interval of the clock faults (each slot reverts
	// the previous fault and injects the next of Rotation); zero: 10s. At
	// least 1s.
	FaultEvery time.Duration
	// OutageAt and OutageFor place the lease store's outage: its cluster
	// is crashed (immediate shutdown) at OutageAt and started again
	// OutageFor later. Zero: 45% of Duration (between two restarts with
	// the defaults), for 20s (two lease TTLs: the fence closes).
	OutageAt, OutageFor time.Duration
	// Rate is the requests per second of the load (GET /v1/ids), Batch
	// the IDs per request, Clients the keep-alive connections; zero: 100,
	// 100, 4. Bounds: [1, 10000], [1, 4096], [1, 64].
	Rate, Batch, Clients int
	// SampleEvery is how often the serve process's RSS and goroutines
	// are read; zero: 2s.
	SampleEvery time.Duration
	// LeaseTTL is serve's --lease-ttl; zero: 6s.
	LeaseTTL time.Duration
	// Limits are the flatness limits; zero: DefaultLimits.
	Limits Limits
	// Dir holds the cluster, the checkpoint and the logs; empty: a new
	// temporary directory, removed after a passing soak.
	Dir string
	// Progress, if set, gets a line per event as the soak runs.
	Progress io.Writer
}

// Rotation are the faults injected through serve's admin API, in turn.
var Rotation = []string{
	`{"kind":"step","by":"-300ms"}`,
	`{"kind":"freeze","for":"2s"}`,
	`{"kind":"leap","in":"1s"}`,
	`{"kind":"smear","by":"-500ms","window":"8s"}`,
	`{"kind":"pause","for":"1s"}`,
	`{"kind":"step","by":"150ms"}`,
}

func (c *Config) defaults() error {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.Duration, 10*time.Minute)
	def(&c.RestartEvery, time.Minute)
	def(&c.FaultEvery, 10*time.Second)
	def(&c.OutageAt, c.Duration*9/20)
	def(&c.OutageFor, 20*time.Second)
	def(&c.SampleEvery, 2*time.Second)
	def(&c.LeaseTTL, 6*time.Second)
	for _, p := range []*int{&c.Rate, &c.Batch} {
		if *p == 0 {
			*p = 100
		}
	}
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits
	}
	switch {
	case c.Bin == "":
		return errors.New("soak: no snowchaos binary")
	case c.Duration < 30*time.Second || c.Duration > 24*time.Hour:
		return fmt.Errorf("soak: duration %s outside [30s, 24h]", c.Duration)
	case c.RestartEvery < 10*time.Second:
		return fmt.Errorf("soak: restart interval %s below 10s", c.RestartEvery)
	case c.FaultEvery < time.Second:
		return fmt.Errorf("soak: fault interval %s below 1s", c.FaultEvery)
	case c.OutageAt < 0 || c.OutageFor < 0 || c.OutageAt+c.OutageFor > c.Duration:
		return fmt.Errorf("soak: store outage at %s for %s does not fit in %s", c.OutageAt, c.OutageFor, c.Duration)
	case c.Rate < 1 || c.Rate > 10000 || c.Batch < 1 || c.Batch > 4096 || c.Clients < 1 || c.Clients > 64:
		return fmt.Errorf("soak: rate %d, batch %d, clients %d: want [1,10000], [1,4096], [1,64]", c.Rate, c.Batch, c.Clients)
	case c.SampleEvery < 100*time.Millisecond || c.LeaseTTL < time.Second:
		return errors.New("soak: sample interval below 100ms or lease TTL below 1s")
	}
	return nil
}

// SinkReport is the verify sink's final JSON report (snowchaos verify
// --json).
type SinkReport struct {
	IDs               uint64   `json:"ids"`
	Unique            uint64   `json:"unique"`
	Duplicates        uint64   `json:"duplicates"`
	OrderViolations   uint64   `json:"order_violations"`
	RestartViolations uint64   `json:"restart_violations"`
	BadLines          uint64   `json:"bad_lines"`
	Errors            []string `json:"errors"`
	DuplicateIDs      []string `json:"duplicate_ids"`
	Verdict           string   `json:"verdict"`
	Exit              int      `json:"exit"`
}

// Event is something the soak did, at a time from its start.
type Event struct {
	At   time.Duration
	What string
}

// Report is a soak's outcome.
type Report struct {
	Config Config
	// Received counts the IDs the load got from serve, all forwarded to
	// the sink; Unverified those the sink did not take (refused after
	// retries).
	Received, Unverified uint64
	// OK and Failed count the ID requests by outcome, per second of the
	// soak.
	OK, Failed []uint64
	// Sink is the sink's verdict.
	Sink SinkReport
	// Restarts counts the kill -9 restarts; Workers lists each
	// incarnation's worker ID.
	Restarts int
	Workers  []int64
	// Faults counts the injected faults by kind; Refused lists the admin
	// API's other answers.
	Faults  map[string]int
	Refused []string
	Events  []Event
	// Samples are the serve process's readings; SinkRSS the sink's, at
	// the same times.
	Samples []Sample
	SinkRSS []int64
	// Flatness judges Samples.
	Flatness Flatness
	// LoadStart and LoadEnd are /proc/loadavg's first three fields.
	LoadStart, LoadEnd string
	// Pass is the verdict; Why lists what failed it.
	Pass bool
	Why  []string
}

// target is the serve incarnation the load and faults go to: a new
// port per incarnation, so that a response is labelled with the
// incarnation that sent it.
type target struct {
	inc   int
	base  string // http://127.0.0.1:PORT
	proc  *child
	start time.Time
}

type soak struct {
	cfg    Config
	dir    string
	token  string
	begin  time.Time
	cur    atomic.Pointer[target]
	ports  map[string]bool
	client *http.Client
	sink   string
	mu     struct {
		sync.Mutex
		rep Report
	}
	received, unverified atomic.Uint64
}

// Run runs one soak. It returns an error only when the soak could not be
// set up or run (exit 2); a finished soak's verdict is Report.Pass.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "snowchaos-soak-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	s := &soak{cfg: cfg, dir: dir, ports: map[string]bool{},
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients + 4}}}
	s.mu.rep = Report{Config: cfg, Faults: map[string]int{}}
	secs := int(cfg.Duration/time.Second) + 1
	s.mu.rep.OK, s.mu.rep.Failed = make([]uint64, secs), make([]uint64, secs)
	rep, err := s.run(ctx)
	if err == nil && rep.Pass && cfg.Dir == "" {
		os.RemoveAll(dir)
	} else {
		s.progress("the soak's directory, logs included, is kept: %s", dir)
	}
	return rep, err
}

func (s *soak) progress(format string, args ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, "soak %s: %s\n", fmtDur(s.since()), fmt.Sprintf(format, args...))
	}
}

func (s *soak) since() time.Duration {
	if s.begin.IsZero() {
		return 0
	}
	return time.Since(s.begin)
}

func (s *soak) event(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.mu.rep.Events = append(s.mu.rep.Events, Event{At: s.since(), What: what})
	s.mu.Unlock()
	s.progress("%s", what)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func (s *soak) run(ctx context.Context) (*Report, error) {
	cl, err := newCluster(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	if err := cl.start(); err != nil {
		return nil, err
	}
	defer cl.close()
	tok := make([]byte, 16)
	if f, err := os.Open("/dev/urandom"); err == nil {
		io.ReadFull(f, tok)
		f.Close()
	}
	s.token = fmt.Sprintf("%x", tok)
	tokFile := filepath.Join(s.dir, "admin-token")
	if err := os.WriteFile(tokFile, []byte(s.token), 0o600); err != nil {
		return nil, err
	}

	sink, err := start("verify sink", exec.Command(s.cfg.Bin, "verify", "--listen", "127.0.0.1:0", "--json", "--expect-ids", "1"),
		filepath.Join(s.dir, "sink.log"), 30*time.Second, func(l string) bool {
			if a, ok := strings.CutPrefix(l, "listening on "); ok {
				s.sink = "http://" + a
				return true
			}
			return false
		})
	if err != nil {
		return nil, err
	}
	defer sink.kill()

	serveArgs := []string{"serve", "--listen", "127.0.0.1:0", "--worker", "1", "--holder", "soak", "--lease", cl.URL(),
		"--lease-ttl", s.cfg.LeaseTTL.String(), "--checkpoint", filepath.Join(s.dir, "mark"), "--admin-token-file", tokFile,
		"--policy", "wait", "--log-level", "warn"}
	s.mu.rep.LoadStart = loadavg()
	s.begin = time.Now()
	if err := s.startServe(serveArgs, 0); err != nil {
		return nil, err
	}
	defer func() {
		if t := s.cur.Load(); t != nil {
			t.proc.kill()
		}
	}()

	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tokens := make(chan struct{}, s.cfg.Clients)
	for i := range s.cfg.Clients {
		wg.Go(func() { s.client0(lctx, i, tokens) })
	}
	wg.Go(func() { s.pace(lctx, tokens) })
	wg.Go(func() { s.sample(lctx, sink) })
	wg.Go(func() { s.rotate(lctx) })

	end := time.NewTimer(s.cfg.Duration)
	restart := time.NewTicker(s.cfg.RestartEvery)
	outage := time.NewTimer(s.cfg.OutageAt)
	var back <-chan time.Time
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case <-end.C:
			break loop
		case <-restart.C:
			old := s.cur.Load()
			old.proc.kill()
			s.event("kill -9 of serve incarnation %d (pid %d)", old.inc, old.proc.pid())
			if err := s.startServe(serveArgs, old.inc+1); err != nil {
				runErr = err
				break loop
			}
			s.mu.Lock()
			s.mu.rep.Restarts++
			s.mu.Unlock()
		case <-outage.C:
			cl.crash()
			s.event("lease store down: its Postgres crashed (immediate shutdown) for %s", s.cfg.OutageFor)
			back = time.After(s.cfg.OutageFor)
		case <-back:
			back = nil
			if err := cl.start(); err != nil {
				runErr = err
				break loop
			}
			s.event("lease store back")
		}
	}
	restart.Stop()
	stopLoad()
	wg.Wait()
	if runErr != nil {
		return nil, runErr
	}
	// A graceful stop writes the final mark and releases the lease.
	if t := s.cur.Load(); t != nil {
		t.proc.stop(syscall.SIGTERM, 30*time.Second)
		s.event("serve incarnation %d stopped (SIGTERM)", t.inc)
	}
	if err := s.stopSink(sink); err != nil {
		return nil, err
	}
	s.mu.rep.LoadEnd = loadavg()
	return s.judge(), nil
}

// startServe starts serve incarnation inc on a port no earlier
// incarnation had, and makes it the target.
func (s *soak) startServe(args []string, inc int) error {
	for range 5 {
		var base string
		p, err := start(fmt.Sprintf("serve incarnation %d", inc), exec.Command(s.cfg.Bin, args...), filepath.Join(s.dir, "serve.log"),
			2*time.Minute, func(l string) bool {
				if a, ok := strings.CutPrefix(l, "listening on "); ok {
					base = "http://" + a
					return true
				}
				return false
			})
		if err != nil {
			return err
		}
		if s.ports[base] {
			p.kill() // responses must name their incarnation by port
			continue
		}
		s.ports[base] = true
		worker := int64(-1)
		var info struct {
			Node int64 `json:"node"`
		}
		if resp, err := s.client.Get(base + "/v1/info"); err == nil {
			if json.NewDecoder(resp.Body).Decode(&info) == nil {
				worker = info.Node
			}
			resp.Body.Close()
		}
		s.mu.Lock()
		s.mu.rep.Workers = append(s.mu.rep.Workers, worker)
		s.mu.Unlock()
		s.cur.Store(&target{inc: inc, base: base, proc: p, start: time.Now()})
		s.event("serve incarnation %d (pid %d) on %s, worker %d", inc, p.pid(), strings.TrimPrefix(base, "http://"), worker)
		return nil
	}
	return errors.New("soak: serve kept getting ports earlier incarnations had")
}

// pace issues Rate tokens per second to the clients; a tick no client is
// free for is skipped (the load is open up to Clients in flight).
func (s *soak) pace(ctx context.Context, tokens chan<- struct{}) {
	t := time.NewTicker(time.Second / time.Duration(s.cfg.Rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			close(tokens)
			return
		case <-t.C:
			select {
			case tokens <- struct{}{}:
			default:
			}
		}
	}
}

// client0 is load client i: per token, GET /v1/ids from the current
// incarnation and forward the body to the sink, labelled with the
// client's stream for that incarnation and the incarnation as issuer.
func (s *soak) client0(ctx context.Context, i int, tokens <-chan struct{}) {
	for range tokens {
		t := s.cur.Load()
		sec := min(int(s.since()/time.Second), len(s.mu.rep.OK)-1)
		body, err := s.get(ctx, t.base+"/v1/ids?count="+strconv.Itoa(s.cfg.Batch))
		if err != nil {
			atomic.AddUint64(&s.mu.rep.Failed[sec], 1)
			continue
		}
		atomic.AddUint64(&s.mu.rep.OK[sec], 1)
		n := uint64(bytes.Count(body, []byte("\n")))
		if len(body) > 0 && body[len(body)-1] != '\n' {
			n++
		}
		s.received.Add(n)
		q := fmt.Sprintf("/v1/ids?stream=c%d-i%d&issuer=serve&incarnation=%d", i, t.inc, t.inc)
		if err := s.post(s.sink+q, body); err != nil {
			s.unverified.Add(n)
			s.event("sink did not take %d IDs: %v", n, err)
		}
	}
}

// get fetches url; a non-200 answer is an error.
func (s *soak) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// post sends body to the sink, retrying for up to 30 s while it sheds
// load (503, 429) or is unreachable.
func (s *soak) post(url string, body []byte) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.client.Post(url, "text/plain", bytes.NewReader(body))
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				return nil
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				err = fmt.Errorf("%s", resp.Status)
			default:
				return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// admin sends one admin API request to the current incarnation.
func (s *soak) admin(ctx context.Context, t *target, method, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.base+"/admin/v1/faults", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(bytes.TrimSpace(b)), nil
}

// rotate injects the next fault of Rotation every FaultEvery, reverting
// the previous one first. Its slots fall half an interval after the
// restarts' (which come at multiples of RestartEvery), so that a fault
// seldom meets a process being killed.
func (s *soak) rotate(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(s.cfg.FaultEvery / 2):
	}
	t := time.NewTicker(s.cfg.FaultEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		body := Rotation[i%len(Rotation)]
		var f struct {
			Kind string `json:"kind"`
		}
		json.Unmarshal([]byte(body), &f)
		tg := s.cur.Load()
		if code, msg, err := s.admin(ctx, tg, http.MethodDelete, ""); err != nil || code != http.StatusOK {
			s.note(fmt.Sprintf("revert on incarnation %d: %d %s %v", tg.inc, code, msg, err))
		}
		code, msg, err := s.admin(ctx, tg, http.MethodPost, body)
		if err == nil && code == http.StatusOK {
			s.mu.Lock()
			s.mu.rep.Faults[f.Kind]++
			s.mu.Unlock()
			s.progress("fault %s on incarnation %d", body, tg.inc)
			continue
		}
		s.note(fmt.Sprintf("%s on incarnation %d: %d %s %v", body, tg.inc, code, msg, err))
	}
}

func (s *soak) note(what string) {
	s.mu.Lock()
	s.mu.rep.Refused = append(s.mu.rep.Refused, fmt.Sprintf("%s: %s", fmtDur(s.since()), what))
	s.mu.Unlock()
	s.progress("%s", what)
}

// sample reads the serve process's RSS and goroutines, and the sink's
// RSS, every SampleEvery.
func (s *soak) sample(ctx context.Context, sink *child) {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tg := s.cur.Load()
		rss, err := readRSS(tg.proc.pid())
		if err != nil {
			continue // between a kill and the restart
		}
		sm := Sample{At: s.since(), Age: time.Since(tg.start), Incarnation: tg.inc, RSS: rss, Goroutines: s.goroutines(ctx, tg)}
		srss, _ := readRSS(sink.pid())
		s.mu.Lock()
		s.mu.rep.Samples = append(s.mu.rep.Samples, sm)
		s.mu.rep.SinkRSS = append(s.mu.rep.SinkRSS, srss)
		s.mu.Unlock()
	}
}

// goroutines reads go_goroutines from the target's /metrics; -1 when it
// does not answer.
func (s *soak) goroutines(ctx context.Context, t *target) int {
	b, err := s.get(ctx, t.base+"/metrics")
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// stopSink ends the sink (POST /v1/stop) and reads its JSON report.
func (s *soak) stopSink(sink *child) error {
	if resp, err := s.client.Post(s.sink+"/v1/stop", "text/plain", nil); err == nil {
		resp.Body.Close()
	} else {
		sink.signal(syscall.SIGTERM)
	}
	select {
	case <-sink.done:
	case <-time.After(2 * time.Minute):
		sink.kill()
		return fmt.Errorf("soak: the verify sink did not stop within 2m; its log: %s", sink.log)
	}
	out := strings.Join(sink.stdout(), "\n")
	i := strings.Index(out, "{")
	if i < 0 || json.Unmarshal([]byte(out[i:]), &s.mu.rep.Sink) != nil {
		return fmt.Errorf("soak: no JSON report from the verify sink (%v); its log: %s", sink.err, sink.log)
	}
	return nil
}

// judge fills the verdict.
func (s *soak) judge() *Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.mu.rep
	r.Received, r.Unverified = s.received.Load(), s.unverified.Load()
	r.Flatness = Judge(r.Samples, s.cfg.Limits)
	k := r.Sink
	check := func(bad bool, format string, args ...any) {
		if bad {
			r.Why = append(r.Why, fmt.Sprintf(format, args...))
		}
	}
	check(r.Received == 0, "no ID was received")
	check(k.Duplicates > 0, "%d duplicates (first: %v)", k.Duplicates, k.DuplicateIDs)
	check(k.OrderViolations > 0, "%d order violations", k.OrderViolations)
	check(k.RestartViolations > 0, "%d restart violations", k.RestartViolations)
	check(k.BadLines > 0, "%d bad lines: %v", k.BadLines, k.Errors)
	check(k.IDs != r.Received-r.Unverified || r.Unverified > 0, "the sink verified %d IDs of the %d received (%d not taken)", k.IDs, r.Received, r.Unverified)
	check(k.Exit != 0, "the sink exited %d (%s)", k.Exit, k.Verdict)
	check(r.Restarts == 0, "no restart happened")
	for _, w := range r.Flatness.Why {
		check(true, "not flat: %s", w)
	}
	r.Pass = len(r.Why) == 0
	return r
}

// fmtDur formats d as m:ss.
func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
