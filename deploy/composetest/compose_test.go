package composetest

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/dashboards"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

// root is the repository root, relative to this package.
const root = "../.."

// testToken is the admin token the tests interpolate.
const testToken = "test-admin-token"

// allProfiles enables every optional service.
var allProfiles = []string{"*"}

// load loads docker-compose.yml as `docker compose` would, with the given
// environment (nil: the token, scenario and lease store make sets) and
// profiles.
func load(t *testing.T, env map[string]string, profiles []string) (*types.Project, error) {
	t.Helper()
	if env == nil {
		env = map[string]string{"SNOWCHAOS_ADMIN_TOKEN": testToken, "SCENARIO": "ntp-step", "LEASES": "postgres"}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(abs, "docker-compose.yml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: file, Content: data}},
		Environment: env,
	}, func(o *loader.Options) {
		o.SetProjectName("snowchaos", true)
		o.Profiles = profiles
	})
}

func mustLoad(t *testing.T, profiles []string) *types.Project {
	t.Helper()
	p, err := load(t, nil, profiles)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

// TestComposeLoads loads the file under each profile set and checks which
// services run.
func TestComposeLoads(t *testing.T) {
	core := []string{"grafana", "jaeger", "node1", "node2", "node3", "otel-collector", "postgres", "prometheus"}
	for _, c := range []struct {
		profiles []string
		want     []string
	}{
		{nil, core},
		{[]string{"chaos"}, append(slices.Clone(core), "chaos")},
		{[]string{"etcd"}, append(slices.Clone(core), "etcd")},
		{[]string{"zookeeper"}, append(slices.Clone(core), "zookeeper")},
		{allProfiles, append(slices.Clone(core), "chaos", "etcd", "zookeeper")},
	} {
		p := mustLoad(t, c.profiles)
		if p.Name != "snowchaos" {
			t.Errorf("project name %q", p.Name)
		}
		got := p.ServiceNames()
		sort.Strings(got)
		want := slices.Clone(c.want)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("profiles %v: services %v, want %v", c.profiles, got, want)
		}
	}
}

// TestComposeNeedsAdminToken: without SNOWCHAOS_ADMIN_TOKEN the stack does
// not start with an empty token (make up generates one).
func TestComposeNeedsAdminToken(t *testing.T) {
	_, err := load(t, map[string]string{}, nil)
	if err == nil || !strings.Contains(err.Error(), "SNOWCHAOS_ADMIN_TOKEN") {
		t.Fatalf("loading without SNOWCHAOS_ADMIN_TOKEN: err = %v, want one naming the variable", err)
	}
}

// publicImages are the only images pulled: the servers' own public
// images, pinned to a version. Everything else is built from source.
var publicImages = map[string]string{
	"postgres":       "postgres",
	"etcd":           "quay.io/coreos/etcd",
	"zookeeper":      "zookeeper",
	"prometheus":     "prom/prometheus",
	"grafana":        "grafana/grafana",
	"otel-collector": "otel/opentelemetry-collector-contrib",
	"jaeger":         "jaegertracing/all-in-one",
}

// noHealthcheck lists services without a health check, and why.
var noHealthcheck = map[string]string{
	"otel-collector": "the collector image is FROM scratch: no shell or HTTP client to probe with",
	"chaos":          "a one-shot run; its exit code is the verdict",
}

