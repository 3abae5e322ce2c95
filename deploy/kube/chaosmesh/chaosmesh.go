// Package chaosmesh turns a scenario's timed faults into a Chaos Mesh
// Workflow that injects them into a snowchaos fleet on Kubernetes (package
// fleet), so the scenario that runs in simulation and on one machine runs
// on a cluster too.
//
// The Workflow's entry is a Parallel template with one Serial branch per
// injection: a Suspend until the fault's offset from the start, then the
// chaos, whose template deadline is how long it lasts. What each fault
// kind becomes:
//
//	step, leap       TimeChaos on CLOCK_REALTIME of the node's pods, offset
//	                 `by` (leap: -1s), until the next revert of the node or
//	                 the end; a node's clock_offset is one from the start
//	revert           the deadline of the TimeChaos it ends
//	restart          PodChaos pod-kill, grace period 0 (a SIGKILL); the
//	                 StatefulSet brings the pod back with its volume
//	clone            a Task running the node's container with the same
//	                 worker (and, with same_holder, the same pod name as
//	                 holder), ended by a PodChaos container-kill
//	store_outage     all nodes: PodChaos pod-failure of the lease store
//	                 (with hang: a NetworkChaos partition of every node
//	                 pod from it); named nodes: NetworkChaos partition
//	                 from the store in the fault's direction (partial
//	                 without hang: NetworkChaos drops packets, so calls
//	                 hang rather than fail at once)
//	freeze, smear,   not mapped: TimeChaos only adds a constant offset, and
//	slew, drift,     Chaos Mesh has no pause and cannot start a process
//	pause, handoff   with a late clock (Unmappable gives each reason)
//
// Nothing is dropped silently: every fault gets a Mapping saying mapped,
// partial (and what part is not) or unmapped (and why). Every object is
// built from the Chaos Mesh API types and Validate runs the API module's
// own admission checks on it. The Workflow needs Chaos Mesh MinVersion or
// later.
package chaosmesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	cm "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/snowchaos/snowchaos/deploy/kube/fleet"
	"github.com/snowchaos/snowchaos/deploy/kube/internal/kubeyaml"
	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// Status is what became of one fault.
type Status string

// Statuses.
const (
	// Mapped: Chaos Mesh injects the fault as the scenario means it.
	Mapped Status = "mapped"
	// Partial: Chaos Mesh injects part of it; Reason names the rest.
	Partial Status = "partial"
	// Unmapped: Chaos Mesh cannot inject it; Reason says why.
	Unmapped Status = "unmapped"
)

// Mapping is what became of one fault of the scenario (or of a node's
// starting clock offset).
type Mapping struct {
	// Fault is the fault's name, or "clock_offset of NODE".
	Fault string
	// Kind is the fault's kind ("clock_offset" for a node's offset).
	Kind string
	// Line is the fault's (or node's) line in the scenario file.
	Line int
	// At is the fault's offset from the start.
	At time.Duration
	// Status says whether Chaos Mesh injects it.
	Status Status
	// Templates are the Workflow templates that inject it.
	Templates []string
	// Note says how it is injected and how that differs in timing.
	Note string
	// Reason says what is not injected and why (Partial, Unmapped).
	Reason string
}

