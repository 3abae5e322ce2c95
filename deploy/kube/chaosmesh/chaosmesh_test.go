package chaosmesh_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cm "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snowchaos/snowchaos/deploy/kube/chaosmesh"
	"github.com/snowchaos/snowchaos/deploy/kube/fleet"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/crdcheck"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubecheck"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubeyaml"
	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

var update = flag.Bool("update", false, "rewrite the golden exports in testdata")

// TestEveryKindMappedOrExplained fails when a fault kind is added to the
// scenario vocabulary without a Chaos Mesh mapping or a stated reason.
func TestEveryKindMappedOrExplained(t *testing.T) {
	for _, k := range faults.Kinds(faults.InScenario) {
		s := mustParse(t, "kind.yaml", oneFault(k))
		ex, err := chaosmesh.New(s, chaosmesh.Options{})
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		var found bool
		for _, m := range ex.Mappings {
			if m.Kind != string(k) {
				continue
			}
			found = true
			switch {
			case m.Status == chaosmesh.Unmapped && (m.Reason == "" || m.Reason != chaosmesh.Unmappable[k]):
				t.Errorf("%s: unmapped without its reason: %+v", k, m)
			case m.Status != chaosmesh.Unmapped && chaosmesh.Unmappable[k] != "":
				t.Errorf("%s: mapped although Unmappable says %q", k, chaosmesh.Unmappable[k])
			case m.Status == chaosmesh.Mapped && len(m.Templates) == 0 && k != faults.KindRevert:
				// A revert with nothing mapped before it has nothing to end.
				t.Errorf("%s: mapped to no template", k)
			}
		}
		if !found {
			t.Errorf("%s: no mapping reported", k)
		}
	}
	for k := range chaosmesh.Unmappable {
		if !contains(faults.Kinds(faults.InScenario), k) {
			t.Errorf("Unmappable explains %q, which is no fault kind", k)
		}
	}
}

// oneFault is a small valid scenario with one fault of kind k.
func oneFault(k faults.Kind) string {
	params := map[faults.Kind]string{
		faults.KindStep: "by: -5ms", faults.KindFreeze: "for: 100ms", faults.KindSmear: "by: -1s, window: 2s",
		faults.KindSlew: "by: -1ms", faults.KindDrift: "ppm: 100", faults.KindPause: "for: 100ms",
		faults.KindStoreOutage: "for: 1s", faults.KindHandoff: "behind: 20ms, gap: 5ms", faults.KindRestart: "for: 10ms",
		faults.KindClone: "for: 1s", faults.KindStoreStep: "by: 1s", faults.KindStoreDrift: "ppm: 100", faults.KindStorePause: "for: 100ms",
	}
	p := ", nodes: [a]"
	if _, store := k.StoreClock(); store {
		p = "" // the store's clock: no nodes
	}
	if v := params[k]; v != "" {
		p += ", " + v
	}
	return `name: one
duration: 4s
nodes:
  - {name: a, worker: 1, lease: memory}
load: {rate: 100/s}
faults:
  - {at: 1s, kind: ` + string(k) + p + `}
invariants: [duplicates == 0]
`
}

func TestUnknownKindIsAnError(t *testing.T) {
	s := mustParse(t, "x.yaml", oneFault(faults.KindStep))
	s.Faults[0].Kind = "teleport"
	if _, err := chaosmesh.New(s, chaosmesh.Options{}); !errors.Is(err, chaosmesh.ErrNoMapping) {
		t.Fatalf("New with an unknown kind: %v, want ErrNoMapping", err)
	}
}

// suite is every built-in scenario, as `snowchaos run` and `make run-http`
// run them.
func suite(t *testing.T) []string {
	var files []string
	for _, pat := range []string{"*.yaml", "http/*.yaml", "peers/*.yaml", "multihost/*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "..", "scenarios", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d built-in scenarios", len(files))
	}
	return files
}

// published are the Chaos Mesh releases whose published Workflow CRD
// (deploy/kube/crd/published) every export must pass: the minimum
// version and the latest release.
var published = []string{"v" + chaosmesh.MinVersion, "v2.8.3"}

