// Package fleet builds the Kubernetes objects of a snowchaos fleet from
// their API types: a StatefulSet of `snowchaos serve` nodes that lease
// their worker IDs from Postgres (or etcd), the lease store itself, the
// Services, a PodDisruptionBudget, a PodMonitor for the Prometheus
// Operator and the Grafana dashboards as a ConfigMap for Grafana's
// dashboard sidecar.
//
// Each node's pod name is its lease holder identity (POD_NAME from the
// downward API, which lease.DefaultHolder reads) and its StatefulSet
// ordinal is the worker ID it prefers (SNOWCHAOS_WORKER from the pod-index
// label, Kubernetes 1.28 or later): pod snowchaos-3 asks for worker 3 and
// is granted another free one if 3 is held. The checkpoint lives on a
// PersistentVolumeClaim, so it survives a pod kill; the root filesystem is
// read-only and everything runs as a non-root user.
//
// The committed manifests under deploy/kube/manifests are this package's
// output with the zero Config (and Store etcd); a test keeps them in sync.
package fleet

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	"github.com/snowchaos/snowchaos/dashboards"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubeyaml"
	"github.com/snowchaos/snowchaos/lease"
)

// Store is the lease store the fleet leases worker IDs from.
type Store string

// Lease stores.
const (
	StorePostgres Store = "postgres"
	StoreEtcd     Store = "etcd"
)

// Defaults of Config's zero fields.
const (
	DefaultNamespace = "snowchaos"
	DefaultName      = "snowchaos"
	DefaultImage     = "snowchaos:local"
	DefaultReplicas  = 3
	DefaultPolicy    = "wait"
	DefaultMaxWait   = time.Second
	DefaultStorage   = "64Mi"
	// MaxReplicas bounds Replicas: the default layout's node field holds
	// 1024 worker IDs, and ordinals are the preferred worker IDs.
	MaxReplicas = 1024
)

// Image references of the lease stores (the versions docker-compose.yml
// runs).
const (
	PostgresImage = "postgres:17.6-alpine"
	EtcdImage     = "quay.io/coreos/etcd:v3.6.0"
)

// Ports and paths the manifests wire up.
const (
	HTTPPort       = 8080
	PostgresPort   = 5432
	EtcdClientPort = 2379
	EtcdPeerPort   = 2380
	CheckpointDir  = "/var/lib/snowchaos"
	CheckpointFile = CheckpointDir + "/mark"
	// ContainerName is the name of the snowchaos container in every node
	// pod (and in clones): Chaos Mesh's container-kill names it.
	ContainerName = "snowchaos"
)

// Secrets the manifests refer to but do not contain: the operator creates
// them (docs/kubernetes.md), so no password is ever committed.
const (
	// PostgresSecret holds key "password": the Postgres superuser's
	// password, given to the nodes as PGPASSWORD (pgx reads it).
	PostgresSecret = "snowchaos-postgres"
	// AdminSecret optionally holds key "token": the nodes' admin API token.
	// Without it the nodes serve no admin API.
	AdminSecret = "snowchaos-admin"
)

// Labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	// LabelPodIndex is the StatefulSet ordinal label (Kubernetes 1.28+).
	LabelPodIndex = "apps.kubernetes.io/pod-index"
	// ComponentNode and ComponentStore are the component label values of
	// the generator nodes (clones included) and of the lease store.
	ComponentNode  = "node"
	ComponentStore = "lease-store"
	// GrafanaDashboardLabel is the label Grafana's dashboard sidecar
	// (grafana/helm-charts, kube-prometheus-stack) watches ConfigMaps for.
	GrafanaDashboardLabel = "grafana_dashboard"
	// GrafanaFolderAnnotation names the folder the sidecar files them in.
	GrafanaFolderAnnotation = "grafana_folder"
)