// Unmappable gives, for each fault kind Chaos Mesh cannot inject, the
// reason. Every kind of scenario.Kinds is either here or mapped.
var Unmappable = map[faults.Kind]string{
	faults.KindFreeze: "TimeChaos adds a constant offset to a clock; a clock standing still is an offset that grows with time",
	faults.KindSmear: "TimeChaos adds a constant offset; a smear changes the clock's rate, and a staircase of TimeChaos steps " +
		"would step the clock back, the very thing a smear avoids",
	faults.KindSlew: "TimeChaos adds a constant offset; a slew changes the clock's rate, and a staircase of TimeChaos steps " +
		"would step the clock back, the very thing a slew avoids",
	faults.KindDrift: "TimeChaos cannot change a clock's rate; drift is a rate error",
	faults.KindPause: "Chaos Mesh cannot stop a container's processes (no SIGSTOP or cgroup-freezer action), and a VM pause " +
		"also holds the monotonic clock, which only suspending the VM or node does; pod-failure would be a restart, not a pause",
	faults.KindHandoff: "the new holder's clock must be behind from its first instant, so that its handoff guard compares " +
		"against a late clock; TimeChaos attaches to a process already running (after the guard), and the StatefulSet brings " +
		"back the same pod rather than another host",
	faults.KindStoreStep: "TimeChaos could shift the lease store's wall clock, but Postgres, etcd and ZooKeeper decide expiry " +
		"by their own time sources, which the harness cannot read to check a lease overrun; the store clock faults are simulated",
	faults.KindStoreDrift: "TimeChaos cannot change a clock's rate; drift is a rate error",
	faults.KindStorePause: "Chaos Mesh cannot stop a container's processes (no SIGSTOP or cgroup-freezer action), so the " +
		"lease store cannot be paused",
}

// mappedKinds are the kinds the builder injects.
var mappedKinds = map[faults.Kind]bool{
	faults.KindStep: true, faults.KindLeap: true, faults.KindRevert: true,
	faults.KindRestart: true, faults.KindClone: true, faults.KindStoreOutage: true,
}

// ClockIDs are the clocks the TimeChaos objects shift: the wall clock
// only, as an NTP step does. Go reads it through the vDSO's clock_gettime,
// which TimeChaos patches in the target process (PID 1 of the container
// and its children); CLOCK_MONOTONIC, which bounds the generator's waits,
// is left alone.
var ClockIDs = []string{"CLOCK_REALTIME"}

// OneShotDeadline is how long the Workflow keeps a one-shot chaos (a pod
// or container kill) after injecting it.
const OneShotDeadline = 5 * time.Second

// MinVersion is the oldest Chaos Mesh release the exported Workflows
// work on: a clone's Task carries labels (CloneLabel, the node labels),
// a field Chaos Mesh added to its Task type in 2.8.0. The API server of an
// older release prunes it without a word, so the clone pod starts
// unlabelled and the container-kill that should end it selects nothing.
// The tests validate every export against the published CRDs of this
// release and the latest one, and show 2.7.3's refusing the labels.
const MinVersion = "2.8.0"

// CloneLabel marks a clone's pod with the name of the template that runs
// it, so that the container-kill that ends it selects it alone.
const CloneLabel = "snowchaos/clone"

// Options configure an export.
type Options struct {
	// Fleet is the fleet the Workflow faults (namespace, StatefulSet,
	// lease store, and the container clones run); the zero value is the
	// committed manifests' fleet.
	Fleet fleet.Config
	// Name is the Workflow's name; empty: "snowchaos-" and the scenario's
	// name.
	Name string
}

// Export is a scenario's Workflow and what became of each fault.
type Export struct {
	// Scenario is the exported scenario.
	Scenario *scenario.Scenario
	// Fleet is the fleet configuration, defaults applied.
	Fleet fleet.Config
	// Workflow injects the mapped faults.
	Workflow *cm.Workflow
	// Mappings has one entry per node clock offset and per fault, in time
	// order.
	Mappings []Mapping
	// Pods maps each scenario node to the pod that plays it: the one whose
	// ordinal is the node's worker ID.
	Pods map[string]string
	// Replicas is the least number of StatefulSet replicas that has a pod
	// for every node.
	Replicas int32
}

// ErrNoMapping is returned for a fault kind that is neither mapped nor
// explained in Unmappable.
var ErrNoMapping = errors.New("chaosmesh: fault kind has no Chaos Mesh mapping and no reason why not")

// ErrNoPod is returned for a node whose worker ID is beyond the fleet's
// StatefulSet ordinals (fleet.MaxReplicas): such a scenario (the top
// worker ID of a wide node field) runs in simulated or process mode only.
var ErrNoPod = errors.New("chaosmesh: worker has no StatefulSet pod")