// workflowSchemas loads the Workflow CRD generated from the pinned API
// module and the published ones of the given releases.
func workflowSchemas(t *testing.T, releases ...string) map[string]*crdcheck.Schema {
	t.Helper()
	files := map[string]string{"generated": filepath.Join("..", "crd", "chaos-mesh.org_workflows.yaml")}
	for _, r := range releases {
		files[r] = filepath.Join("..", "crd", "published", "chaos-mesh-"+r, "chaos-mesh.org_workflows.yaml")
	}
	out := map[string]*crdcheck.Schema{}
	for name, f := range files {
		s, err := crdcheck.Load(f, "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s
	}
	return out
}

// TestSuiteExports exports every built-in scenario: each fault is mapped
// or named with a reason, the Workflow passes Chaos Mesh's own validation,
// the YAML reads back (strictly) into an equal Workflow, every clone's
// container passes the container checks, the Workflow validates against
// the CRD's OpenAPI schema (package crdcheck) as generated from the API
// module and as Chaos Mesh published it for MinVersion and the latest
// release, and the output matches the golden file in testdata.
func TestSuiteExports(t *testing.T) {
	schemas := workflowSchemas(t, published...)
	for _, file := range suite(t) {
		rel, _ := filepath.Rel(filepath.Join("..", "..", ".."), file)
		t.Run(rel, func(t *testing.T) {
			s, err := scenario.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s.File = filepath.ToSlash(rel)
			ex, err := chaosmesh.New(s, chaosmesh.Options{})
			if errors.Is(err, chaosmesh.ErrNoPod) {
				t.Skipf("not exportable to the fleet: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMappings(t, s, ex)
			var buf bytes.Buffer
			if err := ex.Write(&buf); err != nil {
				t.Fatal(err)
			}
			roundTrip(t, buf.Bytes(), ex.Workflow)
			for name, schema := range schemas {
				if err := schema.Validate(ex.Workflow); err != nil {
					t.Errorf("against the Workflow CRD's schema (%s): %v", name, err)
				}
			}
			for _, m := range ex.Incomplete() {
				if !strings.Contains(buf.String(), m.Fault) || !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(buf.String(), "#", "")), " "), m.Reason) {
					t.Errorf("the output does not name %s with its reason", m.Fault)
				}
			}
			golden(t, strings.ReplaceAll(strings.TrimSuffix(s.File, ".yaml"), "/", "_")+".yaml", buf.Bytes())
		})
	}
}

func checkMappings(t *testing.T, s *scenario.Scenario, ex *chaosmesh.Export) {
	t.Helper()
	byName := map[string]int{}
	for _, m := range ex.Mappings {
		byName[m.Fault]++
		if m.Status != chaosmesh.Mapped && m.Reason == "" {
			t.Errorf("%s is %s without a reason", m.Fault, m.Status)
		}
		if m.Status != chaosmesh.Unmapped && len(m.Templates) == 0 && m.Kind != string(faults.KindRevert) {
			t.Errorf("%s is %s to no template", m.Fault, m.Status)
		}
	}
	for _, f := range s.Faults {
		if byName[f.Name] != 1 {
			t.Errorf("fault %s has %d mappings, want 1", f.Name, byName[f.Name])
		}
	}
	templates := map[string]cm.Template{}
	for _, tp := range ex.Workflow.Spec.Templates {
		templates[tp.Name] = tp
		if tp.Task != nil {
			vols := map[string]bool{}
			for _, v := range tp.Task.Volumes {
				vols[v.Name] = true
			}
			if errs := kubecheck.Container(field.NewPath(tp.Name), tp.Task.Container, vols); len(errs) > 0 {
				t.Errorf("clone container: %v", errs.ToAggregate())
			}
		}
	}
	for _, m := range ex.Mappings {
		for _, n := range m.Templates {
			if _, ok := templates[n]; !ok {
				t.Errorf("%s names template %s, which the Workflow lacks", m.Fault, n)
			}
		}
	}
	for _, n := range s.Nodes {
		if int64(ex.Replicas) <= n.Worker {
			t.Errorf("replicas %d leave node %s (worker %d) without a pod", ex.Replicas, n.Name, n.Worker)
		}
	}
}

