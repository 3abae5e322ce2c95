// Package kubecheck checks built-in Kubernetes objects offline, with
// apimachinery's own validation functions where they exist.
//
// The API server's full validation of pods and workloads lives in
// k8s.io/kubernetes/pkg/apis/core/validation, which is not importable as a
// library; this package checks what a manifest most often gets wrong, as
// the API server would: object metadata (apimachinery's
// ValidateObjectMeta), names, label selectors and labels (metav1
// validation), ports, environment variable names, probes with exactly one
// handler and a port the container declares, volume mounts of declared
// volumes, and the references between objects: a StatefulSet's selector
// matches its template and its Service exists, a Service, PDB or
// PodMonitor selects some pod template of the set and names ports those
// pods declare.
package kubecheck

import (
	"fmt"
	"strings"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxConfigMapBytes is the API server's limit on a ConfigMap's data.
const maxConfigMapBytes = 1 << 20

// Objects checks every object and the references between them; the error
// lists every problem found, or is nil.
func Objects(objs []any) error {
	var errs field.ErrorList
	var pods []corev1.PodTemplateSpec
	services := map[string]bool{}
	for _, o := range objs {
		switch x := o.(type) {
		case *appsv1.StatefulSet:
			pods = append(pods, x.Spec.Template)
		case *corev1.Service:
			services[x.Namespace+"/"+x.Name] = true
		}
	}
	for i, o := range objs {
		p := field.NewPath(fmt.Sprintf("objects[%d]", i))
		switch x := o.(type) {
		case *corev1.Namespace:
			errs = append(errs, apivalidation.ValidateObjectMeta(&x.ObjectMeta, false, apivalidation.ValidateNamespaceName, p.Child("metadata"))...)
		case *corev1.ServiceAccount:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
		case *corev1.ConfigMap:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
			size := 0
			for k, v := range x.Data {
				for _, e := range validation.IsConfigMapKey(k) {
					errs = append(errs, field.Invalid(p.Child("data").Key(k), k, e))
				}
				size += len(k) + len(v)
			}
			if size > maxConfigMapBytes {
				errs = append(errs, field.TooLong(p.Child("data"), "", maxConfigMapBytes))
			}
		case *corev1.Service:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
			errs = append(errs, metavalidation.ValidateLabels(x.Spec.Selector, p.Child("spec", "selector"))...)
			sel := labels.SelectorFromSet(x.Spec.Selector)
			matched := selected(sel, pods)
			if len(matched) == 0 {
				errs = append(errs, field.Invalid(p.Child("spec", "selector"), x.Spec.Selector, "selects no pod template"))
			}
			for j, sp := range x.Spec.Ports {
				pp := p.Child("spec", "ports").Index(j)
				errs = append(errs, port(pp.Child("port"), sp.Port)...)
				errs = append(errs, targetPort(pp.Child("targetPort"), sp.TargetPort, matched)...)
			}
		case *appsv1.StatefulSet:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
			sp := p.Child("spec")
			if x.Spec.Replicas == nil || *x.Spec.Replicas < 0 {
				errs = append(errs, field.Invalid(sp.Child("replicas"), x.Spec.Replicas, "must be set and not negative"))
			}
			if !services[x.Namespace+"/"+x.Spec.ServiceName] {
				errs = append(errs, field.NotFound(sp.Child("serviceName"), x.Spec.ServiceName))
			}
			errs = append(errs, selector(sp.Child("selector"), x.Spec.Selector, []corev1.PodTemplateSpec{x.Spec.Template}, true)...)
			var claims []string
			for j, c := range x.Spec.VolumeClaimTemplates {
				for _, e := range validation.IsDNS1123Label(c.Name) {
					errs = append(errs, field.Invalid(sp.Child("volumeClaimTemplates").Index(j).Child("metadata", "name"), c.Name, e))
				}
				if len(c.Spec.AccessModes) == 0 || c.Spec.Resources.Requests.Storage().IsZero() {
					errs = append(errs, field.Required(sp.Child("volumeClaimTemplates").Index(j).Child("spec"), "access modes and a storage request"))
				}
				claims = append(claims, c.Name)
			}
			errs = append(errs, PodSpec(sp.Child("template", "spec"), &x.Spec.Template.Spec, claims)...)
			errs = append(errs, metavalidation.ValidateLabels(x.Spec.Template.Labels, sp.Child("template", "metadata", "labels"))...)
		case *policyv1.PodDisruptionBudget:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
			errs = append(errs, selector(p.Child("spec", "selector"), x.Spec.Selector, pods, false)...)
			if (x.Spec.MinAvailable == nil) == (x.Spec.MaxUnavailable == nil) {
				errs = append(errs, field.Invalid(p.Child("spec"), "", "set exactly one of minAvailable and maxUnavailable"))
			}
		case *monv1.PodMonitor:
			errs = append(errs, meta(&x.ObjectMeta, p)...)
			sel := x.Spec.Selector
			errs = append(errs, selector(p.Child("spec", "selector"), &sel, pods, false)...)
			s, _ := metav1.LabelSelectorAsSelector(&sel)
			matched := selected(s, pods)
			for j, ep := range x.Spec.PodMetricsEndpoints {
				if ep.Port == nil {
					errs = append(errs, field.Required(p.Child("spec", "podMetricsEndpoints").Index(j).Child("port"), "a named port"))
					continue
				}
				errs = append(errs, targetPort(p.Child("spec", "podMetricsEndpoints").Index(j).Child("port"), intstr.FromString(*ep.Port), matched)...)
			}
		default:
			errs = append(errs, field.NotSupported[string](p, fmt.Sprintf("%T", o), nil))
		}
	}
	return errs.ToAggregate()
}

func meta(m *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, true, apivalidation.NameIsDNSSubdomain, p.Child("metadata"))
}