// Config describes a fleet. The zero value is a three-node fleet in
// namespace snowchaos leasing from Postgres, with the wait policy.
type Config struct {
	// Namespace holds every object; empty: DefaultNamespace.
	Namespace string
	// Name is the StatefulSet's name and the prefix of every other
	// object's; its pods are Name-0, Name-1, ...; empty: DefaultName.
	Name string
	// Image is the snowchaos image (the repository's Dockerfile); empty:
	// DefaultImage.
	Image string
	// Replicas is the number of nodes, at most MaxReplicas; zero:
	// DefaultReplicas.
	Replicas int32
	// Store is the lease store; empty: StorePostgres.
	Store Store
	// Policy is the rewind policy (wait, refuse, logical); empty:
	// DefaultPolicy.
	Policy string
	// MaxWait bounds one call's wait; zero: DefaultMaxWait.
	MaxWait time.Duration
	// LeaseTTL is the lease duration; zero: lease.DefaultTTL.
	LeaseTTL time.Duration
	// Storage is the size of each checkpoint volume; empty: DefaultStorage.
	Storage string
}

// WithDefaults returns c with every zero field set to its default, or an
// error naming a field out of range.
func (c Config) WithDefaults() (Config, error) {
	c.Namespace = cmp.Or(c.Namespace, DefaultNamespace)
	c.Name = cmp.Or(c.Name, DefaultName)
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.Store = cmp.Or(c.Store, StorePostgres)
	c.Policy = cmp.Or(c.Policy, DefaultPolicy)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, lease.DefaultTTL)
	c.Storage = cmp.Or(c.Storage, DefaultStorage)
	switch {
	case c.Replicas < 1 || c.Replicas > MaxReplicas:
		return c, fmt.Errorf("fleet: replicas %d is outside [1, %d]", c.Replicas, MaxReplicas)
	case c.Store != StorePostgres && c.Store != StoreEtcd:
		return c, fmt.Errorf("fleet: store %q: want postgres or etcd", c.Store)
	case c.Policy != "wait" && c.Policy != "refuse" && c.Policy != "logical":
		return c, fmt.Errorf("fleet: policy %q: want wait, refuse or logical", c.Policy)
	case c.MaxWait < 0 || c.MaxWait > time.Hour:
		return c, fmt.Errorf("fleet: max wait %s is outside [0, 1h]", c.MaxWait)
	case c.LeaseTTL < 200*time.Millisecond || c.LeaseTTL > time.Hour:
		return c, fmt.Errorf("fleet: lease TTL %s is outside [200ms, 1h]", c.LeaseTTL)
	case len(c.Name) > 40:
		return c, fmt.Errorf("fleet: name %q is longer than 40 characters (pod and Service names derive from it)", c.Name)
	}
	if _, err := resource.ParseQuantity(c.Storage); err != nil {
		return c, fmt.Errorf("fleet: storage %q: %v", c.Storage, err)
	}
	return c, nil
}

// HeadlessService is the name of the StatefulSet's governing Service, which
// gives every pod a stable DNS name.
func (c Config) HeadlessService() string { return c.Name + "-headless" }

// StoreName is the name of the lease store's StatefulSet and Service.
func (c Config) StoreName() string { return c.Name + "-" + string(c.Store) }

// PodName is the name of the node pod with the given ordinal.
func (c Config) PodName(ordinal int64) string { return c.Name + "-" + strconv.FormatInt(ordinal, 10) }

// PodURL is the base URL of a node pod inside the cluster, through the
// headless Service.
func (c Config) PodURL(ordinal int64) string {
	return fmt.Sprintf("http://%s.%s.%s.svc:%d", c.PodName(ordinal), c.HeadlessService(), c.Namespace, HTTPPort)
}

// NodeLabels are the labels of every generator pod: the StatefulSet's and
// clones alike. The Services, the PodDisruptionBudget and the PodMonitor
// select them.
func (c Config) NodeLabels() map[string]string {
	return map[string]string{LabelName: c.Name, LabelComponent: ComponentNode, LabelPartOf: c.Name}
}

// StoreLabels are the labels of the lease store's pods.
func (c Config) StoreLabels() map[string]string {
	return map[string]string{LabelName: c.StoreName(), LabelComponent: ComponentStore, LabelPartOf: c.Name}
}

