package tracing_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// clearEnv unsets every OTEL_* variable Setup or the exporters read, for
// the test's duration.
func clearEnv(t *testing.T) {
	for _, k := range []string{tracing.EnvEndpoint, tracing.EnvTracesEndpoint, tracing.EnvProtocol, tracing.EnvTracesProtocol,
		tracing.EnvTracesExporter, tracing.EnvSampler, tracing.EnvSamplerArg, tracing.EnvSDKDisabled, tracing.EnvServiceName,
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"} {
		t.Setenv(k, "")
	}
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
}

func TestSetupDisabledIsNoop(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"unset":         {},
		"sdk disabled":  {tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvSDKDisabled: "true"},
		"exporter none": {tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvTracesExporter: "none"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			before := otel.GetTracerProvider()
			p, err := tracing.Setup(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() {
				t.Error("enabled without an endpoint")
			}
			if otel.GetTracerProvider() != before {
				t.Error("disabled Setup changed the global provider")
			}
			_, span := p.Tracer("x").Start(context.Background(), "s")
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Error("disabled provider records spans")
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	clearEnv(t)
	t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:1")
	t.Setenv(tracing.EnvProtocol, "http/json")
	if _, err := tracing.Setup(context.Background(), ""); !errors.Is(err, tracing.ErrConfig) {
		t.Errorf("http/json: err = %v, want ErrConfig", err)
	}
	t.Setenv(tracing.EnvProtocol, "grpc")
	t.Setenv(tracing.EnvSampler, "sometimes")
	if _, err := tracing.Setup(context.Background(), ""); !errors.Is(err, tracing.ErrConfig) {
		t.Errorf("bad sampler: err = %v, want ErrConfig", err)
	}
}

func TestSamplerFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, arg, desc string
		bad             bool
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler", false},
		{"always_on", "", "AlwaysOnSampler", false},
		{"ALWAYS_OFF", "", "AlwaysOffSampler", false},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}", false},
		{"traceidratio", "", "TraceIDRatioBased{1}", false},
		{"parentbased_traceidratio", "0.5", "ParentBased{root:TraceIDRatioBased{0.5}", false},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler", false},
		{"traceidratio", "1.5", "", true},
		{"traceidratio", "-0.1", "", true},
		{"traceidratio", "NaN", "", true},
		{"parentbased_traceidratio", "x", "", true},
		{"jaeger_remote", "", "", true},
	} {
		s, err := tracing.SamplerFromEnv(tc.name, tc.arg)
		if tc.bad {
			if !errors.Is(err, tracing.ErrConfig) {
				t.Errorf("SamplerFromEnv(%q, %q) err = %v, want ErrConfig", tc.name, tc.arg, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("SamplerFromEnv(%q, %q): %v", tc.name, tc.arg, err)
			continue
		}
		if !strings.HasPrefix(s.Description(), tc.desc) {
			t.Errorf("SamplerFromEnv(%q, %q) = %s, want %s...", tc.name, tc.arg, s.Description(), tc.desc)
		}
	}
}

func FuzzSamplerFromEnv(f *testing.F) {
	f.Add("traceidratio", "0.5")
	f.Add("parentbased_traceidratio", "1e-3")
	f.Add("always_on", "")
	f.Fuzz(func(t *testing.T, name, arg string) {
		s, err := tracing.SamplerFromEnv(name, arg)
		if (s == nil) == (err == nil) {
			t.Fatalf("SamplerFromEnv(%q, %q) = %v, %v: want exactly one", name, arg, s, err)
		}
		if err != nil && !errors.Is(err, tracing.ErrConfig) {
			t.Fatalf("error %v does not wrap ErrConfig", err)
		}
	})
}

func TestKeepRewindsSampler(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.KeepRewinds(sdktrace.NeverSample())), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("t")
	_, plain := tr.Start(context.Background(), "plain")
	plain.End()
	_, marked := tr.Start(context.Background(), "marked", trace.WithAttributes(tracing.KeepKey.Bool(true)))
	marked.End()
	_, falseMark := tr.Start(context.Background(), "false", trace.WithAttributes(tracing.KeepKey.Bool(false)))
	falseMark.End()
	_, stringMark := tr.Start(context.Background(), "string", trace.WithAttributes(attribute.String(string(tracing.KeepKey), "true")))
	stringMark.End()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if strings.Join(names, ",") != "marked" {
		t.Errorf("recorded %v, want only the marked span", names)
	}
	if d := tracing.KeepRewinds(sdktrace.NeverSample()).Description(); d != "KeepRewinds{AlwaysOffSampler}" {
		t.Errorf("Description = %q", d)
	}
	if d := tracing.KeepRewinds(nil).Description(); !strings.Contains(d, "ParentBased") {
		t.Errorf("nil base Description = %q", d)
	}
}

