package harness

import (
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/verify"
)

// A clone that shares its source's worker ID can repeat an ID only in a
// tick both of them issued IDs in. A clone that was slow to serve (a JVM
// still compiling, a starved machine) may issue a few IDs, none of them in
// a tick its source used: the run then shows nothing about a shared worker
// ID, and a clean result would be a pass the fault never earned. The
// overlap watch counts the shared ticks; with none, the clone fault is
// unconfirmed. Only clones without a lease are watched: with one, keeping
// the two out of each other's ticks is what the lease is for.

// overlap watches one clone and its source while both run.
type overlap struct {
	fi         int // the clone fault
	src, clone int // slot indexes
	name       string
	srcName    string
	worker     int64
	open       bool
	ticks      map[int64]uint8 // tick -> 1 (source), 2 (clone), 3 (both)
	shared     int
}

// watchOverlap starts counting the ticks the clone in slot clone and its
// source in slot src issue IDs in (Snowflakes only: the kind that carries
// a worker ID).
func (r *run) watchOverlap(fi int, src, clone *slot) {
	if r.kind != verify.KindSnowflake {
		return
	}
	r.mu.Lock()
	r.mu.overlaps = append(r.mu.overlaps, &overlap{fi: fi, src: src.idx, clone: clone.idx, name: clone.name, srcName: src.name,
		worker: clone.worker, open: true, ticks: map[int64]uint8{}})
	r.mu.Unlock()
	r.noverlap.Add(1)
}

// endOverlap stops the watch on the clone in slot clone.
func (r *run) endOverlap(clone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.mu.overlaps {
		if o.clone == clone && o.open {
			o.open = false
			r.noverlap.Add(-1)
		}
	}
}

// observeOverlap notes the ticks of a call's IDs on the open watches of
// its slot.
func (r *run) observeOverlap(c *view, ids *idBuf) {
	if ids.len() == 0 || !c.up {
		return
	}
	layout := c.sl.spec.Layout.Normalize()
	tick := int64(layout.Tick)
	if tick <= 0 {
		tick = int64(time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.mu.overlaps {
		var bit uint8
		switch {
		case !o.open:
			continue
		case c.sl.idx == o.src:
			bit = 1
		case c.sl.idx == o.clone:
			bit = 2
		default:
			continue
		}
		last := int64(-1)
		for i := 0; i < ids.len(); i++ {
			e, ok := ids.timeAt(i, layout)
			if !ok {
				break
			}
			t := e / tick
			if t == last {
				continue
			}
			last = t
			was := o.ticks[t]
			if was|bit == 3 && was != 3 {
				o.shared++
			}
			o.ticks[t] = was | bit
		}
	}
}

// settleOverlap leaves unconfirmed every clone fault whose clone and
// source never issued IDs in the same tick.
func (r *run) settleOverlap() {
	r.mu.Lock()
	overlaps := r.mu.overlaps
	r.mu.Unlock()
	for _, o := range overlaps {
		if o.shared > 0 {
			r.detail(o.fi, fmt.Sprintf("%s and %s issued IDs with worker %d in %d of the same ticks", o.name, o.srcName, o.worker, o.shared))
			continue
		}
		var mine, theirs int
		for _, b := range o.ticks {
			if b&2 != 0 {
				mine++
			}
			if b&1 != 0 {
				theirs++
			}
		}
		r.unconfirmed(o.fi, fmt.Sprintf("%s and %s share worker %d but never issued IDs in the same tick (%s in %d ticks, %s in %d, while both ran): a shared worker ID had no chance to repeat an ID",
			o.name, o.srcName, o.worker, o.name, mine, o.srcName, theirs))
	}
}
