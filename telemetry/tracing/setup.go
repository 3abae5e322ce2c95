// Package tracing configures OpenTelemetry tracing for snowchaos from the
// standard OTEL_* environment variables and holds the span helpers the
// generator observer, the harness and the leases use.
//
// Tracing is off unless an OTLP endpoint is configured: Setup then installs
// nothing, the global provider stays OpenTelemetry's no-op, and no span is
// ever created. There is never a span per ID: spans cover a scenario, a
// fault injection, a lease acquisition or renewal, or a request or batch;
// clock events are events or short child spans of those.
//
// Rewinds are rare and the reason anyone looks at a trace, so they are kept
// even in requests the sampler dropped: the generator observer starts a
// separate "clock.rewind" span, linked to the request's span and marked with
// the KeepKey attribute, and the sampler Setup installs (KeepRewinds wrapped
// around the configured one) always samples spans carrying that mark.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is the service.name used when neither OTEL_SERVICE_NAME
// nor OTEL_RESOURCE_ATTRIBUTES names one and Setup was given "".
const DefaultServiceName = "snowchaos"

// Environment variables Setup reads (besides those the OTLP exporters read
// themselves: endpoint details, headers, TLS, timeouts, compression).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// ErrConfig reports an OTEL_* variable Setup cannot honour.
var ErrConfig = errors.New("tracing: invalid OTEL configuration")

// Provider is the tracer provider Setup installed. A disabled Provider is a
// no-op: its spans are never recorded and Shutdown does nothing.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Shutdown flushes buffered spans and stops the exporter; it is safe on a
// disabled or nil Provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// ForceFlush exports every finished span now.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Setup configures tracing from the environment and, when enabled, installs
// the provider and the W3C trace-context and baggage propagators as
// OpenTelemetry's globals.
//
// Tracing is enabled when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, unless OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none. OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL picks
// "grpc" or "http/protobuf" (the default). OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG pick the sampler (default parentbased_always_on),
// which is wrapped in KeepRewinds. OTEL_SERVICE_NAME names the service;
// serviceName ("" for DefaultServiceName) is the fallback.
//
// Errors wrap ErrConfig for an unsupported protocol, exporter or sampler.
// When disabled, Setup returns a no-op Provider and changes no global.
func Setup(ctx context.Context, serviceName string, extra ...sdktrace.TracerProviderOption) (*Provider, error) {
	if !enabledFromEnv(os.Getenv) {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	sampler, err := SamplerFromEnv(os.Getenv(EnvSampler), os.Getenv(EnvSamplerArg))
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, protocolFromEnv(os.Getenv))
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, serviceName)
	if err != nil {
		return nil, err
	}
	opts := append([]sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(KeepRewinds(sampler)),
		sdktrace.WithResource(res),
	}, extra...)
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Provider{TracerProvider: tp, sdk: tp}, nil
}

func enabledFromEnv(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv(EnvTracesExporter)); e != "" && !strings.Contains(e, "otlp") {
		// "none" or an exporter we do not build (console, zipkin).
		return false
	}
	return strings.TrimSpace(getenv(EnvEndpoint)) != "" || strings.TrimSpace(getenv(EnvTracesEndpoint)) != ""
}

func protocolFromEnv(getenv func(string) string) string {
	if p := strings.TrimSpace(getenv(EnvTracesProtocol)); p != "" {
		return p
	}
	if p := strings.TrimSpace(getenv(EnvProtocol)); p != "" {
		return p
	}
	return "http/protobuf"
}

// newExporter builds the OTLP exporter for protocol. OpenTelemetry's
// autoexport would do it, but brings the log and metric exporters and a
// Prometheus bridge with it: 14 modules and 1.95 MB more in bin/snowchaos.
func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	switch protocol {
	case "grpc":
		return otlptracegrpc.New(ctx)
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	}
	return nil, fmt.Errorf("%w: %s=%q (want grpc or http/protobuf)", ErrConfig, EnvProtocol, protocol)
}

func newResource(ctx context.Context, serviceName string) (*resource.Resource, error) {
	if serviceName == "" {
		serviceName = DefaultServiceName
	}
	// Attributes from the environment override the fallback name.
	return resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
}

// SamplerFromEnv parses OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// as the SDK does, for KeepRewinds to wrap: the SDK applies its own
// environment sampler inside NewTracerProvider and exports no way to get
// it, and falls back to the default on a bad value where this refuses.
// Values: always_on, always_off, traceidratio, parentbased_always_on (also
// for ""), parentbased_always_off, parentbased_traceidratio; a ratio
// argument must lie in [0, 1] and defaults to 1. Errors wrap ErrConfig and
// name the value.
func SamplerFromEnv(name, arg string) (sdktrace.Sampler, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	arg = strings.TrimSpace(arg)
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("%w: %s=%q (want a ratio in [0, 1])", ErrConfig, EnvSamplerArg, arg)
		}
		return sdktrace.TraceIDRatioBased(v), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return ratio()
	case "parentbased_traceidratio":
		s, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(s), nil
	}
	return nil, fmt.Errorf("%w: %s=%q (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", ErrConfig, EnvSampler, name)
}