// LeaseURL is the lease store's URL as the nodes' --lease takes it. The
// Postgres password comes from PGPASSWORD, never from the URL.
func (c Config) LeaseURL() string {
	host := fmt.Sprintf("%s.%s.svc", c.StoreName(), c.Namespace)
	if c.Store == StoreEtcd {
		return fmt.Sprintf("etcd://%s:%d", host, EtcdClientPort)
	}
	return fmt.Sprintf("postgres://snowchaos@%s:%d/snowchaos?sslmode=disable", host, PostgresPort)
}

// NodeContainer is the snowchaos serve container of a node pod: the
// StatefulSet's, and the template Chaos Mesh clones run with another
// worker or holder. Every setting is a SNOWCHAOS_* variable (the flag's
// environment form). The checkpoint volume must be mounted as "data".
func (c Config) NodeContainer() corev1.Container {
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "SNOWCHAOS_WORKER", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + LabelPodIndex + "']"}}},
		{Name: "SNOWCHAOS_LISTEN", Value: ":" + strconv.Itoa(HTTPPort)},
		{Name: "SNOWCHAOS_POLICY", Value: c.Policy},
		{Name: "SNOWCHAOS_MAX_WAIT", Value: c.MaxWait.String()},
		{Name: "SNOWCHAOS_CHECKPOINT", Value: CheckpointFile},
		{Name: "SNOWCHAOS_LEASE", Value: c.LeaseURL()},
		{Name: "SNOWCHAOS_LEASE_TTL", Value: c.LeaseTTL.String()},
	}
	if c.Store == StorePostgres {
		env = append(env, corev1.EnvVar{Name: "PGPASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: PostgresSecret}, Key: "password"}}})
	}
	env = append(env,
		corev1.EnvVar{Name: "SNOWCHAOS_ADMIN_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: AdminSecret}, Key: "token", Optional: ptr(true)}}},
		// The admin API shares the pod's listener, so it must be allowed
		// off loopback; without a token it is not served at all.
		corev1.EnvVar{Name: "SNOWCHAOS_ADMIN_ALLOW_REMOTE", Value: "true"},
	)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           c.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{"serve"},
		Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP}},
		Env:             env,
		// Acquiring the lease may take up to two TTLs plus the handoff
		// wait before the node listens: the startup probe allows for it.
		StartupProbe:   probe("/healthz", 2, int32(min(300, 2*c.LeaseTTL/(2*time.Second)+30))),
		ReadinessProbe: probe("/readyz", 2, 1),
		LivenessProbe:  probe("/healthz", 5, 3),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: CheckpointDir}},
		SecurityContext: restricted(),
	}
}

// restricted is the container security context of the "restricted" Pod
// Security Standard, with a read-only root filesystem.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// podSecurity is the pod security context for a user and group id: the
// volumes are group-owned by it.
func podSecurity(id int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(id), RunAsGroup: ptr(id), FSGroup: ptr(id),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// nonroot is the uid and gid of the snowchaos and etcd images' nonroot user.
const nonroot = 65532

// postgresUID is the uid and gid of the postgres user in the Alpine image.
const postgresUID = 70

// Objects returns every object of the fleet, in the order to apply them.
func Objects(c Config) ([]any, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	dash, err := dashboardConfigMap(c)
	if err != nil {
		return nil, err
	}
	objs := []any{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: c.Namespace, Labels: map[string]string{LabelPartOf: c.Name}}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: c.meta(c.Name, c.NodeLabels()), AutomountServiceAccountToken: ptr(false)},
	}
	objs = append(objs, c.storeObjects()...)
	objs = append(objs,
		c.service(c.HeadlessService(), c.NodeLabels(), HTTPPort, true),
		c.service(c.Name, c.NodeLabels(), HTTPPort, false),
		c.statefulSet(),
		&policyv1.PodDisruptionBudget{
			TypeMeta:   typeMeta("policy/v1", "PodDisruptionBudget"),
			ObjectMeta: c.meta(c.Name, c.NodeLabels()),
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptr(intstr.FromInt32(1)),
				Selector:       &metav1.LabelSelector{MatchLabels: c.NodeLabels()},
			},
		},
		&monv1.PodMonitor{
			TypeMeta:   typeMeta(monv1.SchemeGroupVersion.String(), monv1.PodMonitorsKind),
			ObjectMeta: c.meta(c.Name, c.NodeLabels()),
			Spec: monv1.PodMonitorSpec{
				Selector: metav1.LabelSelector{MatchLabels: c.NodeLabels()},
				PodMetricsEndpoints: []monv1.PodMetricsEndpoint{{
					Port: ptr("http"), Path: "/metrics", Interval: "5s", ScrapeTimeout: "4s",
				}},
			},
		},
		dash,
	)
	return objs, nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func (c Config) meta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: labels}
}