// roundTrip reads the Workflow document of out back, strictly, and
// compares it with want.
func roundTrip(t *testing.T, out []byte, want *cm.Workflow) {
	t.Helper()
	docs := kubeyaml.Split(out)
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	var got cm.Workflow
	if err := kubeyaml.DecodeStrict(docs[0], &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("the Workflow does not round-trip through YAML")
	}
	if err := chaosmesh.Validate(&got); err != nil {
		t.Error(err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./chaosmesh -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("export differs from %s: run go test ./chaosmesh -update and review the diff", path)
	}
}

// TestTiming checks offsets, deadlines and stacking on a scenario whose
// clock history is known: +300ms at 1s, -300ms at 2s, a leap at 3s, all
// reverted at 5s, in a 6 s run.
func TestTiming(t *testing.T) {
	s := mustParse(t, "t.yaml", `name: timing
duration: 6s
nodes:
  - {name: a, worker: 1}
  - {name: b, worker: 4}
load: {rate: 100/s}
faults:
  - {name: fwd, at: 1s, kind: step, by: 300ms, nodes: [a]}
  - {name: back, at: 2s, kind: step, by: -300ms, nodes: [a]}
  - {name: leap, at: 3s, kind: leap, nodes: all}
  - {name: undo, at: 5s, kind: revert, nodes: [a]}
  - {name: kill, at: 4s, kind: restart, nodes: [b]}
invariants: [duplicates == 0]
`)
	ex, err := chaosmesh.New(s, chaosmesh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Replicas != 5 || ex.Pods["b"] != "snowchaos-4" {
		t.Errorf("replicas %d, pods %v", ex.Replicas, ex.Pods)
	}
	tm := map[string]cm.Template{}
	for _, tp := range ex.Workflow.Spec.Templates {
		tm[tp.Name] = tp
	}
	type want struct {
		offset, deadline, wait string
		pods                   []string
	}
	for name, w := range map[string]want{
		"fwd":    {"300ms", "4s", "1s", []string{"snowchaos-1"}},
		"back":   {"-300ms", "3s", "2s", []string{"snowchaos-1"}},
		"leap":   {"-1s", "2s", "3s", []string{"snowchaos-1"}}, // a is reverted at 5s
		"leap-2": {"-1s", "3s", "3s", []string{"snowchaos-4"}}, // b until the end
	} {
		tp, ok := tm[name]
		if !ok || tp.TimeChaos == nil {
			t.Errorf("no TimeChaos %s", name)
			continue
		}
		if tp.TimeChaos.TimeOffset != w.offset || *tp.Deadline != w.deadline ||
			strings.Join(tp.TimeChaos.Selector.Pods["snowchaos"], ",") != strings.Join(w.pods, ",") ||
			strings.Join(tp.TimeChaos.ClockIds, ",") != "CLOCK_REALTIME" {
			t.Errorf("%s: offset %s deadline %s pods %v clocks %v, want %+v", name, tp.TimeChaos.TimeOffset, *tp.Deadline,
				tp.TimeChaos.Selector.Pods, tp.TimeChaos.ClockIds, w)
		}
		branch := tm[strings.TrimSuffix(name, "-2")+"-at"]
		if name == "leap-2" {
			branch = tm["leap-at-2"]
		}
		if len(branch.Children) != 2 || *tm[branch.Children[0]].Deadline != w.wait || branch.Children[1] != name {
			t.Errorf("%s: branch %+v does not wait %s first", name, branch, w.wait)
		}
	}
	kill := tm["kill"]
	if kill.PodChaos == nil || kill.PodChaos.Action != cm.PodKillAction || kill.PodChaos.GracePeriod != 0 {
		t.Errorf("restart: %+v", kill)
	}
	if *tm["entry"].Deadline != (6*time.Second + chaosmesh.OneShotDeadline).String() {
		t.Errorf("entry deadline %s", *tm["entry"].Deadline)
	}
}

// TestValidateCatchesBadWorkflows breaks an exported Workflow the ways a
// hand edit would and expects Chaos Mesh's validation to refuse each.
func TestValidateCatchesBadWorkflows(t *testing.T) {
	breaks := map[string]func(wf *cm.Workflow){
		"missing child": func(wf *cm.Workflow) {
			wf.Spec.Templates[0].Children = append(wf.Spec.Templates[0].Children, "nowhere")
		},
		"bad time offset":     func(wf *cm.Workflow) { timeChaos(wf).TimeChaos.TimeOffset = "five minutes" },
		"suspend no deadline": func(wf *cm.Workflow) { suspend(wf).Deadline = nil },
		"duration in chaos":   func(wf *cm.Workflow) { d := "1s"; timeChaos(wf).TimeChaos.Duration = &d },
		"bad mode value": func(wf *cm.Workflow) {
			timeChaos(wf).TimeChaos.Mode = cm.FixedPercentMode
			timeChaos(wf).TimeChaos.Value = "250"
		},
		"duplicate name": func(wf *cm.Workflow) { suspend(wf).Name = wf.Spec.Templates[0].Name },
		"bad name":       func(wf *cm.Workflow) { wf.Name = "Snow_Chaos" },
		"no entry":       func(wf *cm.Workflow) { wf.Spec.Entry = "start" },
	}
	s := mustParse(t, "b.yaml", oneFault(faults.KindStep))
	for name, br := range breaks {
		ex, err := chaosmesh.New(s, chaosmesh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		br(ex.Workflow)
		if err := chaosmesh.Validate(ex.Workflow); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}

func timeChaos(wf *cm.Workflow) *cm.Template {
	for i := range wf.Spec.Templates {
		if wf.Spec.Templates[i].Type == cm.TypeTimeChaos {
			return &wf.Spec.Templates[i]
		}
	}
	panic("no TimeChaos")
}

func suspend(wf *cm.Workflow) *cm.Template {
	for i := range wf.Spec.Templates {
		if wf.Spec.Templates[i].Type == cm.TypeSuspend {
			return &wf.Spec.Templates[i]
		}
	}
	panic("no Suspend")
}

func TestCloneAndOutage(t *testing.T) {
	s := mustParse(t, "c.yaml", `name: clones
duration: 10s
nodes:
  - {name: a, worker: 1, lease: memory, lease_ttl: 2s}
  - {name: b, worker: 2, lease: memory, lease_ttl: 2s}
load: {rate: 100/s}
faults:
  - {name: copy, at: 1s, kind: clone, for: 2s, same_holder: on, nodes: [a]}
  - {name: forever, at: 3s, kind: clone, nodes: [b]}
  - {name: down, at: 4s, kind: store_outage, for: 2s}
  - {name: cut, at: 7s, kind: store_outage, for: 2s, nodes: [a]}
invariants: [duplicates == 0]
`)
	ex, err := chaosmesh.New(s, chaosmesh.Options{Fleet: fleet.Config{Store: fleet.StoreEtcd, Namespace: "ids"}})
	if err != nil {
		t.Fatal(err)
	}
	tm := map[string]cm.Template{}
	for _, tp := range ex.Workflow.Spec.Templates {
		tm[tp.Name] = tp
	}
	env := func(tp cm.Template, name string) string {
		for _, e := range tp.Task.Container.Env {
			if e.Name == name {
				if e.ValueFrom != nil {
					return "from:" + e.ValueFrom.FieldRef.FieldPath
				}
				return e.Value
			}
		}
		return ""
	}
	copyA := tm["copy-a"]
	if copyA.Task == nil || env(copyA, "SNOWCHAOS_WORKER") != "1" || env(copyA, "POD_NAME") != "snowchaos-1" ||
		copyA.Task.Labels[chaosmesh.CloneLabel] != "copy-a" || copyA.Task.Labels[fleet.LabelComponent] != fleet.ComponentNode {
		t.Errorf("same-holder clone: %+v", copyA.Task)
	}
	if f := tm["forever-b"]; f.Task == nil || env(f, "POD_NAME") != "from:metadata.name" || env(f, "SNOWCHAOS_WORKER") != "2" {
		t.Errorf("own-holder clone: %+v", f.Task)
	}
	end := tm["copy-a-end"]
	if end.PodChaos == nil || end.PodChaos.Action != cm.ContainerKillAction || end.PodChaos.Selector.LabelSelectors[chaosmesh.CloneLabel] != "copy-a" ||
		*tm[tm["copy-a-end-at"].Children[0]].Deadline != "3s" {
		t.Errorf("clone end: %+v", end)
	}
	if e := tm["forever-b-end-at"]; *tm[e.Children[0]].Deadline != "10s" {
		t.Errorf("a clone without for ends at the end of the run: %+v", e)
	}
	down := tm["down"]
	if down.PodChaos == nil || down.PodChaos.Action != cm.PodFailureAction || down.PodChaos.Selector.LabelSelectors[fleet.LabelComponent] != fleet.ComponentStore ||
		*down.Deadline != "2s" || down.PodChaos.Selector.Namespaces[0] != "ids" {
		t.Errorf("whole-store outage: %+v", down)
	}
	cut := tm["cut"]
	if cut.NetworkChaos == nil || cut.NetworkChaos.Action != cm.PartitionAction || cut.NetworkChaos.Direction != cm.Both ||
		cut.NetworkChaos.Target.Selector.LabelSelectors[fleet.LabelName] != "snowchaos-etcd" ||
		strings.Join(cut.NetworkChaos.Selector.Pods["ids"], ",") != "snowchaos-1" {
		t.Errorf("partition: %+v", cut.NetworkChaos)
	}
}

func mustParse(t *testing.T, file, src string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func contains[T comparable](xs []T, x T) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestMinimumVersion: a clone's Task labels are what Chaos Mesh 2.7.3's
// published CRD prunes silently (the clone pod would start unlabelled and
// the container-kill ending it would select nothing); validation against
// it fails naming the field, against MinVersion's and the latest it
// passes, and the output states the minimum version.
func TestMinimumVersion(t *testing.T) {
	schemas := workflowSchemas(t, append([]string{"v2.7.3"}, published...)...)
	s := mustParse(t, "clone.yaml", oneFault(faults.KindClone))
	ex, err := chaosmesh.New(s, chaosmesh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = schemas["v2.7.3"].Validate(ex.Workflow)
	if err == nil || !strings.Contains(err.Error(), "unknown fields") || !strings.Contains(err.Error(), "task.labels") {
		t.Errorf("against 2.7.3's CRD: %v, want the Task labels named as fields it would drop", err)
	}
	for _, name := range append([]string{"generated"}, published...) {
		if err := schemas[name].Validate(ex.Workflow); err != nil {
			t.Errorf("against %s: %v", name, err)
		}
	}
	var buf bytes.Buffer
	if err := ex.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if want := "# Needs Chaos Mesh " + chaosmesh.MinVersion + " or later"; !strings.Contains(buf.String(), want) {
		t.Errorf("the output does not say %q", want)
	}
}

// TestPartitionDirection: a one-way partition keeps its direction
// (outbound: NetworkChaos "to" the store; inbound: "from" it), and a
// partition is reported mapped only when the scenario means what Chaos
// Mesh does: packets dropped silently (hang: on), on pods that exist when
// it is injected.
func TestPartitionDirection(t *testing.T) {
	for _, tc := range []struct {
		fault  string
		dir    cm.Direction
		status chaosmesh.Status
		reason string
	}{
		{"direction: outbound, hang: on", cm.To, chaosmesh.Mapped, ""},
		{"direction: inbound, hang: on", cm.From, chaosmesh.Mapped, ""},
		{"direction: both, hang: on", cm.Both, chaosmesh.Mapped, ""},
		{"hang: on", cm.Both, chaosmesh.Mapped, ""},
		{"direction: outbound", cm.To, chaosmesh.Partial, "calls fail at once"},
		{"direction: inbound", cm.From, chaosmesh.Partial, "calls fail at once"},
	} {
		s := mustParse(t, "p.yaml", `name: p
duration: 10s
nodes:
  - {name: a, worker: 1, lease: memory}
  - {name: b, worker: 2, lease: memory}
load: {rate: 100/s}
faults:
  - {name: cut, at: 1s, kind: store_outage, for: 3s, nodes: [a], `+tc.fault+`}
invariants: [duplicates == 0]
`)
		ex, err := chaosmesh.New(s, chaosmesh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		nc := template(ex.Workflow, "cut").NetworkChaos
		if nc == nil || nc.Action != cm.PartitionAction || nc.Direction != tc.dir || nc.Target == nil ||
			strings.Join(nc.Selector.Pods["snowchaos"], ",") != "snowchaos-1" {
			t.Errorf("%s: %+v, want a partition of snowchaos-1, direction %s", tc.fault, nc, tc.dir)
			continue
		}
		m := ex.Mappings[0]
		if m.Status != tc.status || !strings.Contains(m.Reason, tc.reason) || !strings.Contains(m.Note, "direction "+string(tc.dir)) {
			t.Errorf("%s: %s (%s; %s), want %s", tc.fault, m.Status, m.Reason, m.Note, tc.status)
		}
	}
}

// TestOutageMissesNewPods: Chaos Mesh selects pods when it injects, so a
// pod recreated by a restart, or a clone started, during a partition is
// not cut: the fault is partial, naming them. A whole-store outage whose
// calls hang is a partition of every node pod, not a pod-failure (which
// fails calls at once).
func TestOutageMissesNewPods(t *testing.T) {
	s := mustParse(t, "n.yaml", `name: n
duration: 20s
nodes:
  - {name: a, worker: 1, lease: memory}
  - {name: b, worker: 2, lease: memory}
load: {rate: 100/s}
faults:
  - {name: cut, at: 1s, kind: store_outage, for: 3s, nodes: [a], hang: on}
  - {name: kill-a, at: 2s, kind: restart, nodes: [a]}
  - {name: kill-b, at: 3s, kind: restart, nodes: [b]}
  - {name: hung, at: 6s, kind: store_outage, for: 3s, hang: on}
  - {name: copy, at: 7s, kind: clone, for: 1s, nodes: [b]}
  - {name: quiet, at: 12s, kind: store_outage, for: 3s, hang: on}
invariants: [duplicates == 0]
`)
	ex, err := chaosmesh.New(s, chaosmesh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]chaosmesh.Mapping{}
	for _, m := range ex.Mappings {
		byName[m.Fault] = m
	}
	if m := byName["cut"]; m.Status != chaosmesh.Partial || !strings.Contains(m.Reason, "restart kill-a") || strings.Contains(m.Reason, "kill-b") {
		t.Errorf("cut: %s %q, want partial naming kill-a (a's pod) only", m.Status, m.Reason)
	}
	if m := byName["hung"]; m.Status != chaosmesh.Partial || !strings.Contains(m.Reason, "clone copy") {
		t.Errorf("hung: %s %q, want partial naming the clone", m.Status, m.Reason)
	}
	if m := byName["quiet"]; m.Status != chaosmesh.Mapped {
		t.Errorf("quiet: %s %q, want mapped", m.Status, m.Reason)
	}
	nc := template(ex.Workflow, "quiet").NetworkChaos
	if nc == nil || nc.Direction != cm.Both || nc.Selector.LabelSelectors[fleet.LabelComponent] != fleet.ComponentNode ||
		nc.Target.Selector.LabelSelectors[fleet.LabelComponent] != fleet.ComponentStore {
		t.Errorf("a hanging whole-store outage: %+v, want a partition between node pods and the store", nc)
	}
}

func template(wf *cm.Workflow, name string) cm.Template {
	for _, tp := range wf.Spec.Templates {
		if tp.Name == name {
			return tp
		}
	}
	return cm.Template{}
}