// New builds the Workflow of s. It fails on a fault kind it does not know
// (ErrNoMapping), on an invalid fleet configuration, on a node whose worker
// ID no StatefulSet ordinal can prefer, and when the built Workflow fails
// Validate.
func New(s *scenario.Scenario, o Options) (*Export, error) {
	fc, err := o.Fleet.WithDefaults()
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = "snowchaos-" + s.Name
	}
	name = dnsName(name, 63)
	b := &builder{s: s, fc: fc, used: map[string]bool{}, pods: map[string]string{}}
	for _, n := range s.Nodes {
		if n.Worker >= fleet.MaxReplicas {
			return nil, fmt.Errorf("%w: node %s: worker %d (ordinals prefer worker IDs 0..%d)", ErrNoPod, n.Name, n.Worker, fleet.MaxReplicas-1)
		}
		b.pods[n.Name] = fc.PodName(n.Worker)
		b.replicas = max(b.replicas, int32(n.Worker)+1)
	}
	for _, f := range s.Faults {
		if !mappedKinds[f.Kind] && Unmappable[f.Kind] == "" {
			return nil, fmt.Errorf("%w: %q (faults[%s], line %d)", ErrNoMapping, f.Kind, f.Name, f.Line)
		}
	}
	b.clock()
	for _, f := range s.TimeOrder() {
		switch f.Kind {
		case faults.KindStep, faults.KindLeap, faults.KindRevert:
			// Done by clock.
		case faults.KindRestart:
			b.restart(f)
		case faults.KindClone:
			b.clone(f)
		case faults.KindStoreOutage:
			b.storeOutage(f)
		default:
			b.add(Mapping{Fault: f.Name, Kind: string(f.Kind), Line: f.Line, At: f.At, Status: Unmapped, Reason: Unmappable[f.Kind]})
		}
	}
	sort.SliceStable(b.maps, func(i, j int) bool { return b.maps[i].At < b.maps[j].At })
	wf := &cm.Workflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: cm.SchemeGroupVersion.String(), Kind: cm.KindWorkflow},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fc.Namespace, Labels: map[string]string{fleet.LabelPartOf: fc.Name, "snowchaos/scenario": dnsName(s.Name, 63)}},
	}
	entry := cm.Template{Name: "entry", Type: cm.TypeParallel, Deadline: dur(s.Duration + OneShotDeadline)}
	for _, br := range b.branches {
		entry.Children = append(entry.Children, br)
	}
	if len(entry.Children) == 0 {
		// Nothing to inject: the Workflow still marks the run's length.
		entry.Children = []string{b.suspend("run", s.Duration)}
	}
	wf.Spec = cm.WorkflowSpec{Entry: entry.Name, Templates: append([]cm.Template{entry}, b.templates...)}
	ex := &Export{Scenario: s, Fleet: fc, Workflow: wf, Mappings: b.maps, Pods: b.pods, Replicas: b.replicas}
	if err := Validate(wf); err != nil {
		return nil, err
	}
	return ex, nil
}

