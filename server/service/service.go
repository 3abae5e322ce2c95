// Package service composes the node `snowchaos serve` runs, flags aside:
// a node.Node (generator, clock chain, checkpoint file, worker-ID lease),
// the lease store its URL names, the HTTP API serving the node, the NTP
// readiness check, the metrics registry and the tracer. serve turns its
// flags into a Config; a test builds the same service with New and
// drives it without starting a process.
//
//	lease.Open(URL) ──> node.New ──> server.New(Node) ──> Serve(listeners)
//	      │                 │               ▲
//	      └── lease metrics └── node metrics ┴── registry (/metrics), NTP check (/readyz)
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/tracing"

	// The lease stores a served node can name by URL (lease.Open).
	_ "github.com/snowchaos/snowchaos/lease/etcd"
	_ "github.com/snowchaos/snowchaos/lease/postgres"
	_ "github.com/snowchaos/snowchaos/lease/zookeeper"
)

// Config is what a served node is made of. Every field's zero value is
// the safe default but Node.Settings', which are the generator's.
type Config struct {
	// Node is the node's composition: its generator Settings, its fault
	// clock (FaultClock, ClockOffset; an admin token needs one), its
	// Controls. Checkpoint, Lease, Metrics, LeaseMetrics and Log are set
	// by New from the fields below.
	Node node.Config
	// CheckpointPath, when set, keeps the node's high-water mark in that
	// file (generator.FileCheckpoint) across restarts.
	CheckpointPath string
	// Lease, when set, has the node lease its worker ID from a store.
	Lease *Lease
	// Server configures the HTTP API. Node, Registry, ReadyChecks,
	// TracerProvider and Logger are set by New.
	Server server.Config
	// NTP, when set, keeps the node not ready while its clock is off the
	// NTP servers by more than a budget.
	NTP *NTP
	// ServiceName is the OpenTelemetry service.name fallback; the node
	// traces when the OTEL_* environment asks (tracing.Setup).
	ServiceName string
	// Log receives the node's and the server's messages; nil: discarded.
	Log *slog.Logger
}

// Lease is where and how a served node leases its worker ID.
type Lease struct {
	// URL names the store (lease.Open): memory, postgres://...,
	// etcd://host:port[/prefix/] or zk://host:port[/root].
	URL string
	// Schema and Table name a Postgres store's table; empty: the default.
	Schema, Table string
	// Keeper configures the lease: holder, TTL, skew budget, peer clock
	// check (negative PeerClockMaxSkew: off, logged as a warning),
	// Controls. Its Registry is the store's.
	Keeper node.Lease
}

// NTP is a served node's NTP readiness check.
type NTP struct {
	// Servers are the NTP servers ("host" or "host:port"). Required.
	Servers []string
	// MaxOffset is the offset budget (exported as
	// snowflake_ntp_offset_budget_seconds); zero:
	// ntpcheck.DefaultStepThreshold.
	MaxOffset time.Duration
	// Interval is the time between checks; zero: ntpcheck.DefaultInterval.
	Interval time.Duration
}

// Service is a served node, built and holding its lease, ready to serve.
// Build it with New and Close it.
type Service struct {
	node   *node.Node
	srv    *server.Server
	store  *lease.Store // nil without a lease
	tracer *tracing.Provider
	log    *slog.Logger
	cancel context.CancelFunc // ends the background work
	bg     sync.WaitGroup
}

// ErrStartMark: the stored mark the node loaded lies at or beyond the end
// of its layout's lifetime, so no ID could ever follow it.
var ErrStartMark = errors.New("service: stored mark beyond the layout's lifetime")