// selector checks a label selector and, when want, that it matches every
// template, else that it matches at least one.
func selector(p *field.Path, ls *metav1.LabelSelector, templates []corev1.PodTemplateSpec, every bool) field.ErrorList {
	if ls == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	errs := metavalidation.ValidateLabelSelector(ls, metavalidation.LabelSelectorValidationOptions{}, p)
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return append(errs, field.Invalid(p, ls, err.Error()))
	}
	if s.Empty() {
		errs = append(errs, field.Invalid(p, ls, "empty selector selects everything"))
	}
	n := len(selected(s, templates))
	if every && n != len(templates) || n == 0 {
		errs = append(errs, field.Invalid(p, ls, "does not match the pod template labels"))
	}
	return errs
}

func selected(s labels.Selector, templates []corev1.PodTemplateSpec) []corev1.PodTemplateSpec {
	var out []corev1.PodTemplateSpec
	for _, t := range templates {
		if s.Matches(labels.Set(t.Labels)) {
			out = append(out, t)
		}
	}
	return out
}

// targetPort checks that a named port is declared by a container of every
// matched template (a numbered one must be a valid port).
func targetPort(p *field.Path, tp intstr.IntOrString, templates []corev1.PodTemplateSpec) field.ErrorList {
	if tp.Type == intstr.Int {
		return port(p, tp.IntVal)
	}
	for _, t := range templates {
		if !declares(t.Spec.Containers, tp.StrVal) {
			return field.ErrorList{field.NotFound(p, tp.StrVal)}
		}
	}
	return nil
}

func declares(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return true
			}
		}
	}
	return false
}

func port(p *field.Path, n int32) field.ErrorList {
	var errs field.ErrorList
	for _, e := range validation.IsValidPortNum(int(n)) {
		errs = append(errs, field.Invalid(p, n, e))
	}
	return errs
}

// PodSpec checks a pod spec's containers and volumes; claims are the
// names of volume claim templates its containers may mount too.
func PodSpec(p *field.Path, spec *corev1.PodSpec, claims []string) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	vols := map[string]bool{}
	for _, c := range claims {
		vols[c] = true
	}
	for i, v := range spec.Volumes {
		for _, e := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(p.Child("volumes").Index(i).Child("name"), v.Name, e))
		}
		if vols[v.Name] {
			errs = append(errs, field.Duplicate(p.Child("volumes").Index(i).Child("name"), v.Name))
		}
		vols[v.Name] = true
	}
	names := map[string]bool{}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if names[c.Name] {
			errs = append(errs, field.Duplicate(p.Child("containers").Index(i).Child("name"), c.Name))
		}
		names[c.Name] = true
		errs = append(errs, Container(p.Child("containers").Index(i), c, vols)...)
	}
	return errs
}

