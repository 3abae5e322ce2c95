package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where Serve exposes the metrics.
const MetricsPath = "/metrics"

// ShutdownGrace bounds how long Serve waits for in-flight scrapes when its
// context ends.
const ShutdownGrace = 5 * time.Second

// NewRegistry returns a fresh registry (never the default one) holding the
// Go runtime and process collectors, for the endpoint a process serves.
// Register the component collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves g in the Prometheus text format or, when the scraper asks
// for it, OpenMetrics (which carries the exemplars). Gather errors are
// served as HTTP 500 so a scrape never silently loses series.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.HTTPErrorOnError,
	})
}

// Server is a running metrics endpoint.
type Server struct {
	addr string
	srv  *http.Server
	done chan struct{}
	err  error
}

// Listen starts serving g on addr ("127.0.0.1:0" picks a free port) at
// MetricsPath, and at "/" a one-line pointer to it. The listener is open
// when Listen returns.
func Listen(addr string, g prometheus.Gatherer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, Handler(g))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("snowchaos metrics at " + MetricsPath + "\n"))
	})
	s := &Server{
		addr: ln.Addr().String(),
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Addr returns the address the server listens on (host:port).
func (s *Server) Addr() string { return s.addr }

// URL returns the metrics URL, http://Addr()/metrics.
func (s *Server) URL() string { return "http://" + s.addr + MetricsPath }

// Shutdown stops accepting scrapes, waits for those in flight until ctx
// ends, and returns once the server has stopped.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	if err == nil {
		err = s.err
	}
	return err
}

// Done is closed once the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Serve serves g on addr until ctx ends, then shuts down gracefully
// (within ShutdownGrace). It returns the actual listening address at once
// (useful with port 0), or the listen error.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer) (actualAddr string, err error) {
	s, err := Listen(addr, g)
	if err != nil {
		return "", err
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-s.done:
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
		defer cancel()
		_ = s.Shutdown(sctx)
	}()
	return s.Addr(), nil
}
