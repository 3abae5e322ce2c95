// Package promtest starts a real Prometheus server for integration tests
// and queries it. Any package's tests may use it:
//
//	p := promtest.Start(t, srv.Listener.Addr().String())
//	v, err := p.WaitFor(ctx, `snowflake_ids_issued_total`, promtest.Equals(42))
//
// The server runs the Debian package's /usr/bin/prometheus (found on PATH)
// on a free loopback port with its own storage in t.TempDir, scrapes every
// second, and is killed when the test ends. A missing binary skips the test
// outside CI and fails it when CI is set. Nothing sleeps for a fixed time:
// readiness and results are polled with deadlines.
package promtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// Binary returns the path of the named tool ("prometheus", "promtool").
// When it is not on PATH the test is skipped if CI is unset and fails if
// CI is set, so no integration test vanishes quietly in CI.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, "%s not found on PATH (apt-get install prometheus): %v", name, err)
	}
	return p
}

// Config describes the Prometheus to start. The zero value (plus Targets)
// is a 1-second scrape of http://TARGET/metrics under the job "snowchaos".
type Config struct {
	// Targets are host:port pairs to scrape.
	Targets []string
	// MetricsPath is the scrape path; "" means /metrics.
	MetricsPath string
	// Job names the scrape job; "" means "snowchaos".
	Job string
	// ScrapeInterval is the scrape and evaluation interval; zero means 1s.
	ScrapeInterval time.Duration
	// RuleFiles are copied next to the generated prometheus.yml and
	// loaded as rule_files.
	RuleFiles []string
	// StartTimeout bounds the wait for /-/ready; zero means 60s.
	StartTimeout time.Duration
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
}

// Prom is a running Prometheus server.
type Prom struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Dir holds the config and the TSDB.
	Dir string

	proc *testenv.Process
	api  promv1.API
}

// Start starts Prometheus scraping targets (host:port) every second and
// waits until it is ready; it is stopped when the test ends.
func Start(t testing.TB, targets ...string) *Prom {
	t.Helper()
	return StartConfig(t, Config{Targets: targets})
}

// StartConfig starts Prometheus as c says and waits until it is ready; it
// is stopped when the test ends. Startup failures fail the test with the
// server's log.
func StartConfig(t testing.TB, c Config) *Prom {
	t.Helper()
	bin := Binary(t, "prometheus")
	dir := t.TempDir()
	cfg, err := writeConfig(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	timeout := c.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		p, err := start(bin, dir, cfg, c.ExtraArgs, timeout)
		if err == nil {
			t.Cleanup(p.stop)
			return p
		}
		lastErr = err
	}
	t.Fatalf("promtest: starting prometheus: %v", lastErr)
	return nil
}

// writeConfig writes prometheus.yml (and copies the rule files) into dir.
func writeConfig(dir string, c Config) (string, error) {
	interval := c.ScrapeInterval
	if interval == 0 {
		interval = time.Second
	}
	job := c.Job
	if job == "" {
		job = "snowchaos"
	}
	path := c.MetricsPath
	if path == "" {
		path = "/metrics"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", model.Duration(interval), model.Duration(interval))
	if len(c.RuleFiles) > 0 {
		b.WriteString("rule_files:\n")
		for i, rf := range c.RuleFiles {
			data, err := os.ReadFile(rf)
			if err != nil {
				return "", err
			}
			name := fmt.Sprintf("rules-%d.yml", i)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  - %s\n", name)
		}
	}
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: %q\n    metrics_path: %q\n    static_configs:\n      - targets: [", job, path)
	for i, tg := range c.Targets {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", tg)
	}
	b.WriteString("]\n")
	cfg := filepath.Join(dir, "prometheus.yml")
	return cfg, os.WriteFile(cfg, []byte(b.String()), 0o644)
}

func start(bin, dir, cfg string, extra []string, timeout time.Duration) (*Prom, error) {
	port, err := testenv.FreeTCPPort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	data, err := os.MkdirTemp(dir, "tsdb-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + data,
		"--web.listen-address=" + addr,
		"--enable-feature=exemplar-storage",
		"--log.level=warn",
	}, extra...)
	proc, err := testenv.StartProcess(exec.Command(bin, args...))
	if err != nil {
		return nil, err
	}
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr, Client: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		proc.Stop(nil, 0)
		return nil, err
	}
	p := &Prom{URL: "http://" + addr, Dir: dir, proc: proc, api: promv1.NewAPI(c)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.waitReady(ctx); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w\n--- prometheus log ---\n%s", err, p.Logs())
	}
	return p, nil
}