func (c Config) service(name string, selector map[string]string, port int32, headless bool) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: c.meta(name, selector),
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	if headless {
		// Per-pod DNS names for the harness, ready or not: a node that
		// refuses (not ready) must still be reachable to be measured.
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.PublishNotReadyAddresses = true
	}
	return s
}

func (c Config) statefulSet() *appsv1.StatefulSet {
	labels := c.NodeLabels()
	return &appsv1.StatefulSet{
		TypeMeta:   typeMeta("apps/v1", "StatefulSet"),
		ObjectMeta: c.meta(c.Name, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(c.Replicas),
			ServiceName: c.HeadlessService(),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			// Nodes do not depend on each other: start and replace them
			// all at once.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: labels,
					// For a Prometheus without the Operator (the common
					// kubernetes-pods scrape job).
					Annotations: map[string]string{
						"prometheus.io/scrape": "true",
						"prometheus.io/port":   strconv.Itoa(HTTPPort),
						"prometheus.io/path":   "/metrics",
					},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName:           c.Name,
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSecurity(nonroot),
					// serve's graceful shutdown (in-flight requests, the
					// final mark, the lease release) fits well inside it.
					TerminationGracePeriodSeconds: ptr(int64(30)),
					Containers:                    []corev1.Container{c.NodeContainer()},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{c.claim("data")},
		},
	}
}

func (c Config) claim(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		TypeMeta:   typeMeta("v1", "PersistentVolumeClaim"),
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(c.Storage)}},
		},
	}
}

