package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/node"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxBatch          = 4096
	DefaultRequestTimeout    = 5 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxBodyBytes      = 64 << 10
	DefaultShutdownTimeout   = 30 * time.Second
	// MaxBatchLimit is the largest MaxBatch a Config may ask for.
	MaxBatchLimit = 1 << 20
	// MaxConnsLimit is the largest MaxConns a Config may ask for.
	MaxConnsLimit = 1 << 20
	// MaxTimeout bounds every timeout of a Config but IdleTimeout.
	MaxTimeout = 10 * time.Minute
	// MaxIdleTimeout bounds IdleTimeout.
	MaxIdleTimeout = time.Hour
	// adminMaxConns is the admin listener's connection limit.
	adminMaxConns = 32
)

// Sentinel errors. Their text never changes once published.
var (
	// ErrConfig: a Config field is missing or out of range.
	ErrConfig = errors.New("server: invalid config")
	// ErrAdminRemote: the admin API would listen on a non-loopback address
	// and Config.AdminAllowRemote is false.
	ErrAdminRemote = errors.New("server: admin API refuses a non-loopback address")
)

// ReadyCheck is an extra readiness condition (an NTP offset monitor, a
// dependency). Check returns nil when ready; it must honour ctx and be cheap.
type ReadyCheck struct {
	// Name identifies the check in the /readyz detail.
	Name string
	// Check reports why the node is not ready, or nil.
	Check func(ctx context.Context) error
}