// Validate runs the Chaos Mesh API module's admission defaulting and
// validation on a copy of wf, as its webhook would on kubectl apply, and
// checks every name as the API server would.
func Validate(wf *cm.Workflow) error {
	var errs []string
	for _, e := range validation.IsDNS1123Subdomain(wf.Name) {
		errs = append(errs, "metadata.name "+wf.Name+": "+e)
	}
	if len(wf.Name) > 63 {
		// The Workflow's name becomes a label value on its nodes.
		errs = append(errs, fmt.Sprintf("metadata.name %s: longer than 63 characters", wf.Name))
	}
	for _, e := range validation.IsDNS1123Label(wf.Namespace) {
		errs = append(errs, "metadata.namespace "+wf.Namespace+": "+e)
	}
	c := wf.DeepCopy()
	if err := c.Default(context.Background(), c); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := c.ValidateCreate(context.Background(), c); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("chaosmesh: invalid Workflow %s: %s", wf.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Incomplete returns the mappings that are partial or unmapped.
func (e *Export) Incomplete() []Mapping {
	var out []Mapping
	for _, m := range e.Mappings {
		if m.Status != Mapped {
			out = append(out, m)
		}
	}
	return out
}

// Write writes the export as YAML: a comment block (the node-to-pod map,
// the harness's SNOWCHAOS_HTTP_NODES, and every fault's mapping, the
// partial and unmapped ones with their reasons) and the Workflow document.
func (e *Export) Write(w io.Writer) error {
	s := e.Scenario
	h := []string{
		fmt.Sprintf("snowchaos export chaos-mesh: scenario %s (%s), %s, %d faults", s.Name, s.File, s.Duration, len(s.Faults)),
		fmt.Sprintf("Fleet: namespace %s, StatefulSet %s with at least %d replicas, lease store %s (deploy/kube/manifests).",
			e.Fleet.Namespace, e.Fleet.Name, e.Replicas, e.Fleet.Store),
		"Needs Chaos Mesh " + MinVersion + " or later: older releases drop a clone Task's labels without a word.",
		"Apply this Workflow when `snowchaos run` starts the scenario (docs/kubernetes.md): its offsets count from then.",
		"The fleet leases every worker ID from its store, with the fence and guards on: targets that switch them off",
		"(negative controls) have no cluster form. Chaos Mesh injects the faults below; the harness only loads and verifies.",
		"",
		"Nodes (a pod prefers the worker ID equal to its ordinal):",
	}
	var nodes []string
	for _, n := range s.Nodes {
		url := e.Fleet.PodURL(n.Worker)
		h = append(h, fmt.Sprintf("  %-8s worker %-4d -> pod %s  %s", n.Name, n.Worker, e.Pods[n.Name], url))
		nodes = append(nodes, n.Name+"="+url)
	}
	h = append(h, "SNOWCHAOS_HTTP_NODES="+strings.Join(nodes, ","), "", "Faults:")
	if len(e.Mappings) == 0 {
		h = append(h, "  (none)")
	}
	for _, m := range e.Mappings {
		h = append(h, fmt.Sprintf("  %-8s %s %s (line %d, at %s)", m.Status, m.Kind, m.Fault, m.Line, m.At))
		if len(m.Templates) > 0 {
			h = append(h, "           templates: "+strings.Join(m.Templates, ", "))
		}
		if m.Note != "" {
			h = append(h, wrap("           ", m.Note)...)
		}
		if m.Reason != "" {
			h = append(h, wrap("           not mapped: ", m.Reason)...)
		}
	}
	if n := len(e.Incomplete()); n > 0 {
		h = append(h, "", fmt.Sprintf("%d of %d faults are not (or only partly) mapped: see above.", n, len(e.Mappings)))
	}
	return kubeyaml.Write(w, h, e.Workflow)
}

// wrap breaks text into comment lines of about 100 characters, the first
// prefixed with first and the rest indented as deep.
func wrap(first, text string) []string {
	var out []string
	line, indent := first, strings.Repeat(" ", len(first))
	for _, word := range strings.Fields(text) {
		if len(line)+len(word) > 100 && strings.TrimSpace(line) != strings.TrimSpace(first) {
			out = append(out, strings.TrimRight(line, " "))
			line = indent
		}
		line += word + " "
	}
	return append(out, strings.TrimRight(line, " "))
}

// builder accumulates templates and mappings.
type builder struct {
	s         *scenario.Scenario
	fc        fleet.Config
	pods      map[string]string
	replicas  int32
	templates []cm.Template
	branches  []string
	used      map[string]bool
	maps      []Mapping
}

func (b *builder) add(m Mapping) { b.maps = append(b.maps, m) }

// name returns a template name from base that is a DNS-1123 subdomain
// short enough for the labels Chaos Mesh derives from it, and unique.
func (b *builder) name(base string) string {
	n := dnsName(base, 40)
	out := n
	for i := 2; b.used[out]; i++ {
		out = fmt.Sprintf("%s-%d", n, i)
	}
	b.used[out] = true
	return out
}

// suspend adds a Suspend template of length d and returns its name.
func (b *builder) suspend(base string, d time.Duration) string {
	n := b.name(base)
	b.templates = append(b.templates, cm.Template{Name: n, Type: cm.TypeSuspend, Deadline: dur(d)})
	return n
}

// branch adds a Serial branch to the entry that waits until at and then
// runs the templates in order; it returns the names of steps.
func (b *builder) branch(base string, at time.Duration, steps ...cm.Template) []string {
	var children, names []string
	if at > 0 {
		children = append(children, b.suspend(base+"-wait", at))
	}
	for _, st := range steps {
		b.templates = append(b.templates, st)
		children = append(children, st.Name)
		names = append(names, st.Name)
	}
	n := b.name(base + "-at")
	b.templates = append(b.templates, cm.Template{Name: n, Type: cm.TypeSerial, Children: children})
	b.branches = append(b.branches, n)
	return names
}

// podsOf selects the pods playing the named nodes.
func (b *builder) podsOf(nodes []string) cm.PodSelector {
	var names []string
	for _, n := range nodes {
		names = append(names, b.pods[n])
	}
	return cm.PodSelector{
		Selector: cm.PodSelectorSpec{
			GenericSelectorSpec: cm.GenericSelectorSpec{Namespaces: []string{b.fc.Namespace}},
			Pods:                map[string][]string{b.fc.Namespace: names},
		},
		Mode: cm.AllMode,
	}
}

// labelled selects every pod with the labels.
func (b *builder) labelled(labels map[string]string) cm.PodSelector {
	return cm.PodSelector{
		Selector: cm.PodSelectorSpec{GenericSelectorSpec: cm.GenericSelectorSpec{Namespaces: []string{b.fc.Namespace}, LabelSelectors: labels}},
		Mode:     cm.AllMode,
	}
}

// clockStep is one constant offset on some nodes' clocks.
type clockStep struct {
	name, kind string
	line       int
	at         time.Duration
	by         time.Duration
	nodes      []string
	note       string
}

// clock maps the nodes' starting offsets, steps, leaps and reverts: each
// offset is a TimeChaos from its time until the node's next revert or the
// end. Chaos Mesh's daemon adds up the offsets of TimeChaos objects on the
// same process, so overlapping steps stack as in the scenario.
func (b *builder) clock() {
	var steps []clockStep
	for _, n := range b.s.Nodes {
		if n.ClockOffset != 0 {
			steps = append(steps, clockStep{name: "clock_offset of " + n.Name, kind: "clock_offset", line: n.Line, by: n.ClockOffset, nodes: []string{n.Name},
				note: "the node's clock starts off by the offset: a TimeChaos from the Workflow's start (the pod is already running, so the process starts with the true time)"})
		}
	}
	var reverts []scenario.Fault
	for _, f := range b.s.TimeOrder() {
		switch f.Kind {
		case faults.KindStep:
			steps = append(steps, clockStep{name: f.Name, kind: string(f.Kind), line: f.Line, at: f.At, by: f.By, nodes: f.Nodes})
		case faults.KindLeap:
			steps = append(steps, clockStep{name: f.Name, kind: string(f.Kind), line: f.Line, at: f.At, by: -time.Second, nodes: f.Nodes,
				note: "the clock steps back 1s at the fault's offset from the Workflow's start, not when the wall clock reaches the end of a day " +
					"(the scenario's start time is not the cluster's)"})
		case faults.KindRevert:
			reverts = append(reverts, f)
		}
	}
	// The end of a step on a node: its first revert at or after the step
	// (a revert listed after a step at the same offset ends it), else the
	// end of the run.
	endOf := func(st clockStep, node string) (time.Duration, string) {
		for _, r := range reverts {
			if r.At >= st.at && contains(r.Nodes, node) {
				return r.At, r.Name
			}
		}
		return b.s.Duration, ""
	}
	ended := map[string][]string{}
	for _, st := range steps {
		m := Mapping{Fault: st.name, Kind: st.kind, Line: st.line, At: st.at, Status: Mapped}
		groups := map[time.Duration][]string{}
		var ends []time.Duration
		revertOf := map[time.Duration]string{}
		for _, n := range st.nodes {
			end, rv := endOf(st, n)
			if _, ok := groups[end]; !ok {
				ends = append(ends, end)
			}
			groups[end] = append(groups[end], n)
			revertOf[end] = rv
		}
		var parts []string
		for _, end := range ends {
			if end <= st.at {
				parts = append(parts, fmt.Sprintf("reverted at once on %s: nothing to inject", strings.Join(groups[end], ", ")))
				continue
			}
			spec := cm.TimeChaosSpec{
				ContainerSelector: cm.ContainerSelector{PodSelector: b.podsOf(groups[end]), ContainerNames: []string{fleet.ContainerName}},
				TimeOffset:        st.by.String(),
				ClockIds:          ClockIDs,
			}
			t := cm.Template{Name: b.name(st.name), Type: cm.TypeTimeChaos, Deadline: dur(end - st.at), EmbedChaos: &cm.EmbedChaos{TimeChaos: &spec}}
			b.branch(st.name, st.at, t)
			m.Templates = append(m.Templates, t.Name)
			until := "the end of the run, when Chaos Mesh removes it (the clock then steps by " + (-st.by).String() + ")"
			if rv := revertOf[end]; rv != "" {
				until = fmt.Sprintf("the revert %q at %s", rv, end)
				ended[rv] = append(ended[rv], t.Name)
			}
			parts = append(parts, fmt.Sprintf("TimeChaos %s on %s of %s until %s", st.by, strings.Join(ClockIDs, ","), strings.Join(b.podNames(groups[end]), ", "), until))
		}
		m.Note = strings.Join(parts, "; ")
		if st.note != "" {
			m.Note += "; " + st.note
		}
		b.add(m)
	}
	for _, r := range reverts {
		m := Mapping{Fault: r.Name, Kind: string(r.Kind), Line: r.Line, At: r.At, Status: Mapped}
		if ts := ended[r.Name]; len(ts) > 0 {
			m.Templates = ts
			m.Note = "the deadline of the TimeChaos it ends; clock faults that are not mapped were never injected"
		} else {
			m.Note = "no mapped clock fault to end on its nodes"
		}
		b.add(m)
	}
}

func (b *builder) podNames(nodes []string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, b.pods[n])
	}
	return out
}