// storeObjects are the lease store's Service and single-member StatefulSet.
func (c Config) storeObjects() []any {
	labels := c.StoreLabels()
	name := c.StoreName()
	var ctr corev1.Container
	var uid int64
	var port int32
	var extra []corev1.Volume
	switch c.Store {
	case StoreEtcd:
		uid, port = nonroot, EtcdClientPort
		peer := fmt.Sprintf("http://%s-0.%s.%s.svc:%d", name, name, c.Namespace, EtcdPeerPort)
		ctr = corev1.Container{
			Name:  "etcd",
			Image: EtcdImage,
			Command: []string{"etcd",
				"--name=" + name + "-0",
				"--data-dir=/var/lib/etcd/data",
				fmt.Sprintf("--listen-client-urls=http://0.0.0.0:%d", EtcdClientPort),
				fmt.Sprintf("--advertise-client-urls=http://%s.%s.svc:%d", name, c.Namespace, EtcdClientPort),
				fmt.Sprintf("--listen-peer-urls=http://0.0.0.0:%d", EtcdPeerPort),
				"--initial-advertise-peer-urls=" + peer,
				"--initial-cluster=" + name + "-0=" + peer,
			},
			Ports: []corev1.ContainerPort{
				{Name: "client", ContainerPort: EtcdClientPort, Protocol: corev1.ProtocolTCP},
				{Name: "peer", ContainerPort: EtcdPeerPort, Protocol: corev1.ProtocolTCP},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("client")}}, PeriodSeconds: 2, TimeoutSeconds: 2},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromString("client")}}, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 6},
			VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
		}
	default:
		uid, port = postgresUID, PostgresPort
		pgReady := []string{"pg_isready", "-U", "snowchaos", "-d", "snowchaos", "-h", "127.0.0.1"}
		ctr = corev1.Container{
			Name:  "postgres",
			Image: PostgresImage,
			Env: []corev1.EnvVar{
				{Name: "POSTGRES_USER", Value: "snowchaos"},
				{Name: "POSTGRES_DB", Value: "snowchaos"},
				{Name: "POSTGRES_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: PostgresSecret}, Key: "password"}}},
				{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
			},
			Ports:          []corev1.ContainerPort{{Name: "postgres", ContainerPort: PostgresPort, Protocol: corev1.ProtocolTCP}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: pgReady}}, PeriodSeconds: 2, TimeoutSeconds: 2},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: pgReady}}, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 6},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "data", MountPath: "/var/lib/postgresql/data"},
				{Name: "run", MountPath: "/var/run/postgresql"},
				{Name: "tmp", MountPath: "/tmp"},
			},
		}
		// The read-only root filesystem leaves Postgres its socket
		// directory and /tmp as memory-backed scratch space.
		extra = []corev1.Volume{
			{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
	}
	ctr.ImagePullPolicy = corev1.PullIfNotPresent
	ctr.SecurityContext = restricted()
	ctr.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	svc := c.service(name, labels, port, false)
	svc.Spec.Ports[0].Name = ctr.Ports[0].Name
	svc.Spec.Ports[0].TargetPort = intstr.FromString(ctr.Ports[0].Name)
	if c.Store == StoreEtcd {
		// The peer URL names the pod through this Service.
		svc.Spec.PublishNotReadyAddresses = true
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   typeMeta("apps/v1", "StatefulSet"),
		ObjectMeta: c.meta(name, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(1)),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSecurity(uid),
					Containers:                   []corev1.Container{ctr},
					Volumes:                      extra,
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{c.claim("data")},
		},
	}
	return []any{svc, sts}
}

// dashboardConfigMap holds every dashboard of package dashboards, labelled
// for Grafana's dashboard sidecar.
func dashboardConfigMap(c Config) (*corev1.ConfigMap, error) {
	files, err := dashboards.All()
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for _, f := range files {
		data[f.Name] = string(f.JSON)
	}
	m := c.meta(c.Name+"-dashboards", map[string]string{LabelPartOf: c.Name, GrafanaDashboardLabel: "1"})
	m.Annotations = map[string]string{GrafanaFolderAnnotation: "snowchaos"}
	return &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: m, Data: data}, nil
}

func ptr[T any](v T) *T { return &v }

// Write writes the fleet's objects as YAML documents, after a comment that
// says how they were made and which Secrets they expect.
func Write(w io.Writer, c Config) error {
	objs, err := Objects(c)
	if err != nil {
		return err
	}
	c, _ = c.WithDefaults()
	args := fmt.Sprintf("--namespace %s --name %s --image %s --replicas %d --store %s --policy %s --max-wait %s --lease-ttl %s --storage %s",
		c.Namespace, c.Name, c.Image, c.Replicas, c.Store, c.Policy, c.MaxWait, c.LeaseTTL, c.Storage)
	h := []string{
		"A snowchaos fleet: generated by `snowchaos-kube fleet " + args + "`",
		"(deploy/kube/fleet); do not edit, regenerate. See docs/kubernetes.md.",
		"",
		"Before applying, create the Secrets it refers to (no password is committed):",
	}
	if c.Store == StorePostgres {
		h = append(h, fmt.Sprintf("  kubectl -n %s create secret generic %s --from-literal=password=\"$(openssl rand -hex 16)\"", c.Namespace, PostgresSecret))
	}
	h = append(h, fmt.Sprintf("  optional, for the admin fault API: kubectl -n %s create secret generic %s --from-literal=token=\"$(openssl rand -hex 24)\"", c.Namespace, AdminSecret))
	return kubeyaml.Write(w, h, objs...)
}
