package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/snowchaos/snowchaos/deploy"
	"github.com/snowchaos/snowchaos/deploy/composetest"
	"github.com/snowchaos/snowchaos/harness/metrics"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
)

// promtool runs promtool with args in this directory and fails the test
// with its output on error.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := promtest.Binary(t, "promtool")
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestPrometheusConfig(t *testing.T) {
	out := promtool(t, "check", "config", "prometheus.yml")
	if !strings.Contains(out, "1 rule files found") {
		t.Errorf("prometheus.yml does not load alerts.yml:\n%s", out)
	}
	var cfg composetest.PromConfig
	if err := yaml.Unmarshal(deploy.PrometheusConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.RuleFiles, ",") != "alerts.yml" {
		t.Errorf("rule_files = %v, want [alerts.yml]", cfg.RuleFiles)
	}
	if nodes := cfg.Targets("snowflake"); strings.Join(nodes, ",") != "node1:8080,node2:8080,node3:8080" {
		t.Errorf("snowflake job targets = %v, want node1..node3:8080", nodes)
	}
}

func TestAlertRulesValid(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
}

func TestAlertRuleUnitTests(t *testing.T) {
	out := promtool(t, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
}

// TestEmbeddedFilesCurrent guards the embedded copies against a stale build.
func TestEmbeddedFilesCurrent(t *testing.T) {
	for name, data := range map[string][]byte{"prometheus.yml": deploy.PrometheusConfig, "alerts.yml": deploy.Alerts, "alerts_test.yml": deploy.AlertTests} {
		disk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(disk, data) {
			t.Errorf("embedded %s differs from the file", name)
		}
	}
}

type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertTested requires, for every alert, a test case where it
// fires and one where it stays quiet, and a severity label.
func TestEveryAlertTested(t *testing.T) {
	var r rules
	if err := yaml.Unmarshal(deploy.Alerts, &r); err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(deploy.AlertTests, &rt); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	want := map[string]bool{
		"SnowflakeClockRewind": true, "SnowflakeRefusal": true, "SnowflakeSequenceExhaustionSustained": true,
		"SnowflakeNTPOffsetHigh": true, "SnowflakeLeaseLost": true,
	}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			delete(want, rule.Alert)
			if !fires[rule.Alert] {
				t.Errorf("alert %s has no firing test case", rule.Alert)
			}
			if !quiet[rule.Alert] {
				t.Errorf("alert %s has no quiet test case", rule.Alert)
			}
			if s := rule.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s severity %q, want warning or critical", rule.Alert, s)
			}
		}
	}
	for name := range want {
		t.Errorf("required alert %s missing", name)
	}
}

var metricRef = regexp.MustCompile(`\b(snowflake|snowchaos)_[a-z_]+`)

// TestAlertsReadExportedMetrics checks every metric an alert reads is one
// telemetry or ntpcheck exports, so a renamed metric breaks this test and
// not silently the alert.
func TestAlertsReadExportedMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{})
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	reg.MustRegister(gc, lc, metrics.New())
	gc.MustNode("")
	lc.MustNode("")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{ntpcheck.MetricOffset: true, ntpcheck.MetricSanity: true}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	var r rules
	if err := yaml.Unmarshal(deploy.Alerts, &r); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			for _, m := range metricRef.FindAllString(rule.Expr, -1) {
				if !exported[m] {
					missing = append(missing, rule.Alert+": "+m)
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("alert reads a metric nothing exports: %s", m)
	}
}