// restart kills the nodes' pods at once (grace period 0: SIGKILL, no
// final mark, no lease release); the StatefulSet recreates them with the
// same name and volume.
func (b *builder) restart(f scenario.Fault) {
	spec := cm.PodChaosSpec{ContainerSelector: cm.ContainerSelector{PodSelector: b.podsOf(f.Nodes)}, Action: cm.PodKillAction, GracePeriod: 0}
	t := cm.Template{Name: b.name(f.Name), Type: cm.TypePodChaos, Deadline: dur(OneShotDeadline), EmbedChaos: &cm.EmbedChaos{PodChaos: &spec}}
	m := Mapping{Fault: f.Name, Kind: string(f.Kind), Line: f.Line, At: f.At, Status: Mapped, Templates: b.branch(f.Name, f.At, t),
		Note: fmt.Sprintf("PodChaos pod-kill (grace period 0) of %s; the StatefulSet recreates the pod with its checkpoint volume, "+
			"down for as long as that takes (seconds; %s): on a cluster a restart never lands in the same millisecond, "+
			"so the checkpoint's start fence is exercised only when the clock is behind the mark", strings.Join(b.podNames(f.Nodes), ", "), downFor(f.For))}
	var missing []string
	if f.OffsetWhileDown != 0 {
		missing = append(missing, fmt.Sprintf("offset_while_down %s: TimeChaos attaches to a running process, so the new process "+
			"starts with the true time and its start fence never sees the rewind", f.OffsetWhileDown))
	}
	if f.WipeCheckpoint {
		missing = append(missing, "keep_checkpoint off: the checkpoint lives on the pod's PersistentVolumeClaim, which a pod kill "+
			"keeps, and Chaos Mesh cannot wipe a volume")
	}
	if f.Graceful {
		missing = append(missing, "graceful: the pod is killed with grace period 0 (a crash), so no final mark is written")
	}
	if f.Point != "" {
		missing = append(missing, fmt.Sprintf("point %s: a crash inside a call is placed only in simulated mode; the pod is killed at the fault's time, "+
			"wherever its calls are", f.Point))
	}
	if len(missing) > 0 {
		m.Status, m.Reason = Partial, strings.Join(missing, "; ")
	}
	b.add(m)
}

