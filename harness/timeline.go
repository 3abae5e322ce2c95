package harness

import (
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
)

// timelineBuckets is how many buckets a run's timeline has.
const timelineBuckets = 240

// maxTimelineDups caps the duplicate marks kept per run.
const maxTimelineDups = 200

// timeline accumulates a run's time series; the caller holds run.mu.
type timeline struct {
	n      int
	width  time.Duration
	dur    time.Duration
	series []*NodeSeries
	dups   []time.Duration
}

func newTimeline(s *scenario.Scenario, nodes int) *timeline {
	w := max(s.Duration/timelineBuckets, 1)
	n := int((s.Duration + w - 1) / w)
	return &timeline{n: n, width: w, dur: s.Duration}
}

// addSeries gives the slot a series (once per slot name) starting at
// offset at.
func (tl *timeline) addSeries(sl *slot, at time.Duration) {
	if tl == nil {
		return
	}
	for _, ns := range tl.series {
		if ns.Name == sl.name {
			sl.series = ns
			return
		}
	}
	ns := &NodeSeries{
		Name: sl.name, IDs: make([]uint64, tl.n), Failed: make([]uint64, tl.n),
		Offset: make([]time.Duration, tl.n), Known: make([]bool, tl.n), Lead: make([]time.Duration, tl.n),
		From: tl.bucket(at),
	}
	tl.series = append(tl.series, ns)
	sl.series = ns
}

func (tl *timeline) bucket(t time.Duration) int {
	i := int(t / tl.width)
	return min(max(i, 0), tl.n-1)
}

// call records one call ending at offset end; refEnd is its reference
// time in Unix ns. The lead is its last ID's, where the kind of ID embeds
// a time.
func (tl *timeline) call(sl *slot, end time.Duration, ids *idBuf, failed bool, refEnd int64, dups int) {
	ns := sl.series
	if ns == nil {
		return
	}
	i := tl.bucket(end)
	n := ids.len()
	if failed && n == 0 {
		ns.Failed[i]++
		return
	}
	ns.IDs[i] += uint64(n)
	if t, ok := ids.lastTime(sl.spec.Layout); ok {
		if lead := time.Duration(t - refEnd); lead > ns.Lead[i] {
			ns.Lead[i] = lead
		}
	}
	for k := 0; k < dups && len(tl.dups) < maxTimelineDups; k++ {
		tl.dups = append(tl.dups, end)
	}
}

// offset records a node's clock offset at the end of bucket i.
func (tl *timeline) offset(sl *slot, i int, off time.Duration) {
	if sl.series == nil || i < 0 || i >= tl.n {
		return
	}
	sl.series.Offset[i], sl.series.Known[i] = off, true
}

func (tl *timeline) result() *Timeline {
	return &Timeline{Bucket: tl.width, Buckets: tl.n, Nodes: tl.series, Duplicates: tl.dups}
}
