package lease

// Slot is what Request.Pick needs to know of one worker ID in a store.
type Slot struct {
	// Live reports that some holder holds the worker ID unexpired.
	Live bool
	// Used reports that the worker ID was granted before (it has a mark
	// naming a holder); a never-used one is preferred to an expired one.
	Used bool
	// Holder is the last holder of a used worker ID.
	Holder string
	// Seq orders the last writes to used worker IDs in the store (a
	// ZooKeeper mzxid, an etcd mod revision): the smaller, the longer
	// expired.
	Seq int64
}

// Pick chooses the worker ID to grant for r in the order
// Registry.Acquire documents, reading each worker ID's state through
// slot: the holder's most recently written one among those it held, the
// first free one in r.Prefer, the lowest never-used one, then the longest
// expired one. It returns -1 when every worker ID in r.Range is live.
// slot is called for IDs in r.Range only and must not change the store.
func (r Request) Pick(slot func(id int64) Slot) int64 {
	own, fresh, old := int64(-1), int64(-1), int64(-1)
	var ownSeq, oldSeq int64
	for id := r.Range.Min; id <= r.Range.Max; id++ {
		s := slot(id)
		switch {
		case s.Live:
		case !s.Used:
			if fresh < 0 {
				fresh = id
			}
		case s.Holder == r.Holder:
			if own < 0 || s.Seq > ownSeq {
				own, ownSeq = id, s.Seq
			}
		default:
			if old < 0 || s.Seq < oldSeq {
				old, oldSeq = id, s.Seq
			}
		}
	}
	pick := own
	for _, p := range r.Prefer {
		if pick >= 0 {
			break
		}
		if r.Range.Contains(p) && !slot(p).Live {
			pick = p
		}
	}
	if pick < 0 {
		pick = fresh
	}
	if pick < 0 {
		pick = old
	}
	return pick
}
