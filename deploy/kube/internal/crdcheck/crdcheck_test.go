package crdcheck_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/deploy/kube/internal/crdcheck"
)

// workflow is a valid Workflow as a generic object, for breaking.
func workflow() map[string]any {
	return map[string]any{
		"apiVersion": "chaos-mesh.org/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": "w", "namespace": "snowchaos"},
		"spec": map[string]any{
			"entry": "entry",
			"templates": []any{
				map[string]any{"name": "entry", "templateType": "Serial", "children": []any{"step"}},
				map[string]any{"name": "step", "templateType": "TimeChaos", "deadline": "1s", "timeChaos": map[string]any{
					"mode": "all", "selector": map[string]any{"namespaces": []any{"snowchaos"}}, "timeOffset": "-5ms",
					"clockIds": []any{"CLOCK_REALTIME"},
				}},
			},
		},
	}
}

func chaos(w map[string]any) map[string]any {
	return w["spec"].(map[string]any)["templates"].([]any)[1].(map[string]any)["timeChaos"].(map[string]any)
}

// TestCatchesWhatTheServerWould breaks a Workflow and a PodMonitor the
// ways the generated schemas must refuse.
func TestCatchesWhatTheServerWould(t *testing.T) {
	wf, err := crdcheck.Load(filepath.Join("..", "..", "crd", "chaos-mesh.org_workflows.yaml"), "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if err := wf.Validate(workflow()); err != nil {
		t.Fatalf("the valid Workflow: %v", err)
	}
	for name, c := range map[string]struct {
		br   func(w map[string]any)
		want string
	}{
		"misspelt field":    {func(w map[string]any) { chaos(w)["timeOfset"] = "1s" }, "unknown fields"},
		"bad selector mode": {func(w map[string]any) { chaos(w)["mode"] = "most" }, "mode"},
		"missing offset":    {func(w map[string]any) { delete(chaos(w), "timeOffset") }, "timeOffset"},
		"wrong type":        {func(w map[string]any) { chaos(w)["clockIds"] = "CLOCK_REALTIME" }, "clockIds"},
		"missing entry":     {func(w map[string]any) { delete(w["spec"].(map[string]any), "entry") }, "entry"},
		"wrong kind":        {func(w map[string]any) { w["kind"] = "Schedule" }, "is not a"},
	} {
		w := workflow()
		c.br(w)
		err := wf.Validate(w)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, c.want)
		}
	}

	pm, err := crdcheck.Load(filepath.Join("..", "..", "crd", "monitoring.coreos.com_podmonitors.yaml"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	mon := func() map[string]any {
		return map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
			"metadata": map[string]any{"name": "m", "namespace": "snowchaos"},
			"spec": map[string]any{
				"selector":            map[string]any{"matchLabels": map[string]any{"a": "b"}},
				"podMetricsEndpoints": []any{map[string]any{"port": "http", "interval": "5s"}},
			},
		}
	}
	if err := pm.Validate(mon()); err != nil {
		t.Fatalf("the valid PodMonitor: %v", err)
	}
	bad := mon()
	bad["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)["interval"] = "5 seconds"
	if err := pm.Validate(bad); err == nil || !strings.Contains(err.Error(), "interval") {
		t.Errorf("a malformed interval: %v", err)
	}
	if _, err := crdcheck.Load(filepath.Join("..", "..", "crd", "chaos-mesh.org_workflows.yaml"), "v9"); err == nil {
		t.Error("Load of a version the CRD does not serve: no error")
	}
}