// Container checks one container; volumes are the names it may mount.
func Container(p *field.Path, c *corev1.Container, volumes map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for _, e := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, e))
	}
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	ports := map[string]bool{}
	for i, cp := range c.Ports {
		errs = append(errs, port(p.Child("ports").Index(i).Child("containerPort"), cp.ContainerPort)...)
		if cp.Name != "" {
			for _, e := range validation.IsValidPortName(cp.Name) {
				errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("name"), cp.Name, e))
			}
			ports[cp.Name] = true
		}
	}
	seen := map[string]bool{}
	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		for _, m := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, m))
		}
		if seen[e.Name] {
			errs = append(errs, field.Duplicate(ep.Child("name"), e.Name))
		}
		seen[e.Name] = true
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep, e.Name, "value and valueFrom are exclusive"))
		}
		if f := e.ValueFrom; f != nil {
			n := 0
			if f.FieldRef != nil {
				n++
				if !validFieldPath(f.FieldRef.FieldPath) {
					errs = append(errs, field.NotSupported[string](ep.Child("valueFrom", "fieldRef", "fieldPath"), f.FieldRef.FieldPath, nil))
				}
			}
			if f.SecretKeyRef != nil {
				n++
				for _, m := range validation.IsDNS1123Subdomain(f.SecretKeyRef.Name) {
					errs = append(errs, field.Invalid(ep.Child("valueFrom", "secretKeyRef", "name"), f.SecretKeyRef.Name, m))
				}
				for _, m := range validation.IsConfigMapKey(f.SecretKeyRef.Key) {
					errs = append(errs, field.Invalid(ep.Child("valueFrom", "secretKeyRef", "key"), f.SecretKeyRef.Key, m))
				}
			}
			if f.ConfigMapKeyRef != nil || f.ResourceFieldRef != nil || f.FileKeyRef != nil {
				n++
			}
			if n != 1 {
				errs = append(errs, field.Invalid(ep.Child("valueFrom"), e.Name, "exactly one source"))
			}
		}
	}
	for name, pr := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if pr == nil {
			continue
		}
		pp := p.Child(name)
		h := pr.ProbeHandler
		n := 0
		if h.HTTPGet != nil {
			n++
			if h.HTTPGet.Port.Type == intstr.String && !ports[h.HTTPGet.Port.StrVal] {
				errs = append(errs, field.NotFound(pp.Child("httpGet", "port"), h.HTTPGet.Port.StrVal))
			}
			if !strings.HasPrefix(h.HTTPGet.Path, "/") {
				errs = append(errs, field.Invalid(pp.Child("httpGet", "path"), h.HTTPGet.Path, "must start with /"))
			}
		}
		if h.Exec != nil {
			n++
			if len(h.Exec.Command) == 0 {
				errs = append(errs, field.Required(pp.Child("exec", "command"), ""))
			}
		}
		if h.TCPSocket != nil || h.GRPC != nil {
			n++
		}
		if n != 1 {
			errs = append(errs, field.Invalid(pp, "", "exactly one handler"))
		}
		if pr.PeriodSeconds < 0 || pr.TimeoutSeconds < 0 || pr.FailureThreshold < 0 {
			errs = append(errs, field.Invalid(pp, "", "negative timing"))
		}
	}
	for i, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			errs = append(errs, field.NotFound(p.Child("volumeMounts").Index(i).Child("name"), m.Name))
		}
		if !strings.HasPrefix(m.MountPath, "/") {
			errs = append(errs, field.Invalid(p.Child("volumeMounts").Index(i).Child("mountPath"), m.MountPath, "must be absolute"))
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Forbidden(p.Child("securityContext", "privileged"), "snowchaos needs no privilege"))
	}
	return errs
}

// validFieldPath reports whether the downward API supports path in an
// environment variable.
func validFieldPath(path string) bool {
	switch path {
	case "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return true
	}
	for _, pre := range []string{"metadata.labels['", "metadata.annotations['"} {
		if k, ok := strings.CutPrefix(path, pre); ok {
			k, ok = strings.CutSuffix(k, "']")
			return ok && len(validation.IsQualifiedName(k)) == 0
		}
	}
	return false
}
