package fleet_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/snowchaos/snowchaos/deploy/kube/fleet"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/crdcheck"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubecheck"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubeyaml"
)

var update = flag.Bool("update", false, "rewrite the committed manifests")

// committed are the manifests under deploy/kube/manifests and the
// configurations they are generated from.
var committed = map[string]fleet.Config{
	"fleet-postgres.yaml": {},
	"fleet-etcd.yaml":     {Store: fleet.StoreEtcd},
}

func TestCommittedManifestsAreGenerated(t *testing.T) {
	for name, c := range committed {
		var buf bytes.Buffer
		if err := fleet.Write(&buf, c); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "manifests", name)
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		disk, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./fleet -update)", err)
		}
		if !bytes.Equal(disk, buf.Bytes()) {
			t.Errorf("%s differs from what package fleet generates: run `make kube-manifests` (go test ./fleet -update) and review the diff", path)
		}
	}
}

// decode reads one committed document into the typed object of its kind,
// rejecting unknown fields.
func decode(t *testing.T, doc []byte) any {
	t.Helper()
	tm, err := kubeyaml.Kind(doc)
	if err != nil {
		t.Fatal(err)
	}
	var obj any
	switch tm.Kind {
	case "Namespace":
		obj = &corev1.Namespace{}
	case "ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "Service":
		obj = &corev1.Service{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "PodMonitor":
		obj = &monv1.PodMonitor{}
	default:
		t.Fatalf("unexpected kind %s/%s", tm.APIVersion, tm.Kind)
	}
	if err := kubeyaml.DecodeStrict(doc, obj); err != nil {
		t.Fatalf("%s: %v", tm.Kind, err)
	}
	return obj
}

// TestManifestsRoundTrip reads every committed document back into its API
// type and compares it with the generated object, and checks the set.
func TestManifestsRoundTrip(t *testing.T) {
	for name, c := range committed {
		t.Run(name, func(t *testing.T) {
			disk, err := os.ReadFile(filepath.Join("..", "manifests", name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := fleet.Objects(c)
			if err != nil {
				t.Fatal(err)
			}
			docs := kubeyaml.Split(disk)
			if len(docs) != len(want) {
				t.Fatalf("%d documents, want %d", len(docs), len(want))
			}
			var got []any
			for i, d := range docs {
				obj := decode(t, d)
				if !equality.Semantic.DeepEqual(obj, want[i]) {
					t.Errorf("document %d (%T) does not round-trip", i, obj)
				}
				got = append(got, obj)
			}
			if err := kubecheck.Objects(got); err != nil {
				t.Errorf("the committed manifest does not validate:\n%v", err)
			}
			pm, err := crdcheck.Load(filepath.Join("..", "crd", "monitoring.coreos.com_podmonitors.yaml"), "v1")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, o := range got {
				if m, ok := o.(*monv1.PodMonitor); ok {
					n++
					if err := pm.Validate(m); err != nil {
						t.Errorf("against the PodMonitor CRD's schema: %v", err)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d PodMonitors, want 1", n)
			}
		})
	}
}

func TestConfigs(t *testing.T) {
	for _, c := range []fleet.Config{
		{}, {Store: fleet.StoreEtcd}, {Replicas: fleet.MaxReplicas, Policy: "logical", Namespace: "ids", Name: "gen"},
		{Replicas: 1, LeaseTTL: time.Second, MaxWait: 10 * time.Millisecond, Storage: "1Gi"},
	} {
		objs, err := fleet.Objects(c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if err := kubecheck.Objects(objs); err != nil {
			t.Errorf("%+v:\n%v", c, err)
		}
	}
	for _, c := range []fleet.Config{
		{Replicas: -1}, {Replicas: fleet.MaxReplicas + 1}, {Store: "zookeeper"}, {Policy: "hope"},
		{LeaseTTL: time.Millisecond}, {Storage: "lots"}, {Name: strings.Repeat("n", 41)},
	} {
		if _, err := fleet.Objects(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestKubecheckCatchesBreakage breaks the fleet in the ways manifests go
// wrong and expects each to be caught.
func TestKubecheckCatchesBreakage(t *testing.T) {
	breaks := map[string]func(objs []any){
		"selector mismatch": func(objs []any) {
			sts(objs).Spec.Template.Labels = map[string]string{"app": "other"}
		},
		"probe on an undeclared port": func(objs []any) {
			sts(objs).Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromString("web")
		},
		"mount of an undeclared volume": func(objs []any) {
			sts(objs).Spec.VolumeClaimTemplates[0].Name = "state"
		},
		"bad env name": func(objs []any) {
			c := &sts(objs).Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "1BAD", Value: "x"})
		},
		"unknown downward field": func(objs []any) {
			c := &sts(objs).Spec.Template.Spec.Containers[0]
			c.Env[0].ValueFrom.FieldRef.FieldPath = "metadata.ordinal"
		},
		"missing governing service": func(objs []any) { sts(objs).Spec.ServiceName = "nowhere" },
		"service on a port pods lack": func(objs []any) {
			for _, o := range objs {
				if s, ok := o.(*corev1.Service); ok {
					s.Spec.Ports[0].TargetPort = intstr.FromString("metrics")
				}
			}
		},
		"bad object name": func(objs []any) { sts(objs).Name = "Snow_Chaos" },
	}
	for name, br := range breaks {
		objs, err := fleet.Objects(fleet.Config{})
		if err != nil {
			t.Fatal(err)
		}
		br(objs)
		if err := kubecheck.Objects(objs); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}

func sts(objs []any) *appsv1.StatefulSet {
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == fleet.DefaultName {
			return s
		}
	}
	panic("no node StatefulSet")
}

// TestEnvNamesAreServeFlags checks every SNOWCHAOS_* variable of the node
// container against the flags cmd/snowchaos/cmd_serve*.go declare, so a
// renamed flag cannot leave the manifests setting a variable nobody reads.
func TestEnvNamesAreServeFlags(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "cmd", "snowchaos", "cmd_serve*.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\.\w+Var\(&f\.\w+, "([a-z-]+)"`).FindAllSubmatch(src, -1) {
			flags["SNOWCHAOS_"+strings.ToUpper(strings.ReplaceAll(string(m[1]), "-", "_"))] = true
		}
	}
	if len(flags) < 10 {
		t.Fatalf("found only %d serve flags in cmd/snowchaos/cmd_serve*.go: the pattern is stale", len(flags))
	}
	for _, store := range []fleet.Store{fleet.StorePostgres, fleet.StoreEtcd} {
		c, _ := fleet.Config{Store: store}.WithDefaults()
		var set []string
		for _, e := range c.NodeContainer().Env {
			if strings.HasPrefix(e.Name, "SNOWCHAOS_") {
				set = append(set, e.Name)
				if !flags[e.Name] {
					t.Errorf("%s sets %s, which is no serve flag", store, e.Name)
				}
			}
		}
		sort.Strings(set)
		if !reflect.DeepEqual(set, dedup(set)) {
			t.Errorf("%s: a variable is set twice: %v", store, set)
		}
	}
}

func dedup(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || ss[i-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func TestPodURL(t *testing.T) {
	c, _ := fleet.Config{}.WithDefaults()
	if got, want := c.PodURL(3), fmt.Sprintf("http://snowchaos-3.snowchaos-headless.snowchaos.svc:%d", fleet.HTTPPort); got != want {
		t.Errorf("PodURL(3) = %s, want %s", got, want)
	}
}