// TestComposeServices checks images, builds, health checks, dependencies,
// ports and volumes of every service.
func TestComposeServices(t *testing.T) {
	p := mustLoad(t, allProfiles)
	for name, s := range p.Services {
		// Images: ours built from the Dockerfile, the rest public and pinned.
		if repo, ok := publicImages[name]; ok {
			if s.Build != nil {
				t.Errorf("%s: builds an image; want the public %s image", name, repo)
			}
			img, tag, _ := strings.Cut(s.Image, ":")
			if img != repo || tag == "" || tag == "latest" {
				t.Errorf("%s: image %q, want %s pinned to a version", name, s.Image, repo)
			}
		} else {
			if s.Build == nil || s.Build.Context != mustAbs(t, root) || s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: want it built from the repository's Dockerfile, got build %+v", name, s.Build)
			}
			if s.Image != "snowchaos:local" {
				t.Errorf("%s: image %q, want snowchaos:local (built locally, never pulled)", name, s.Image)
			}
		}

		// Health checks.
		hc := s.HealthCheck
		if why, exempt := noHealthcheck[name]; exempt {
			if hc != nil && !hc.Disable {
				t.Errorf("%s: has a health check but is listed as exempt (%s)", name, why)
			}
		} else if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Interval == nil || hc.Retries == nil {
			t.Errorf("%s: no complete health check (test, interval, retries): %+v", name, hc)
		} else if hc.Test[0] != "CMD" {
			t.Errorf("%s: health check %q: want the exec form [CMD, ...] (no shell in the images)", name, hc.Test)
		}

		// Dependencies exist and wait on health where there is one.
		for dep, d := range s.DependsOn {
			ds, err := p.GetService(dep)
			if err != nil {
				if d.Required {
					t.Errorf("%s: depends on unknown service %s", name, dep)
				}
				continue
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if ds.HealthCheck == nil {
					t.Errorf("%s: waits for %s to be healthy, but %s has no health check", name, dep, dep)
				}
			case types.ServiceConditionStarted:
				if ds.HealthCheck != nil {
					t.Errorf("%s: waits only for %s to start; it has a health check, wait for service_healthy", name, dep)
				}
			default:
				t.Errorf("%s: depends on %s with condition %q", name, dep, d.Condition)
			}
		}

		// Ports: published on localhost only.
		for _, pt := range s.Ports {
			if pt.HostIP != "127.0.0.1" {
				t.Errorf("%s: port %d published on %q, want 127.0.0.1 only", name, pt.Target, pt.HostIP)
			}
		}

		// Bind mounts: every source exists inside the repository.
		for _, v := range s.Volumes {
			switch v.Type {
			case types.VolumeTypeBind:
				checkBindSource(t, name, v)
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: volume %q is not declared", name, v.Source)
				}
			default:
				t.Errorf("%s: volume of type %s", name, v.Type)
			}
		}
	}

	// The ones the stack depends on.
	for _, c := range []struct{ service, dep, cond string }{
		{"node1", "postgres", types.ServiceConditionHealthy},
		{"node1", "etcd", types.ServiceConditionHealthy},
		{"node1", "zookeeper", types.ServiceConditionHealthy},
		{"node1", "otel-collector", types.ServiceConditionStarted},
		{"grafana", "prometheus", types.ServiceConditionHealthy},
		{"grafana", "jaeger", types.ServiceConditionHealthy},
		{"otel-collector", "jaeger", types.ServiceConditionHealthy},
		{"chaos", "node1", types.ServiceConditionHealthy},
		{"chaos", "node2", types.ServiceConditionHealthy},
		{"chaos", "node3", types.ServiceConditionHealthy},
		{"chaos", "prometheus", types.ServiceConditionHealthy},
	} {
		s, err := p.GetService(c.service)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := s.DependsOn[c.dep]; !ok || d.Condition != c.cond {
			t.Errorf("%s: depends_on %s = %+v, want condition %s", c.service, c.dep, d, c.cond)
		}
	}
	// The optional lease stores are optional dependencies: the node starts
	// with either one.
	n1, _ := p.GetService("node1")
	for _, dep := range []string{"postgres", "etcd", "zookeeper"} {
		if n1.DependsOn[dep].Required {
			t.Errorf("node1: depends_on %s is required; the other lease store may be in use", dep)
		}
	}
	// What the user reaches on localhost.
	published := map[string]string{}
	for name, s := range p.Services {
		for _, pt := range s.Ports {
			published[pt.Published] = name
		}
	}
	for port, svc := range map[string]string{"3000": "grafana", "9090": "prometheus", "16686": "jaeger", "8081": "node1", "8082": "node2", "8083": "node3"} {
		if published[port] != svc {
			t.Errorf("port %s published by %q, want %s", port, published[port], svc)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkBindSource fails unless the bind mount's source exists within the
// repository.
func checkBindSource(t *testing.T, service string, v types.ServiceVolumeConfig) {
	t.Helper()
	repo := mustAbs(t, root)
	rel, err := filepath.Rel(repo, v.Source)
	if err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		t.Errorf("%s: bind mount %s is outside the repository", service, v.Source)
		return
	}
	if _, err := os.Stat(v.Source); err != nil {
		t.Errorf("%s: bind mount source %s does not exist: %v", service, rel, err)
	}
	if !v.ReadOnly {
		t.Errorf("%s: bind mount %s is writable; mount repository files read-only", service, rel)
	}
}

// mountOf returns the host path (relative to the repository) mounted at
// target in service s, or "".
func mountOf(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == target {
			rel, err := filepath.Rel(mustAbs(t, root), v.Source)
			if err != nil {
				t.Fatal(err)
			}
			return filepath.ToSlash(rel)
		}
	}
	return ""
}