func TestSpanHelpers(t *testing.T) {
	clearEnv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)

	ctx, sc := tracing.StartScenario(context.Background(), "ntp-step", "inprocess")
	fctx, f := tracing.StartFault(ctx, "step", "-50ms", "node1", "node2")
	tracing.End(f, nil)
	_, acq := tracing.StartLeaseAcquire(fctx, "node1", 7)
	tracing.End(acq, nil)
	_, ren := tracing.StartLeaseRenew(ctx, "node1", 7)
	tracing.End(ren, errors.New("etcd: lease not found"))
	_, b := tracing.StartBatch(ctx, "node1", 100)
	tracing.End(b, nil)
	tracing.End(sc, nil)

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	root := byName[tracing.SpanScenario]
	if root == nil || root.Parent().IsValid() {
		t.Fatalf("scenario span missing or not a root: %v", root)
	}
	for name, parent := range map[string]string{
		tracing.SpanFault: tracing.SpanScenario, tracing.SpanLeaseAcquire: tracing.SpanFault,
		tracing.SpanLeaseRenew: tracing.SpanScenario, tracing.SpanBatch: tracing.SpanScenario,
	} {
		s := byName[name]
		if s == nil {
			t.Errorf("no %s span", name)
			continue
		}
		if s.Parent().SpanID() != byName[parent].SpanContext().SpanID() {
			t.Errorf("%s parent is not %s", name, parent)
		}
	}
	if got := byName[tracing.SpanLeaseRenew].Status().Code; got != codes.Error {
		t.Errorf("failed renewal status = %v, want Error", got)
	}
	fa := map[attribute.Key]attribute.Value{}
	for _, kv := range byName[tracing.SpanFault].Attributes() {
		fa[kv.Key] = kv.Value
	}
	if fa[tracing.AttrFaultKind].AsString() != "step" || strings.Join(fa[tracing.AttrFaultNodes].AsStringSlice(), ",") != "node1,node2" {
		t.Errorf("fault attributes = %v", fa)
	}
}

// receiver collects the span names of OTLP export requests.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	names   []string
	service string
}

func (r *receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.names = append(r.names, s.GetName())
			}
		}
	}
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) got() (names []string, service string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names = append(names, r.names...)
	sort.Strings(names)
	return names, r.service
}

// ServeHTTP decodes OTLP/HTTP protobuf (optionally gzip-compressed).
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var er coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &er); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&er)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// exportThroughSetup configures tracing from the environment, emits a
// scenario with a fault and a kept rewind-marked span under an
// always-off sampler, and returns what rcv received.
func exportThroughSetup(t *testing.T, rcv *receiver) {
	t.Setenv(tracing.EnvServiceName, "snowchaos-test")
	t.Setenv(tracing.EnvSampler, "parentbased_always_off")
	p, err := tracing.Setup(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || otel.GetTracerProvider() != p.TracerProvider {
		t.Fatal("Setup with an endpoint did not install an enabled provider")
	}
	// Sampled out by parentbased_always_off:
	ctx, sc := tracing.StartScenario(context.Background(), "s", "inprocess")
	_, f := tracing.StartFault(ctx, "step", "-50ms", "n1")
	f.End()
	sc.End()
	// Kept by KeepRewinds whatever the configured sampler says:
	_, kept := tracing.Tracer().Start(context.Background(), tracing.SpanRewind, trace.WithAttributes(tracing.KeepKey.Bool(true)))
	kept.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	names, service := rcv.got()
	if strings.Join(names, ",") != tracing.SpanRewind {
		t.Errorf("received spans %v, want only the kept %s", names, tracing.SpanRewind)
	}
	if service != "snowchaos-test" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", service)
	}
}

func TestOTLPHTTPExport(t *testing.T) {
	clearEnv(t)
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv(tracing.EnvEndpoint, srv.URL)
	t.Setenv(tracing.EnvProtocol, "http/protobuf")
	exportThroughSetup(t, rcv)
}

func TestOTLPGRPCExport(t *testing.T) {
	clearEnv(t)
	rcv := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, rcv)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv(tracing.EnvEndpoint, "http://"+ln.Addr().String())
	t.Setenv(tracing.EnvProtocol, "grpc")
	exportThroughSetup(t, rcv)
}