// waitReady polls /-/ready until it answers 200, the process exits, or ctx
// ends.
func (p *Prom) waitReady(ctx context.Context) error {
	err := testenv.Poll(ctx, 50*time.Millisecond, p.proc.Exited(), func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case errors.Is(err, testenv.ErrExited):
		return errors.New("prometheus exited before it was ready")
	case err != nil:
		return fmt.Errorf("prometheus not ready at %s: %w", p.URL, err)
	}
	return nil
}

// stop kills the server this package started and waits for it to exit.
func (p *Prom) stop() { p.proc.Stop(nil, 0) }

// Logs returns what the server has logged so far.
func (p *Prom) Logs() string { return p.proc.Log() }

// Query evaluates an instant PromQL query now and returns its vector (an
// error for a scalar, matrix or string result).
func (p *Prom) Query(ctx context.Context, q string) (model.Vector, error) {
	v, _, _, err := p.api.Query(ctx, q, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("promtest: query %q: %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("promtest: query %q: result type %s, want vector", q, v.Type())
	}
	return vec, nil
}

// QueryExemplars returns the exemplars of the series q selects over the
// last window.
func (p *Prom) QueryExemplars(ctx context.Context, q string, window time.Duration) ([]promv1.Exemplar, error) {
	now := time.Now()
	res, err := p.api.QueryExemplars(ctx, q, now.Add(-window), now.Add(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("promtest: exemplars of %q: %w", q, err)
	}
	var out []promv1.Exemplar
	for _, s := range res {
		out = append(out, s.Exemplars...)
	}
	return out, nil
}

// Condition judges a query result.
type Condition func(model.Vector) bool

// Equals holds when the result has exactly one sample and its value is want.
func Equals(want float64) Condition {
	return func(v model.Vector) bool {
		return len(v) == 1 && float64(v[0].Value) == want
	}
}

// AtLeast holds when the result has exactly one sample of at least min.
func AtLeast(min float64) Condition {
	return func(v model.Vector) bool {
		return len(v) == 1 && float64(v[0].Value) >= min && !math.IsNaN(float64(v[0].Value))
	}
}

// Len holds when the result has n samples.
func Len(n int) Condition { return func(v model.Vector) bool { return len(v) == n } }

// WaitFor polls q (every 100ms) until ok holds or ctx ends, and returns the
// last result; on timeout the error shows the last result or query error.
func (p *Prom) WaitFor(ctx context.Context, q string, ok Condition) (model.Vector, error) {
	var last model.Vector
	var lastErr error
	err := testenv.Poll(ctx, 100*time.Millisecond, p.proc.Exited(), func() bool {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last, lastErr = p.Query(qctx, q)
		return lastErr == nil && ok(last)
	})
	switch {
	case err == nil:
		return last, nil
	case errors.Is(err, testenv.ErrExited):
		return last, fmt.Errorf("promtest: prometheus exited while waiting for %q\n%s", q, p.Logs())
	case lastErr != nil:
		return last, fmt.Errorf("promtest: waiting for %q: %w (last error: %v)", q, err, lastErr)
	}
	return last, fmt.Errorf("promtest: waiting for %q: %w (last result: %v)", q, err, last)
}

// WaitExemplars polls QueryExemplars (every 100ms) until it returns at
// least n exemplars or ctx ends.
func (p *Prom) WaitExemplars(ctx context.Context, q string, window time.Duration, n int) ([]promv1.Exemplar, error) {
	var exs []promv1.Exemplar
	var lastErr error
	err := testenv.Poll(ctx, 100*time.Millisecond, p.proc.Exited(), func() bool {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		exs, lastErr = p.QueryExemplars(qctx, q, window)
		return lastErr == nil && len(exs) >= n
	})
	switch {
	case err == nil:
		return exs, nil
	case errors.Is(err, testenv.ErrExited):
		return exs, fmt.Errorf("promtest: prometheus exited while waiting for exemplars of %q\n%s", q, p.Logs())
	}
	return exs, fmt.Errorf("promtest: waiting for %d exemplars of %q: %w (last: %v, error %v)", n, q, err, exs, lastErr)
}

// WaitUp waits until every scrape target reports up == 1.
func (p *Prom) WaitUp(ctx context.Context, targets int) error {
	_, err := p.WaitFor(ctx, `up == 1`, Len(targets))
	return err
}