// env returns a service's environment variable.
func env(s types.ServiceConfig, key string) string {
	if v, ok := s.Environment[key]; ok && v != nil {
		return *v
	}
	return ""
}

// TestComposeNodes checks the generator nodes' configuration: admin API
// on with the token from the environment and allowed on the compose
// network, a checkpoint on a volume, leases, traces to the collector.
func TestComposeNodes(t *testing.T) {
	p := mustLoad(t, allProfiles)
	for _, name := range []string{"node1", "node2", "node3"} {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Command, types.ShellCommand{"serve"}) {
			t.Errorf("%s: command %q, want [serve]", name, s.Command)
		}
		for k, want := range map[string]string{
			"SNOWCHAOS_ADMIN_TOKEN":        testToken,
			"SNOWCHAOS_ADMIN_ALLOW_REMOTE": "true",
			"SNOWCHAOS_HOLDER":             name,
			"OTEL_SERVICE_NAME":            "snowchaos-" + name,
			"SNOWCHAOS_LISTEN":             ":8080",
		} {
			if got := env(s, k); got != want {
				t.Errorf("%s: %s = %q, want %q", name, k, got, want)
			}
		}
		ck := env(s, "SNOWCHAOS_CHECKPOINT")
		onVolume := false
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && strings.HasPrefix(ck, v.Target+"/") {
				onVolume = true
			}
		}
		if !onVolume {
			t.Errorf("%s: checkpoint %q is not on a named volume (it must survive a restart)", name, ck)
		}
		if hc := s.HealthCheck; hc == nil || !slices.Equal([]string(hc.Test), []string{"CMD", "/usr/local/bin/probe", "http://127.0.0.1:8080/healthz"}) {
			t.Errorf("%s: health check %+v, want the probe on /healthz", name, hc)
		}
		if len(s.Ports) != 1 || s.Ports[0].Target != 8080 {
			t.Errorf("%s: ports %+v, want only 8080", name, s.Ports)
		}
		checkOTLPEndpoint(t, p, name, env(s, "OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	// Leases on Postgres by default, on etcd when chosen.
	n1, _ := p.GetService("node1")
	if u, err := url.Parse(env(n1, "SNOWCHAOS_LEASE")); err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Port() != "5432" {
		t.Errorf("SNOWCHAOS_LEASE = %q, want the postgres service on 5432", env(n1, "SNOWCHAOS_LEASE"))
	}
	pe, err := load(t, map[string]string{"SNOWCHAOS_ADMIN_TOKEN": testToken, "SNOWCHAOS_LEASE": "etcd://etcd:2379"}, []string{"etcd"})
	if err != nil {
		t.Fatal(err)
	}
	e1, _ := pe.GetService("node1")
	if got := env(e1, "SNOWCHAOS_LEASE"); got != "etcd://etcd:2379" {
		t.Errorf("SNOWCHAOS_LEASE=etcd://etcd:2379: node1 gets %q", got)
	}
	if _, err := pe.GetService("etcd"); err != nil {
		t.Error(err)
	}
	// ZooKeeper: the URL make up sets names the zookeeper service on its
	// client port.
	const zkLease = "zk://zookeeper:2181/snowchaos/leases"
	pz, err := load(t, map[string]string{"SNOWCHAOS_ADMIN_TOKEN": testToken, "SNOWCHAOS_LEASE": zkLease}, []string{"zookeeper"})
	if err != nil {
		t.Fatal(err)
	}
	z1, _ := pz.GetService("node1")
	servers, _, err := zkurl.Parse(env(z1, "SNOWCHAOS_LEASE"))
	if err != nil || !slices.Equal(servers, []string{"zookeeper:2181"}) {
		t.Errorf("SNOWCHAOS_LEASE=%s: node1 gets %q (%v)", zkLease, env(z1, "SNOWCHAOS_LEASE"), err)
	}
	if _, err := pz.GetService("zookeeper"); err != nil {
		t.Error(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "dashboards.mk"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LEASE_URL_etcd     = etcd://etcd:2379", "LEASE_URL_zookeeper = " + zkLease, "LEASE_URL_postgres = " + env(n1, "SNOWCHAOS_LEASE")} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("dashboards.mk lacks %q", want)
		}
	}
}

// checkOTLPEndpoint: the endpoint is the collector service at its OTLP
// gRPC receiver's port.
func checkOTLPEndpoint(t *testing.T, p *types.Project, service, endpoint string) {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() != "otel-collector" {
		t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q, want the otel-collector service", service, endpoint)
		return
	}
	cfg := loadCollector(t)
	_, port, _ := net.SplitHostPort(cfg.Receivers["otlp"].Protocols["grpc"].Endpoint)
	if u.Port() != port {
		t.Errorf("%s: OTLP endpoint port %s, the collector's gRPC receiver listens on %s", service, u.Port(), port)
	}
	if _, err := p.GetService("otel-collector"); err != nil {
		t.Error(err)
	}
}

// TestComposeChaos checks the chaos service: a real-mode run of a mounted
// scenario against the three nodes with the admin token, serving metrics.
func TestComposeChaos(t *testing.T) {
	p := mustLoad(t, []string{"chaos"})
	s, err := p.GetService("chaos")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Profiles, []string{"chaos"}) {
		t.Errorf("chaos: profiles %v, want [chaos] (make chaos runs it)", s.Profiles)
	}
	cmd := strings.Join(s.Command, " ")
	for _, want := range []string{"run", "--mode real", "--metrics-addr :" + ChaosMetricsPort, "/scenarios/ntp-step.yaml"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("chaos: command %q lacks %q", cmd, want)
		}
	}
	if got := mountOf(t, s, "/scenarios"); got != "deploy/compose/scenarios" {
		t.Errorf("chaos: /scenarios mounted from %q", got)
	}
	if env(s, "SNOWCHAOS_ADMIN_TOKEN") != testToken {
		t.Errorf("chaos: admin token not passed")
	}
	nodes := env(s, "SNOWCHAOS_HTTP_NODES")
	for _, n := range []string{"node1", "node2", "node3"} {
		if !strings.Contains(nodes, n+"=http://"+n+":8080") {
			t.Errorf("chaos: SNOWCHAOS_HTTP_NODES %q lacks %s", nodes, n)
		}
	}
	checkOTLPEndpoint(t, p, "chaos", env(s, "OTEL_EXPORTER_OTLP_ENDPOINT"))

	// Another scenario by name.
	p2, err := load(t, map[string]string{"SNOWCHAOS_ADMIN_TOKEN": testToken, "SCENARIO": "other"}, []string{"chaos"})
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := p2.GetService("chaos")
	if !slices.Contains(s2.Command, "/scenarios/other.yaml") {
		t.Errorf("SCENARIO=other: command %q", s2.Command)
	}
}

