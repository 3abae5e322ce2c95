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
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
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

// Config configures a Server. Its zero value is not usable: Generator is
// required. Every other field's zero value is the safe default.
type Config struct {
	// Generator issues the IDs. Required. The Server never closes it.
	Generator *generator.Generator
	// FaultClock is the generator's clock when it is a fault clock; the
	// admin API acts on it. Required when AdminToken is set.
	FaultClock *faults.Clock
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
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server timeouts. Zero: 5 s, 2×ReadHeaderTimeout,
	// RequestTimeout + 5 s, and 120 s. Each is at most MaxTimeout, except
	// IdleTimeout, at most MaxIdleTimeout.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns bounds the connections the API listener keeps open. At the
	// limit, or when the process runs out of descriptors, a new connection
	// closes the longest-idle keep-alive connection; when none is idle it
	// is answered 503 at once. Zero: the open-file limit less 64
	// (DefaultMaxConns); at most MaxConnsLimit. The admin listener keeps
	// at most 32.
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
	// TracerProvider, when non-nil, wraps every route in OpenTelemetry's
	// HTTP middleware with spans named "METHOD /route". Nil: no tracing
	// middleware at all (no per-request cost).
	TracerProvider trace.TracerProvider
	// Logger receives server errors. Nil: slog.Default().
	Logger *slog.Logger
}

// Server is an HTTP node serving one generator. Create it with New; its
// handlers are safe for concurrent use.
type Server struct {
	cfg       Config
	gen       atomic.Pointer[generator.Generator]
	budget    atomic.Pointer[idBudget] // of gen
	layout    generator.Layout
	tokenHash [sha256.Size]byte
	reg       *prometheus.Registry
	metrics   *httpMetrics
	log       *slog.Logger

	main  http.Handler // API, health, metrics (+ admin when not split)
	api   http.Handler // API, health, metrics only
	admin http.Handler // admin routes only

	batchPool sync.Pool // *batchBuf

	// lim is the API listener's connection limiter while Serve runs.
	lim atomic.Pointer[connLimiter]

	// adminMu serialises fault injections, so the bounds CheckAgainst
	// checks hold when the fault is applied.
	adminMu sync.Mutex
}