// New builds the served node: it sets up tracing and metrics, opens the
// lease store, builds the node (acquiring its lease within 2×TTL + 5 s of
// ctx, and loading its stored marks), logs the mark that holds it (the
// mark it loaded, when that is ahead of its clock), starts the NTP check
// and the lease's renewals, and builds the HTTP server. Errors name the
// part that failed: a store that could not be opened, a lease not
// acquired (wrapping the lease package's errors, naming the store), a
// loaded mark beyond the layout's lifetime (ErrStartMark), an invalid
// setting (generator.ErrInvalidSettings, server.ErrConfig).
func New(ctx context.Context, cfg Config) (_ *Service, err error) {
	s := &Service{log: cfg.Log}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.tracer, err = tracing.Setup(ctx, cfg.ServiceName); err != nil {
		return nil, err
	}
	reg := telemetry.NewRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{TracerProvider: s.tracer})
	if err := reg.Register(gc); err != nil {
		return nil, fmt.Errorf("registering the generator's metrics: %w", err)
	}
	nc := cfg.Node
	nc.Metrics, nc.Log = gc.MustNode(""), s.log
	nc.Checkpoint, nc.Lease, nc.LeaseMetrics = nil, nil, nil
	if cfg.CheckpointPath != "" {
		nc.Checkpoint = generator.NewFileCheckpoint(cfg.CheckpointPath)
	}
	acquire := 5 * time.Second
	if l := cfg.Lease; l != nil {
		// A store keeps its own time: it is opened on the system clock,
		// never on the node's fault clock.
		if s.store, err = lease.Open(ctx, l.URL, lease.OpenOptions{Schema: l.Schema, Table: l.Table}); err != nil {
			return nil, err
		}
		lc := telemetry.NewLeaseCollector(telemetry.Options{TracerProvider: s.tracer})
		if err := reg.Register(lc); err != nil {
			return nil, fmt.Errorf("registering the lease's metrics: %w", err)
		}
		k := l.Keeper
		k.Registry = s.store
		nc.Lease, nc.LeaseMetrics = &k, lc.MustNode("")
		if k.PeerClockMaxSkew < 0 {
			s.log.Warn("peer clock check off: the node starts whatever its clock reads against its peers'")
		}
		ttl := k.TTL
		if ttl == 0 {
			ttl = lease.DefaultTTL
		}
		acquire += 2 * ttl
	}
	actx, acancel := context.WithTimeout(ctx, acquire)
	s.node, err = node.New(actx, nc)
	acancel()
	if err != nil {
		if s.store != nil && isLeaseError(err) {
			return nil, fmt.Errorf("acquiring a worker lease from %s: %w", s.store.URL, err)
		}
		return nil, err
	}
	if err := s.checkStartMark(cfg); err != nil {
		return nil, err
	}

	sc := cfg.Server
	sc.Node, sc.Registry, sc.Logger, sc.ReadyChecks, sc.TracerProvider = s.node, reg, s.log, nil, nil
	if s.tracer.Enabled() {
		sc.TracerProvider = s.tracer
	}
	if n := cfg.NTP; n != nil {
		check, err := s.startNTP(bg, n, reg)
		if err != nil {
			return nil, err
		}
		sc.ReadyChecks = append(sc.ReadyChecks, check)
	}
	if s.srv, err = server.New(sc); err != nil {
		return nil, err
	}
	s.node.Run(bg)
	return s, nil
}

// isLeaseError reports whether err came from acquiring the lease.
func isLeaseError(err error) bool {
	for _, e := range []error{lease.ErrAllTaken, lease.ErrPeerClockSkew, lease.ErrUnavailable, lease.ErrInvalidConfig, lease.ErrInvalidRequest, lease.ErrLost, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// startNTP starts the NTP monitor n describes, with its metrics on reg,
// until bg ends, and returns its readiness check.
func (s *Service) startNTP(bg context.Context, n *NTP, reg *prometheus.Registry) (server.ReadyCheck, error) {
	budget := n.MaxOffset
	if budget == 0 {
		budget = ntpcheck.DefaultStepThreshold
	}
	every := n.Interval
	if every == 0 {
		every = ntpcheck.DefaultInterval
	}
	st := s.node.Settings()
	mon := ntpcheck.NewMonitor(ntpcheck.Config{Servers: n.Servers, MaxOffset: budget, Policy: st.Policy, MaxWait: st.MaxWait, MaxLead: st.MaxLead}, every)
	if err := reg.Register(mon.Collector()); err != nil {
		return server.ReadyCheck{}, fmt.Errorf("registering the NTP metrics: %w", err)
	}
	if err := reg.Register(server.NTPBudget(budget)); err != nil {
		return server.ReadyCheck{}, fmt.Errorf("registering the NTP budget: %w", err)
	}
	s.bg.Go(func() {
		mon.Run(bg, func(r ntpcheck.Report) { s.log.Debug("ntp check", "summary", ntpcheck.Summary(r)) })
	})
	return server.ReadyCheck{Name: "ntp", Check: func(context.Context) error { return mon.Ready() }}, nil
}

// Node returns the served node.
func (s *Service) Node() *node.Node { return s.node }

// Server returns the node's HTTP server.
func (s *Service) Server() *server.Server { return s.srv }

// Serve serves the node's API on main (and the admin API on admin, when
// non-nil) until ctx is done, then shuts down gracefully: see
// server.Server.Serve, whose error it returns.
func (s *Service) Serve(ctx context.Context, main, admin net.Listener) error {
	st := s.node.Settings()
	s.log.Info("serving", "worker", st.Node, "layout", st.Layout.Name, "epoch", st.Layout.Epoch.Format(time.RFC3339),
		"policy", st.Policy.String(), "max_wait", st.MaxWait, "admin", s.srv.AdminEnabled(), "max_conns", s.srv.MaxConns())
	if err := s.srv.Serve(ctx, main, admin); err != nil {
		return err
	}
	var issued uint64
	if g := s.node.Generator(); g != nil {
		issued = g.Stats().Issued
	}
	s.log.Info("shut down", "issued", issued)
	return nil
}

// Close stops everything in order: the node (its generator persists its
// final mark, into the lease too, then the lease is released), the
// background work, the store, tracing. It is safe to call on a Service
// New is still building.
func (s *Service) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.node != nil {
		if err := s.node.Stop(ctx, true); err != nil {
			s.log.Warn("stopping the node", "err", err)
		}
	}
	s.cancel()
	s.bg.Wait()
	if s.store != nil {
		s.store.Close()
	}
	if s.tracer != nil {
		s.tracer.Shutdown(ctx)
	}
}
