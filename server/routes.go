package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.opentelemetry.io/otel/trace"
)

// Pre-built header values, assigned to net/http header maps without
// allocating (the admin API's responses).
var (
	contentJSON = []string{"application/json"}
	noStore     = []string{"no-store"}
	nosniff     = []string{"nosniff"}
)

// The same for fasthttp responses.
var (
	ctText          = []byte("text/plain; charset=utf-8")
	ctJSON          = []byte("application/json")
	mimeJSON        = ctJSON
	hdrCacheControl = []byte("Cache-Control")
	valNoStore      = []byte("no-store")
	hdrNosniff      = []byte("X-Content-Type-Options")
	valNosniff      = []byte("nosniff")
)

// handlerFunc serves one request. ctx carries the request's span when the
// node traces (and is context.Background() otherwise).
type handlerFunc func(ctx context.Context, c *fasthttp.RequestCtx)

// methods maps an HTTP method to its handler; "*" handles every method.
type methods map[string]handlerFunc

// get is a route that answers GET (and so HEAD) only.
func get(h handlerFunc) methods { return methods{http.MethodGet: h} }

// netHTTP serves a net/http handler (the admin API, /metrics) on a route.
func netHTTP(h http.HandlerFunc) handlerFunc {
	fh := fasthttpadaptor.NewFastHTTPHandler(h)
	return func(_ context.Context, c *fasthttp.RequestCtx) { fh(c) }
}

// allow returns the Allow header value for m.
func (m methods) allow() string {
	var ms []string
	for k := range m {
		ms = append(ms, k)
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// endpoint is one route: its handlers, its metrics and its name (the
// metrics' route label and the span name's route).
type endpoint struct {
	name    string
	span    string // the route in span names; "" for unknown paths
	methods methods
	get     handlerFunc // methods[GET], looked up without the map
	allow   string
	metrics *routeMetrics
}

// endpoint returns the route name serving m. A route that answers GET
// answers HEAD with the same handler: the same status and headers, and
// the server sends no body (RFC 9110 section 9.3.2).
func (s *Server) endpoint(name string, m methods) *endpoint {
	if g, ok := m[http.MethodGet]; ok {
		if _, ok := m[http.MethodHead]; !ok {
			m[http.MethodHead] = g
		}
	}
	span := name
	if name == routeOther {
		span = ""
	}
	return &endpoint{name: name, span: span, methods: m, get: m[http.MethodGet], allow: m.allow(), metrics: s.metrics.route(name)}
}

// routeOther is the route label of paths no route serves.
const routeOther = "other"

// prefixRoute serves every path under a prefix.
type prefixRoute struct {
	prefix []byte
	ep     *endpoint
}

// router maps a request's path (decoded and normalised) to its endpoint:
// an exact path, else the first matching prefix, else other.
type router struct {
	exact    map[string]*endpoint
	prefixes []prefixRoute
	other    *endpoint
}

// lookup returns the endpoint serving path.
func (rt *router) lookup(path []byte) *endpoint {
	if ep, ok := rt.exact[string(path)]; ok {
		return ep
	}
	for _, p := range rt.prefixes {
		if bytes.HasPrefix(path, p.prefix) {
			return p.ep
		}
	}
	return rt.other
}

// build assembles a request handler with the API routes, the admin
// routes, or both.
func (s *Server) build(api, admin bool) fasthttp.RequestHandler {
	rt := &router{exact: map[string]*endpoint{}}
	if api {
		decode := s.endpoint("/v1/decode/{id}", get(s.handleDecode))
		rt.exact["/v1/id"] = s.endpoint("/v1/id", get(s.handleID))
		rt.exact["/v1/ids"] = s.endpoint("/v1/ids", get(s.handleIDs))
		rt.exact["/v1/decode"] = decode
		rt.prefixes = append(rt.prefixes, prefixRoute{[]byte(decodePrefix), decode})
		rt.exact["/v1/info"] = s.endpoint("/v1/info", get(s.handleInfo))
		rt.exact["/healthz"] = s.endpoint("/healthz", get(s.handleHealth))
		rt.exact["/readyz"] = s.endpoint("/readyz", get(s.handleReady))
		prom := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})
		rt.exact["/metrics"] = s.endpoint("/metrics", get(netHTTP(prom.ServeHTTP)))
	}
	if admin {
		rt.exact["/admin/v1/faults"] = s.endpoint("/admin/v1/faults", methods{
			http.MethodGet:    netHTTP(s.adminOnly(s.handleFaultsGet)),
			http.MethodPost:   netHTTP(s.adminOnly(s.handleFaultsPost)),
			http.MethodDelete: netHTTP(s.adminOnly(s.handleFaultsDelete)),
		})
	} else {
		absent := s.endpoint("/admin", methods{"*": netHTTP(s.adminAbsent)})
		rt.exact["/admin"] = absent
		rt.prefixes = append(rt.prefixes, prefixRoute{[]byte("/admin/"), absent})
	}
	rt.other = s.endpoint(routeOther, methods{"*": notFound})
	return s.route(rt)
}

