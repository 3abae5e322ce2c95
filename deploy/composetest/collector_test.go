package composetest

import (
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
)

// collectorConfig is the part of an OpenTelemetry Collector configuration
// the stack relies on. Components are keyed "type" or "type/name".
type collectorConfig struct {
	Extensions map[string]map[string]any `yaml:"extensions"`
	Receivers  map[string]struct {
		Protocols map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"protocols"`
	} `yaml:"receivers"`
	Processors map[string]map[string]any `yaml:"processors"`
	Exporters  map[string]map[string]any `yaml:"exporters"`
	Connectors map[string]map[string]any `yaml:"connectors"`
	Service    struct {
		Extensions []string `yaml:"extensions"`
		Pipelines  map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

func loadCollector(t *testing.T) collectorConfig {
	t.Helper()
	var c collectorConfig
	readYAML(t, "deploy/otel-collector.yaml", &c)
	return c
}

// contribTypes are the component types used here that the
// opentelemetry-collector-contrib image ships, by section.
var contribTypes = map[string][]string{
	"extensions": {"health_check"},
	"receivers":  {"otlp"},
	"processors": {"batch", "memory_limiter"},
	"exporters":  {"otlp", "otlphttp", "debug"},
}

func componentType(id string) string {
	typ, _, _ := strings.Cut(id, "/")
	return typ
}

// TestCollectorConfig checks deploy/otel-collector.yaml the way the
// collector's own config validation would for this shape: every component
// a pipeline names is declared, every declared one is used, the types
// exist in the contrib image, the trace pipeline runs OTLP in and out to
// Jaeger, and listeners bind all interfaces (a container's loopback is
// unreachable from the other services).
func TestCollectorConfig(t *testing.T) {
	c := loadCollector(t)
	sections := map[string][]string{}
	for name, keys := range map[string][]string{
		"extensions": keysOf(c.Extensions),
		"receivers":  keysOf(c.Receivers),
		"processors": keysOf(c.Processors),
		"exporters":  keysOf(c.Exporters),
	} {
		sections[name] = keys
		for _, id := range keys {
			if !slices.Contains(contribTypes[name], componentType(id)) {
				t.Errorf("%s: %q: unknown component type %q", name, id, componentType(id))
			}
		}
	}
	if len(c.Connectors) > 0 {
		t.Errorf("connectors are not expected: %v", keysOf(c.Connectors))
	}
	used := map[string]map[string]bool{"extensions": {}, "receivers": {}, "processors": {}, "exporters": {}}
	for _, e := range c.Service.Extensions {
		used["extensions"][e] = true
	}
	if len(c.Service.Pipelines) == 0 {
		t.Fatal("no pipelines")
	}
	for name, p := range c.Service.Pipelines {
		if typ := componentType(name); typ != "traces" && typ != "metrics" && typ != "logs" {
			t.Errorf("pipeline %q: unknown signal", name)
		}
		if len(p.Receivers) == 0 || len(p.Exporters) == 0 {
			t.Errorf("pipeline %q: needs receivers and exporters", name)
		}
		for section, ids := range map[string][]string{"receivers": p.Receivers, "processors": p.Processors, "exporters": p.Exporters} {
			for _, id := range ids {
				if !slices.Contains(sections[section], id) {
					t.Errorf("pipeline %q: %s %q is not declared", name, section, id)
				}
				used[section][id] = true
			}
		}
		// memory_limiter must come first, batch last, as the collector
		// documentation requires.
		if i := slices.Index(p.Processors, "memory_limiter"); i > 0 {
			t.Errorf("pipeline %q: memory_limiter at position %d, want first", name, i)
		}
		if i := slices.Index(p.Processors, "batch"); i >= 0 && i != len(p.Processors)-1 {
			t.Errorf("pipeline %q: batch at position %d, want last", name, i)
		}
	}
	for section, ids := range sections {
		for _, id := range ids {
			if !used[section][id] {
				t.Errorf("%s %q is declared but unused", section, id)
			}
		}
	}
	traces, ok := c.Service.Pipelines["traces"]
	if !ok || !slices.Contains(traces.Receivers, "otlp") {
		t.Fatalf("no traces pipeline receiving OTLP: %+v", c.Service.Pipelines)
	}
	toJaeger := false
	for _, id := range traces.Exporters {
		ep, _ := c.Exporters[id]["endpoint"].(string)
		host, port, err := net.SplitHostPort(ep)
		if componentType(id) == "otlp" && err == nil && host == "jaeger" && port == "4317" {
			toJaeger = true
			tls, _ := c.Exporters[id]["tls"].(map[string]any)
			if tls["insecure"] != true {
				t.Errorf("exporter %s: Jaeger's OTLP receiver in the stack is plaintext; set tls.insecure", id)
			}
		}
	}
	if !toJaeger {
		t.Errorf("the traces pipeline does not export OTLP/gRPC to jaeger:4317")
	}
	for proto, want := range map[string]string{"grpc": "4317", "http": "4318"} {
		host, port, err := net.SplitHostPort(c.Receivers["otlp"].Protocols[proto].Endpoint)
		if err != nil || host != "0.0.0.0" || port != want {
			t.Errorf("otlp receiver %s endpoint %q, want 0.0.0.0:%s", proto, c.Receivers["otlp"].Protocols[proto].Endpoint, want)
		}
	}
	p := mustLoad(t, nil)
	if _, err := p.GetService("jaeger"); err != nil {
		t.Error(err)
	}
	oc, _ := p.GetService("otel-collector")
	if got := mountOf(t, oc, "/etc/otelcol-contrib/config.yaml"); got != "deploy/otel-collector.yaml" {
		t.Errorf("otel-collector: config mounted from %q", got)
	}
	if !slices.Contains(oc.Command, "--config=/etc/otelcol-contrib/config.yaml") {
		t.Errorf("otel-collector: command %q does not load the mounted config", oc.Command)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