// New validates c and returns a Server. Errors wrap ErrConfig.
func New(c Config) (*Server, error) {
	if c.Generator == nil {
		return nil, fmt.Errorf("%w: Generator is nil", ErrConfig)
	}
	if c.AdminToken != "" {
		tok, err := CleanToken(c.AdminToken)
		if err != nil {
			return nil, fmt.Errorf("%w: AdminToken: %v", ErrConfig, err)
		}
		c.AdminToken = tok
	}
	if c.AdminToken != "" && c.FaultClock == nil {
		return nil, fmt.Errorf("%w: AdminToken is set but FaultClock is nil (the admin API needs a fault clock)", ErrConfig)
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
	s := &Server{
		cfg:    c,
		layout: c.Generator.Settings().Layout,
		reg:    c.Registry,
		log:    c.Logger,
	}
	s.setGenerator(c.Generator)
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
	return s, nil
}

// Generator returns the generator the node serves.
func (s *Server) Generator() *generator.Generator { return s.gen.Load() }

// SetGenerator makes the node serve g from now on and returns the previous
// generator (a lease keeper that acquired another worker ID asks for a new
// generator). g must use the same layout; requests already inside the old
// generator finish there. The caller closes the old one.
func (s *Server) SetGenerator(g *generator.Generator) (*generator.Generator, error) {
	if g == nil {
		return nil, fmt.Errorf("%w: nil generator", ErrConfig)
	}
	if l := g.Settings().Layout; l != s.layout {
		return nil, fmt.Errorf("%w: new generator's layout %s differs from %s", ErrConfig, l.Name, s.layout.Name)
	}
	old := s.gen.Load()
	s.setGenerator(g)
	return old, nil
}

// setGenerator serves g with its request budget.
func (s *Server) setGenerator(g *generator.Generator) {
	s.budget.Store(newIDBudget(s.cfg.RequestTimeout, g.Settings().MaxWait))
	s.gen.Store(g)
}

// Registry returns the registry /metrics exposes.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler returns the node's whole handler: the ID API, health, metrics and
// (when an admin token is configured) the admin API.
func (s *Server) Handler() http.Handler { return s.main }

// APIHandler returns the handler without the admin routes.
func (s *Server) APIHandler() http.Handler { return s.api }

// AdminHandler returns a handler with only the admin routes, or nil when no
// admin token is configured.
func (s *Server) AdminHandler() http.Handler { return s.admin }

// build assembles a handler with the API routes, the admin routes, or both.
func (s *Server) build(api, admin bool) http.Handler {
	mux := http.NewServeMux()
	if api {
		mux.Handle("/v1/id", s.route("/v1/id", get(s.handleID)))
		mux.Handle("/v1/ids", s.route("/v1/ids", get(s.handleIDs)))
		mux.Handle("/v1/decode", s.route("/v1/decode/{id}", get(s.handleDecode)))
		mux.Handle("/v1/decode/{id...}", s.route("/v1/decode/{id}", get(s.handleDecode)))
		mux.Handle("/v1/info", s.route("/v1/info", get(s.handleInfo)))
		mux.Handle("/healthz", s.route("/healthz", get(s.handleHealth)))
		mux.Handle("/readyz", s.route("/readyz", get(s.handleReady)))
		prom := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})
		mux.Handle("/metrics", s.route("/metrics", get(prom.ServeHTTP)))
	}
	if admin {
		mux.Handle("/admin/v1/faults", s.route("/admin/v1/faults", methods{
			http.MethodGet:    s.adminOnly(s.handleFaultsGet),
			http.MethodPost:   s.adminOnly(s.handleFaultsPost),
			http.MethodDelete: s.adminOnly(s.handleFaultsDelete),
		}))
	} else {
		absent := s.route("/admin", methods{"*": s.adminAbsent})
		mux.Handle("/admin", absent)
		mux.Handle("/admin/", absent)
	}
	mux.Handle("/", s.route("other", methods{"*": notFound}))
	var h http.Handler = mux
	if s.cfg.TracerProvider != nil {
		h = otelhttp.NewHandler(mux, "snowchaos",
			otelhttp.WithTracerProvider(s.cfg.TracerProvider),
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(spanName))
	}
	return h
}

// spanName names a request's span after its route: "GET /v1/ids".
func spanName(_ string, r *http.Request) string {
	if r.Pattern == "" {
		return r.Method
	}
	return r.Method + " " + r.Pattern
}

// Serve serves on main (and the admin API on admin, when non-nil; else on
// main) until ctx is done, then shuts down gracefully: listeners close at
// once, in-flight requests finish (bounded by ShutdownTimeout), and Serve
// returns nil. Every ID a handler obtained from the generator is thus
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
	servers := []*http.Server{s.httpServer(s.main)}
	lns := []net.Listener{lim}
	if admin != nil {
		servers[0] = s.httpServer(s.api)
		servers = append(servers, s.httpServer(s.admin))
		lns = append(lns, newConnLimiter(admin, min(adminMaxConns, s.cfg.MaxConns)))
	}
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() {
			err := hs.Serve(lns[i])
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	var shutErr error
	for _, hs := range servers {
		if err := hs.Shutdown(sctx); err != nil && shutErr == nil {
			shutErr = fmt.Errorf("server: graceful shutdown: %w", err)
			hs.Close()
		}
	}
	n := len(servers)
	if first != nil {
		n--
	}
	for range n {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return shutErr
}

// httpServer returns an http.Server with the configured timeouts.
func (s *Server) httpServer(h http.Handler) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge: one connection, many streams
	return &http.Server{
		Protocols:         protocols,
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState: func(c net.Conn, st http.ConnState) {
			if lc, ok := c.(*limitedConn); ok {
				lc.setIdle(st == http.StateIdle)
			}
		},
	}
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