// Config configures a Server. Its zero value is not usable: Node is
// required. Every other field's zero value is the safe default.
type Config struct {
	// Node issues the IDs: every ID request is a node.Node.Issue, the call
	// the harness drives, and it follows the node onto a new generator
	// when the node rebinds to a new lease. Its fault clock, when it has
	// one, is what the admin API acts on. Required. The Server never
	// stops it.
	Node *node.Node
	// AdminToken enables the admin fault API and is the bearer token it
	// requires, compared without surrounding whitespace (CleanToken); one
	// of whitespace only is an error. Empty: the admin API is disabled
	// (/admin/... answers 404 saying so and how to enable it).
	AdminToken string
	// AdminAllowRemote lets the admin API listen on a non-loopback address.
	// False: Serve refuses such a listener with ErrAdminRemote.
	AdminAllowRemote bool
	// MaxBatch is the largest count /v1/ids accepts and its default count.
	// Zero: 4096; at most MaxBatchLimit.
	MaxBatch int
	// RequestTimeout is the deadline of each ID request's context, passed to
	// the generator (which also bounds its waits by Settings.MaxWait). It
	// is capped at the generator's MaxWait + 250 ms of real time, so a call
	// fails within the generator's bound even while the generator's
	// monotonic clock stands still (a paused fault clock). Zero: 5 s.
	RequestTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's line and headers from
	// its first byte; ReadTimeout the whole request (a body, which only
	// the admin API takes, gets ReadTimeout − ReadHeaderTimeout after its
	// headers); WriteTimeout the handler and writing the response,
	// counted from the request's first byte (HTTP/1.1) or from the end of
	// its headers (HTTP/2, as net/http counts it); IdleTimeout a
	// keep-alive connection's wait for its next request.
	// Zero: 5 s, 2×ReadHeaderTimeout, RequestTimeout + 5 s, and 120 s.
	// Each is at most MaxTimeout, except IdleTimeout, at most
	// MaxIdleTimeout.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns bounds the connections the API listener keeps open. At the
	// limit, or when the process runs out of descriptors, a new connection
	// closes the longest-idle keep-alive connection; when none is idle it
	// is answered 503 at once and closed, while at most MaxShedding such
	// refusals are in flight (each for up to a second: its 503 written,
	// then the client's request drained), and closed without a response
	// beyond that. Zero: the open-file limit less 64 (DefaultMaxConns);
	// at most MaxConnsLimit. The admin listener keeps at most 32.
	MaxConns int
	// MaxBodyBytes bounds a request body (only the admin API reads one).
	// Zero: 64 KiB.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown of Serve: in-flight
	// requests get this long to finish. Zero: 30 s.
	ShutdownTimeout time.Duration
	// Registry receives the server's HTTP metrics and is what /metrics
	// exposes. Nil: a new registry with the Go and process collectors.
	// Register the generator's collectors on it before serving.
	Registry *prometheus.Registry
	// ReadyChecks are consulted by /readyz after the generator's Ready.
	ReadyChecks []ReadyCheck
	// TracerProvider, when non-nil, gives every request a server span
	// named "METHOD /route" (just "METHOD" for an unknown path), a child
	// of the caller's span when the request carries one (W3C traceparent,
	// extracted with the global propagator). Nil: no tracing at all (no
	// per-request cost).
	TracerProvider trace.TracerProvider
	// Logger receives server errors. Nil: slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP API of one node. Create it with New; its handlers
// are safe for concurrent use.
type Server struct {
	cfg       Config
	node      *node.Node
	fault     *faults.Clock // the node's; nil without one
	budget    *idBudget
	layout    generator.Layout
	tokenHash [sha256.Size]byte
	reg       *prometheus.Registry
	metrics   *httpMetrics
	tracing   *tracing // nil: no tracing
	log       *slog.Logger

	main    fasthttp.RequestHandler // API, health, metrics (+ admin when not split)
	api     fasthttp.RequestHandler // API, health, metrics only
	admin   fasthttp.RequestHandler // admin routes only
	handler http.Handler            // main, for net/http

	batchPool sync.Pool // *batchBuf

	// lim is the API listener's connection limiter while Serve runs.
	lim atomic.Pointer[connLimiter]

	// adminMu serialises fault injections, so the bounds CheckAgainst
	// checks hold when the fault is applied.
	adminMu sync.Mutex
}

// New validates c and returns a Server. Errors wrap ErrConfig.
func New(c Config) (*Server, error) {
	if c.Node == nil {
		return nil, fmt.Errorf("%w: Node is nil", ErrConfig)
	}
	if c.AdminToken != "" {
		tok, err := CleanToken(c.AdminToken)
		if err != nil {
			return nil, fmt.Errorf("%w: AdminToken: %v", ErrConfig, err)
		}
		c.AdminToken = tok
	}
	if c.AdminToken != "" && c.Node.FaultClock() == nil {
		return nil, fmt.Errorf("%w: AdminToken is set but the node has no fault clock (the admin API needs one: node.Config.FaultClock)", ErrConfig)
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxBatch < 1 || c.MaxBatch > MaxBatchLimit {
		return nil, fmt.Errorf("%w: MaxBatch %d out of range [1, %d]", ErrConfig, c.MaxBatch, MaxBatchLimit)
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns(openFileLimit())
	}
	if c.MaxConns < 1 || c.MaxConns > MaxConnsLimit {
		return nil, fmt.Errorf("%w: MaxConns %d out of range [1, %d]", ErrConfig, c.MaxConns, MaxConnsLimit)
	}
	for _, d := range []struct {
		name     string
		v        *time.Duration
		def, max time.Duration
	}{
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout, MaxTimeout},
		{"ReadHeaderTimeout", &c.ReadHeaderTimeout, DefaultReadHeaderTimeout, MaxTimeout},
		{"ReadTimeout", &c.ReadTimeout, 0, MaxTimeout},
		{"WriteTimeout", &c.WriteTimeout, 0, MaxTimeout},
		{"IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout, MaxIdleTimeout},
		{"ShutdownTimeout", &c.ShutdownTimeout, DefaultShutdownTimeout, MaxTimeout},
	} {
		if *d.v < 0 || *d.v > d.max {
			return nil, fmt.Errorf("%w: %s %v out of range [0, %v] (0: the default)", ErrConfig, d.name, *d.v, d.max)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 2 * c.ReadHeaderTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = c.RequestTimeout + 5*time.Second
	}
	if c.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("%w: MaxBodyBytes %d is negative", ErrConfig, c.MaxBodyBytes)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	for i, rc := range c.ReadyChecks {
		if rc.Check == nil {
			return nil, fmt.Errorf("%w: ReadyChecks[%d] (%q) has a nil Check", ErrConfig, i, rc.Name)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
		c.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	st := c.Node.Settings()
	s := &Server{
		cfg:     c,
		node:    c.Node,
		fault:   c.Node.FaultClock(),
		budget:  newIDBudget(c.RequestTimeout, st.MaxWait),
		layout:  st.Layout,
		reg:     c.Registry,
		tracing: newTracing(c.TracerProvider),
		log:     c.Logger,
	}
	if c.AdminToken != "" {
		s.tokenHash = sha256.Sum256([]byte(c.AdminToken))
	}
	m, err := newHTTPMetrics(c.Registry)
	if err != nil {
		return nil, fmt.Errorf("%w: registering HTTP metrics: %v", ErrConfig, err)
	}
	s.metrics = m
	s.batchPool.New = func() any { return &batchBuf{} }
	s.main = s.build(true, c.AdminToken != "")
	s.api = s.build(true, false)
	if c.AdminToken != "" {
		s.admin = s.build(false, true)
	}
	s.handler = s.netHTTPHandler(s.main)
	return s, nil
}

// Node returns the node the server serves.
func (s *Server) Node() *node.Node { return s.node }

// Registry returns the registry /metrics exposes.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler returns the node's whole handler for net/http: the ID API,
// health, metrics and (when an admin token is configured) the admin API,
// with the same routes, errors, metrics and spans as Serve. Serve does not
// use it for HTTP/1.1 (it serves with fasthttp, without net/http's
// per-request costs), only for h2c; it is there to embed the node in a
// net/http server or test it with net/http/httptest. Request bodies beyond
// MaxBodyBytes are answered 413.
func (s *Server) Handler() http.Handler { return s.handler }

// AdminEnabled reports whether the node serves the admin fault API (an
// admin token is configured).
func (s *Server) AdminEnabled() bool { return s.admin != nil }

// Serve serves on main (and the admin API on admin, when non-nil; else on
// main) until ctx is done: HTTP/1.1 with fasthttp, h2c connections with
// net/http (see the package doc). It then shuts down gracefully:
// listeners close at once, idle connections are closed, in-flight
// requests finish (bounded by ShutdownTimeout; past it every connection is
// closed), and Serve returns nil. Every ID a handler obtained from the generator is thus
// written to its client before Serve returns. Serve fails with
// ErrAdminRemote, before serving anything, when the admin API would listen
// on a non-loopback address without AdminAllowRemote.
func (s *Server) Serve(ctx context.Context, main, admin net.Listener) error {
	if main == nil {
		return fmt.Errorf("%w: nil listener", ErrConfig)
	}
	if s.cfg.AdminToken != "" && !s.cfg.AdminAllowRemote {
		ln := main
		if admin != nil {
			ln = admin
		}
		if !IsLoopbackAddr(ln.Addr()) {
			return fmt.Errorf("%w: %s (pass --admin-allow-remote to allow it)", ErrAdminRemote, ln.Addr())
		}
	}
	if admin != nil && s.cfg.AdminToken == "" {
		return fmt.Errorf("%w: admin listener given without an admin token", ErrConfig)
	}
	lim := newConnLimiter(main, s.cfg.MaxConns)
	s.lim.Store(lim)
	servings := []*serving{s.newServing(lim, s.main, s.handler)}
	if admin != nil {
		servings[0] = s.newServing(lim, s.api, s.netHTTPHandler(s.api))
		servings = append(servings, s.newServing(newConnLimiter(admin, min(adminMaxConns, s.cfg.MaxConns)), s.admin, s.netHTTPHandler(s.admin)))
	}
	errc := make(chan error, len(servings))
	for _, sv := range servings {
		sv.start()
		go func() { errc <- sv.accept() }()
	}
	var first error
	received := 0
	select {
	case <-ctx.Done():
	case first = <-errc:
		received++
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	var shutErr error
	for _, sv := range servings {
		if err := sv.shutdown(sctx); err != nil && shutErr == nil {
			shutErr = fmt.Errorf("server: graceful shutdown: %w", err)
		}
	}
	for range len(servings) - received {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return shutErr
}

// MaxConns returns the API listener's connection limit (Config.MaxConns
// with its default filled in).
func (s *Server) MaxConns() int { return s.cfg.MaxConns }

// IsLoopbackAddr reports whether a listener address is local only: a TCP
// or UDP address on a loopback IP, or a Unix socket.
func IsLoopbackAddr(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UDPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// CheckListenAddr reports, before listening, whether host:port names only
// loopback interfaces: "localhost" or a loopback IP. An empty host (all
// interfaces) is not loopback. The error wraps ErrAdminRemote.
func CheckListenAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrAdminRemote, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q is not a loopback address (pass --admin-allow-remote to allow it)", ErrAdminRemote, addr)
}
