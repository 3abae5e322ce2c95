package composetest

import (
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// prometheusMounts returns the prometheus service and its bind mounts
// (container path -> repository path).
func prometheusMounts(t *testing.T) (types.ServiceConfig, map[string]string) {
	t.Helper()
	p := mustLoad(t, allProfiles)
	s, err := p.GetService("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind {
			m[v.Target] = mountOf(t, s, v.Target)
		}
	}
	return s, m
}

// configPath is where the prometheus service reads its configuration.
func configPath(t *testing.T, s types.ServiceConfig) string {
	t.Helper()
	for _, a := range s.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			return v
		}
	}
	t.Fatalf("prometheus: no --config.file in %q", s.Command)
	return ""
}

// TestPromtoolCheckConfig lays the files out as the prometheus container
// sees them (the config and every rule file it names, mounted from the
// repository) and runs `promtool check config` on them.
func TestPromtoolCheckConfig(t *testing.T) {
	s, mounts := prometheusMounts(t)
	cfgPath := configPath(t, s)
	src, ok := mounts[cfgPath]
	if !ok || src != "deploy/prometheus.yml" {
		t.Fatalf("prometheus: %s is mounted from %q, want deploy/prometheus.yml", cfgPath, src)
	}
	if !slices.Contains(s.Command, "--enable-feature=exemplar-storage") {
		t.Errorf("prometheus: exemplar storage is off; the dashboards' exemplar links need --enable-feature=exemplar-storage")
	}
	var cfg PromConfig
	readYAML(t, src, &cfg)
	if len(cfg.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no alert rules")
	}
	// Every rule file the config names, resolved against the config's
	// directory in the container, must be mounted.
	dir := t.TempDir()
	copyFile(t, filepath.Join(root, src), filepath.Join(dir, "prometheus.yml"))
	for _, rf := range cfg.RuleFiles {
		inContainer := rf
		if !path.IsAbs(rf) {
			inContainer = path.Join(path.Dir(cfgPath), rf)
		}
		from, ok := mounts[inContainer]
		if !ok {
			t.Errorf("rule file %s (%s in the container) is not mounted", rf, inContainer)
			continue
		}
		if filepath.IsAbs(rf) || strings.Contains(rf, "*") {
			t.Errorf("rule file %s: want a plain relative path", rf)
			continue
		}
		copyFile(t, filepath.Join(root, from), filepath.Join(dir, rf))
	}
	promtool := promtoolBinary(t)
	out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	t.Logf("promtool check config:\n%s", out)
}

func promtoolBinary(t *testing.T) string {
	t.Helper()
	return testenv.LookPath(t, "promtool")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrometheusScrapesTheStack: every scrape target is a service of the
// stack at a port it listens on, every node is scraped, and so is the
// chaos service while it runs (the harness dashboard reads its series).
func TestPrometheusScrapesTheStack(t *testing.T) {
	p := mustLoad(t, allProfiles)
	var cfg PromConfig
	readYAML(t, "deploy/prometheus.yml", &cfg)
	listens := map[string]string{
		"node1": "8080", "node2": "8080", "node3": "8080",
		"chaos":      ChaosMetricsPort,
		"prometheus": "9090", "localhost": "9090",
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, port, err := net.SplitHostPort(tg)
				if err != nil {
					t.Errorf("job %s: target %q: %v", sc.JobName, tg, err)
					continue
				}
				if host != "localhost" {
					if _, err := p.GetService(host); err != nil {
						t.Errorf("job %s: target %s is not a service of the stack", sc.JobName, tg)
						continue
					}
				}
				if want, ok := listens[host]; ok && want != port {
					t.Errorf("job %s: target %s, but %s serves metrics on %s", sc.JobName, tg, host, want)
				}
				scraped[host] = true
			}
		}
	}
	for _, host := range []string{"node1", "node2", "node3"} {
		if !scraped[host] {
			t.Errorf("deploy/prometheus.yml does not scrape %s", host)
		}
	}
	if !scraped["chaos"] {
		t.Errorf("deploy/prometheus.yml does not scrape the chaos service (chaos:%s): the harness dashboard would stay empty under `make chaos`; add a job with target chaos:%s (owned by the telemetry helper)", ChaosMetricsPort, ChaosMetricsPort)
	}
}