// downFor says how long the scenario keeps a restarted node down.
func downFor(d time.Duration) string {
	if d == 0 {
		return "the scenario's node is back at once"
	}
	return "the scenario's is down for " + d.String()
}

// clone starts, for each node, a Task running the node pod's container
// with the node's worker ID (and with same_holder the original pod's name
// as lease holder) on a fresh checkpoint volume, and ends it with a
// container-kill after `for` (or at the end of the run).
func (b *builder) clone(f scenario.Fault) {
	life := f.For
	if life == 0 {
		life = b.s.Duration - f.At
	}
	m := Mapping{Fault: f.Name, Kind: string(f.Kind), Line: f.Line, At: f.At, Status: Mapped}
	for _, node := range f.Nodes {
		nd, _ := b.s.Node(node)
		task := b.name(f.Name + "-" + node)
		ctr := b.fc.NodeContainer()
		for i := range ctr.Env {
			switch ctr.Env[i].Name {
			case "SNOWCHAOS_WORKER":
				ctr.Env[i] = corev1.EnvVar{Name: "SNOWCHAOS_WORKER", Value: fmt.Sprint(nd.Worker)}
			case "POD_NAME":
				if f.SameHolder {
					ctr.Env[i] = corev1.EnvVar{Name: "POD_NAME", Value: b.pods[node]}
				}
			}
		}
		labels := b.fc.NodeLabels()
		labels[CloneLabel] = task
		tt := cm.Template{Name: task, Type: cm.TypeTask, Deadline: dur(life + OneShotDeadline), Task: &cm.Task{
			Container: &ctr,
			Volumes:   []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Labels:    labels,
		}}
		kill := cm.PodChaosSpec{
			ContainerSelector: cm.ContainerSelector{PodSelector: b.labelled(map[string]string{CloneLabel: task}), ContainerNames: []string{fleet.ContainerName}},
			Action:            cm.ContainerKillAction,
		}
		kt := cm.Template{Name: b.name(task + "-end"), Type: cm.TypePodChaos, Deadline: dur(OneShotDeadline), EmbedChaos: &cm.EmbedChaos{PodChaos: &kill}}
		m.Templates = append(m.Templates, b.branch(task, f.At, tt)...)
		m.Templates = append(m.Templates, b.branch(kt.Name, f.At+life, kt)...)
	}
	holder := "its own pod name as lease holder"
	if f.SameHolder {
		holder = "the original pod's name as lease holder (same_holder)"
	}
	m.Note = fmt.Sprintf("a Task pod per node running the fleet's snowchaos container with the node's worker ID and %s, "+
		"labelled as a node (the Service sends it traffic), on a fresh volume, ended after %s by a container-kill; "+
		"it starts when its image is pulled and scheduled, not in the same millisecond", holder, life)
	b.add(m)
}

