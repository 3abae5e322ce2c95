package server

import (
	"context"
	"net/http"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the request spans.
const tracerName = "github.com/snowchaos/snowchaos/server"

// tracing starts a server span per request: the caller's trace context is
// extracted from the request headers (W3C traceparent and baggage through
// the global propagator, as set by telemetry/tracing), and the span is
// named "METHOD /route" after the route, not the path, so a trace backend
// groups requests by route.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// newTracing returns the tracing of tp, or nil for no tracing at all.
func newTracing(tp trace.TracerProvider) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{tracer: tp.Tracer(tracerName), prop: otel.GetTextMapPropagator()}
}

// start starts the span of request c on route, a child of the caller's
// span when the request carries one.
func (t *tracing) start(c *fasthttp.RequestCtx, route string) (context.Context, trace.Span) {
	ctx := t.prop.Extract(context.Background(), headerCarrier{&c.Request.Header})
	method := string(c.Method())
	name := method
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(string(c.Path())), semconv.URLScheme("http")}
	if route != "" {
		name += " " + route
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(c.Time()), trace.WithAttributes(attrs...))
}

// end ends span with the response's status code (an error status for 5xx).
func (t *tracing) end(span trace.Span, code int) {
	span.SetAttributes(semconv.HTTPResponseStatusCode(code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// headerCarrier reads and writes fasthttp request headers for a
// propagator.
type headerCarrier struct{ h *fasthttp.RequestHeader }

var _ propagation.TextMapCarrier = headerCarrier{}

// Get returns the value of header key.
func (hc headerCarrier) Get(key string) string { return string(hc.h.Peek(key)) }

// Set sets header key.
func (hc headerCarrier) Set(key, value string) { hc.h.Set(key, value) }

// Keys lists the header names.
func (hc headerCarrier) Keys() []string {
	var keys []string
	for k := range hc.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
