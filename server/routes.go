package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pre-built header values, assigned to header maps without allocating.
var (
	contentText = []string{"text/plain; charset=utf-8"}
	contentJSON = []string{"application/json"}
	noStore     = []string{"no-store"}
	nosniff     = []string{"nosniff"}
)

// methods maps an HTTP method to its handler; "*" handles every method.
type methods map[string]http.HandlerFunc

// get is a route that answers GET only.
func get(h http.HandlerFunc) methods { return methods{http.MethodGet: h} }

// allow returns the Allow header value for m.
func (m methods) allow() string {
	var ms []string
	for k := range m {
		ms = append(ms, k)
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// route wraps a method table with method dispatch (405 with Allow) and the
// route's request metrics.
func (s *Server) route(name string, m methods) http.Handler {
	rm := s.metrics.route(name)
	allow := m.allow()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h, ok := m[r.Method]
		if !ok {
			h, ok = m["*"]
		}
		if ok {
			h(sw, r)
		} else {
			sw.Header().Set("Allow", allow)
			writeError(sw, http.StatusMethodNotAllowed, errMethod,
				"method "+strconv.Quote(r.Method)+" is not allowed on "+strconv.Quote(r.URL.Path)+" (allowed: "+allow+")")
		}
		rm.observe(sw.code, time.Since(start))
	})
}

// notFound answers every unknown path.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, errNotFound, "no route for "+quote(r.URL.Path))
}

// statusWriter records the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

// WriteHeader records code and passes it on.
func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write marks the header written (200) and passes b on.
func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on when the underlying writer supports it.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// httpMetrics are the node's request metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// commonCodes are the status codes whose counters are created at start.
var commonCodes = []int{200, 400, 401, 403, 404, 405, 409, 413, 415, 500, 503}

// newHTTPMetrics registers the request metrics on reg.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowflake_http_requests_total",
			Help: "HTTP requests served by the node, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snowflake_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routeMetrics holds one route's pre-resolved metric children, so the
// request path pays only for atomics.
type routeMetrics struct {
	name     string
	vec      *prometheus.CounterVec
	codes    map[int]prometheus.Counter // read-only after creation
	duration prometheus.Observer
}

// route resolves the children of one route.
func (m *httpMetrics) route(name string) *routeMetrics {
	rm := &routeMetrics{name: name, vec: m.requests, codes: map[int]prometheus.Counter{}, duration: m.duration.WithLabelValues(name)}
	for _, c := range commonCodes {
		rm.codes[c] = m.requests.WithLabelValues(name, strconv.Itoa(c))
	}
	return rm
}

// observe counts one request.
func (rm *routeMetrics) observe(code int, d time.Duration) {
	if c, ok := rm.codes[code]; ok {
		c.Inc()
	} else {
		rm.vec.WithLabelValues(rm.name, strconv.Itoa(code)).Inc()
	}
	rm.duration.Observe(d.Seconds())
}