// Directions maps a partition's direction, seen from the nodes cut off,
// to NetworkChaos's, seen from the selected pods towards the target (the
// store): outbound drops what they send it ("to"), inbound what it sends
// them ("from").
var Directions = map[string]cm.Direction{"": cm.Both, "both": cm.Both, "outbound": cm.To, "inbound": cm.From}

// storeOutage makes the lease store unreachable: for everyone by failing
// its pod (or, when calls must hang, by partitioning every node pod from
// it), or, for named nodes, by partitioning their pods from it in the
// fault's direction.
func (b *builder) storeOutage(f scenario.Fault) {
	m := Mapping{Fault: f.Name, Kind: string(f.Kind), Line: f.Line, At: f.At, Status: Mapped}
	var t cm.Template
	var missing []string
	store := ptr(b.labelled(b.fc.StoreLabels()))
	switch {
	case f.Partition:
		dir := Directions[f.Direction]
		spec := cm.NetworkChaosSpec{PodSelector: b.podsOf(f.Nodes), Action: cm.PartitionAction, Direction: dir, Target: store}
		t = cm.Template{Name: b.name(f.Name), Type: cm.TypeNetworkChaos, Deadline: dur(f.For), EmbedChaos: &cm.EmbedChaos{NetworkChaos: &spec}}
		what := map[cm.Direction]string{cm.Both: "", cm.To: " (what they send the store is dropped)",
			cm.From: " (what the store sends them is dropped: their requests take effect)"}[dir]
		m.Note = fmt.Sprintf("NetworkChaos partition, direction %s%s, between %s and the lease store for %s; clones and other pods still reach it",
			dir, what, strings.Join(b.podNames(f.Nodes), ", "), f.For)
		if !f.Hang {
			missing = append(missing, "the scenario's calls fail at once; NetworkChaos drops packets silently, so they get no answer until "+
				"the caller's timeout (hang: on is what Chaos Mesh injects)")
		}
		missing = append(missing, b.unselected(f, f.Nodes)...)
	case f.Hang:
		spec := cm.NetworkChaosSpec{PodSelector: b.labelled(b.fc.NodeLabels()), Action: cm.PartitionAction, Direction: cm.Both, Target: store}
		t = cm.Template{Name: b.name(f.Name), Type: cm.TypeNetworkChaos, Deadline: dur(f.For), EmbedChaos: &cm.EmbedChaos{NetworkChaos: &spec}}
		m.Note = fmt.Sprintf("NetworkChaos partition (both ways) between every node pod (clones included) and the lease store for %s: "+
			"calls get no answer until their timeout; a pod-failure would make them fail at once", f.For)
		missing = append(missing, b.unselected(f, nil)...)
	default:
		spec := cm.PodChaosSpec{ContainerSelector: cm.ContainerSelector{PodSelector: b.labelled(b.fc.StoreLabels())}, Action: cm.PodFailureAction}
		t = cm.Template{Name: b.name(f.Name), Type: cm.TypePodChaos, Deadline: dur(f.For), EmbedChaos: &cm.EmbedChaos{PodChaos: &spec}}
		m.Note = fmt.Sprintf("PodChaos pod-failure of the lease store (%s) for %s; it then restarts from its volume, "+
			"so the outage lasts %s plus the store's start-up", b.fc.StoreName(), f.For, f.For)
	}
	if len(missing) > 0 {
		m.Status, m.Reason = Partial, strings.Join(missing, "; ")
	}
	m.Templates = b.branch(f.Name, f.At, t)
	b.add(m)
}

