package harness

import (
	"fmt"
	"strings"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
)

// cutTargetStore applies store outage fi to the store the target runs
// (target.StoreFaulter): everyone's, or the named nodes' hosts'. The
// target confirms the cut; an error leaves the fault unconfirmed.
func (l *lifecycle) cutTargetStore(sf target.StoreFaulter, fi int) {
	f := l.s.Faults[fi]
	now := l.d.now()
	hosts := l.partitionHosts(f)
	dir := f.Direction
	if dir == "" {
		dir = "both"
	}
	how, err := sf.CutStore(l.ctx, l.runID, hosts, dir)
	if err != nil {
		l.unconfirmed(fi, "cutting the lease store off: "+err.Error())
	}
	what := "lease store down"
	if f.Partition {
		what = strings.Join(f.Nodes, ", ") + " cut off from the lease store"
		if dir != "both" {
			what += " (" + dir + " only)"
		}
	}
	l.detail(fi, fmt.Sprintf("%s for %s", what, scenario.FormatDuration(f.For)))
	if how != "" {
		l.detail(fi, how)
	}
	l.d.schedule(now+f.For, storeBackEvent{fi})
}

// healTargetStore ends store outage fi on the target's store.
func (l *lifecycle) healTargetStore(sf target.StoreFaulter, fi int) {
	at := l.d.now()
	how, err := sf.HealStore(l.ctx, l.runID, l.partitionHosts(l.s.Faults[fi]))
	if err != nil {
		l.unconfirmed(fi, "lease store did not come back: "+err.Error())
		return
	}
	l.detail(fi, fmt.Sprintf("back at %s, answering at %s (%s)", Duration(at), Duration(l.d.now()), how))
}

// partitionHosts returns the hosts a partition cuts off (the named
// nodes' current hosts), nil for a whole store outage.
func (l *lifecycle) partitionHosts(f scenario.Fault) []string {
	if !f.Partition {
		return nil
	}
	var hosts []string
	for _, name := range f.Nodes {
		hosts = append(hosts, l.slot(name).spec.Host)
	}
	return hosts
}
