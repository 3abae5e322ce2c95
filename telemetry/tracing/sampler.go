package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// KeepKey marks a span that must be sampled whatever the configured sampler
// decides. It is a start attribute (samplers see only those) set to true on
// the spans the generator observer starts for a rewind met by a request
// whose own span was not sampled.
const KeepKey = attribute.Key("snowchaos.keep")

// KeepRewinds wraps base so that a span whose start attributes carry
// KeepKey=true is always recorded and sampled; every other span is decided
// by base. Setup installs it around the configured sampler; install it
// yourself when you build your own sdktrace.TracerProvider.
func KeepRewinds(base sdktrace.Sampler) sdktrace.Sampler {
	if base == nil {
		base = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	return keepSampler{base: base}
}

type keepSampler struct{ base sdktrace.Sampler }

// ShouldSample samples marked spans and defers the rest to base.
func (s keepSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == KeepKey && a.Value.Type() == attribute.BOOL && a.Value.AsBool() {
			return sdktrace.SamplingResult{
				Decision:   sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
			}
		}
	}
	return s.base.ShouldSample(p)
}

// Description names the wrapper and base.
func (s keepSampler) Description() string {
	return "KeepRewinds{" + s.base.Description() + "}"
}