// route serves a request: it finds the endpoint, dispatches on the method
// (405 with Allow), traces (when on) and counts the request. A panic in a
// handler is answered 500 and closes the connection, as net/http would
// close it, rather than ending the process.
func (s *Server) route(rt *router) fasthttp.RequestHandler {
	return func(c *fasthttp.RequestCtx) {
		ep := rt.lookup(c.Path())
		ctx := context.Background()
		var span trace.Span
		if s.tracing != nil {
			ctx, span = s.tracing.start(c, ep.span)
		}
		defer s.finish(c, ep, span)
		h, ok := ep.get, ep.get != nil && c.IsGet()
		if !ok {
			h, ok = ep.methods[string(c.Method())]
		}
		if !ok {
			h, ok = ep.methods["*"]
		}
		if !ok {
			writeErrorCtx(c, http.StatusMethodNotAllowed, errMethod,
				"method "+strconv.Quote(string(c.Method()))+" is not allowed on "+strconv.Quote(string(c.Path()))+" (allowed: "+ep.allow+")")
			c.Response.Header.Set("Allow", ep.allow)
			return
		}
		h(ctx, c)
	}
}

// finish counts and ends a request (deferred by route), recovering a
// handler's panic.
func (s *Server) finish(c *fasthttp.RequestCtx, ep *endpoint, span trace.Span) {
	if p := recover(); p != nil {
		s.log.Error("server: panic serving a request", "route", ep.name, "path", string(c.Path()), "panic", p, "stack", string(debug.Stack()))
		c.Response.Reset()
		writeErrorCtx(c, http.StatusInternalServerError, errInternal, "the handler failed")
		c.SetConnectionClose()
	}
	code := c.Response.StatusCode()
	if span != nil {
		s.tracing.end(span, code)
	}
	ep.metrics.observe(code, time.Duration(monoNow()-requestStart(c)))
}

// notFound answers every unknown path.
func notFound(_ context.Context, c *fasthttp.RequestCtx) {
	writeErrorCtx(c, http.StatusNotFound, errNotFound, "no route for "+quote(string(c.Path())))
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
	ok       prometheus.Counter         // codes[200]
	codes    map[int]prometheus.Counter // read-only after creation
	duration prometheus.Observer
}

// route resolves the children of one route.
func (m *httpMetrics) route(name string) *routeMetrics {
	rm := &routeMetrics{name: name, vec: m.requests, codes: map[int]prometheus.Counter{}, duration: m.duration.WithLabelValues(name)}
	for _, c := range commonCodes {
		rm.codes[c] = m.requests.WithLabelValues(name, strconv.Itoa(c))
	}
	rm.ok = rm.codes[http.StatusOK]
	return rm
}

// observe counts one request.
func (rm *routeMetrics) observe(code int, d time.Duration) {
	if code == http.StatusOK {
		rm.ok.Inc()
	} else if c, ok := rm.codes[code]; ok {
		c.Inc()
	} else {
		rm.vec.WithLabelValues(rm.name, strconv.Itoa(code)).Inc()
	}
	rm.duration.Observe(d.Seconds())
}