// ChaosMetricsPort is where the chaos service serves its metrics.
const ChaosMetricsPort = "9464"

// TestComposeGrafana checks that Grafana gets the provisioning files and
// the dashboards where the provider looks, and that the data sources point
// at the stack's services.
func TestComposeGrafana(t *testing.T) {
	p := mustLoad(t, nil)
	g, err := p.GetService("grafana")
	if err != nil {
		t.Fatal(err)
	}
	if got := mountOf(t, g, "/etc/grafana/provisioning/datasources"); got != "dashboards/provisioning/datasources" {
		t.Errorf("datasources provisioning mounted from %q", got)
	}
	if got := mountOf(t, g, "/etc/grafana/provisioning/dashboards"); got != "dashboards/provisioning/dashboards" {
		t.Errorf("dashboards provisioning mounted from %q", got)
	}
	var prov struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "dashboards/provisioning/dashboards/snowchaos.yaml", &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers: %+v", prov.Providers)
	}
	path := prov.Providers[0].Options.Path
	if got := mountOf(t, g, path); got != "dashboards/json" {
		t.Errorf("the provider reads %s, where %q is mounted; want dashboards/json", path, got)
	}
	home := env(g, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
	if filepath.Dir(home) != path {
		t.Errorf("home dashboard %s is not under %s", home, path)
	} else if _, err := os.Stat(filepath.Join(root, "dashboards/json", filepath.Base(home))); err != nil {
		t.Errorf("home dashboard: %v", err)
	}

	var ds struct {
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, "dashboards/provisioning/datasources/snowchaos.yaml", &ds)
	byUID := map[string]int{}
	for i, d := range ds.Datasources {
		byUID[d.UID] = i
		u, err := url.Parse(d.URL)
		if err != nil {
			t.Errorf("datasource %s: url %q: %v", d.Name, d.URL, err)
			continue
		}
		svc, err := p.GetService(u.Hostname())
		if err != nil {
			t.Errorf("datasource %s: %s is not a compose service", d.Name, u.Hostname())
			continue
		}
		if svc.HealthCheck == nil {
			t.Errorf("datasource %s: service %s has no health check", d.Name, svc.Name)
		}
	}
	pi, ok := byUID[dashboards.PrometheusUID]
	if !ok || ds.Datasources[pi].Type != "prometheus" || !ds.Datasources[pi].IsDefault {
		t.Fatalf("no default prometheus datasource with uid %q", dashboards.PrometheusUID)
	}
	ji, ok := byUID[dashboards.TracesUID]
	if !ok || ds.Datasources[ji].Type != "jaeger" {
		t.Fatalf("no jaeger datasource with uid %q", dashboards.TracesUID)
	}
	// Exemplars named trace_id (the label package telemetry puts on the
	// histograms) link to the traces data source.
	dest, _ := ds.Datasources[pi].JSONData["exemplarTraceIdDestinations"].([]any)
	linked := false
	for _, d := range dest {
		m, _ := d.(map[string]any)
		if m["name"] == "trace_id" && m["datasourceUid"] == dashboards.TracesUID {
			linked = true
		}
	}
	if !linked {
		t.Errorf("prometheus datasource: no exemplar link trace_id -> %s: %v", dashboards.TracesUID, dest)
	}
	if u, _ := url.Parse(ds.Datasources[ji].URL); u == nil || u.Port() != "16686" {
		t.Errorf("jaeger datasource %q: want the query port 16686", ds.Datasources[ji].URL)
	}
}

// readYAML decodes a repository file, failing on unknown structure.
func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}