// unselected names the restarts and clones inside outage f's window that
// bring up a pod a NetworkChaos on nodes (nil: every node) would miss:
// Chaos Mesh selects pods when it injects (the records in its status),
// and does not inject a pod created afterwards, such as the one the
// StatefulSet recreates after a kill.
func (b *builder) unselected(f scenario.Fault, nodes []string) []string {
	var out []string
	for _, g := range b.s.Faults {
		if g.At < f.At || g.At >= f.At+f.For {
			continue
		}
		switch {
		case g.Kind == faults.KindRestart && (nodes == nil || overlaps(g.Nodes, nodes)):
			out = append(out, fmt.Sprintf("restart %s at %s recreates a pod the partition never selected, which reaches the store", g.Name, g.At))
		case g.Kind == faults.KindClone && nodes == nil:
			out = append(out, fmt.Sprintf("clone %s at %s starts a pod the partition never selected, which reaches the store", g.Name, g.At))
		}
	}
	return out
}

// dnsName turns s into a DNS-1123 label-like name of at most n characters:
// lower case, runs of other characters as one '-', starting and ending
// with a letter or digit ("x" when nothing is left).
func dnsName(s string, n int) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
			dash = false
		} else if !dash && sb.Len() > 0 {
			sb.WriteByte('-')
			dash = true
		}
	}
	out := sb.String()
	if len(out) > n {
		out = out[:n]
	}
	out = strings.TrimRight(out, "-")
	if out == "" {
		return "x"
	}
	return out
}

// dur formats d as a Chaos Mesh duration string (Go syntax).
func dur(d time.Duration) *string {
	s := d.String()
	return &s
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if contains(b, x) {
			return true
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
