package verify

import (
	"cmp"
	"math"
	"slices"

	"github.com/snowchaos/snowchaos/generator"
)

// The 64-bit path: Snowflake IDs.
//
// Every ID lives in exactly one issuer's Set, the first issuer's. owners
// lists, per node field (under Config.Layout), the issuers whose Sets may
// hold IDs with it, so a duplicate is found with both issuers. Time
// records (blocks) remember when each issuer issued which range of IDs,
// for the first issue's time of a duplicate.

// ownerList lists the issuers whose Sets may hold IDs with one node field.
type ownerList struct{ ids []IssuerID }

// block records that an issuer issued IDs within [min, max] (not
// necessarily all of them) during [refStart, refEnd].
type block struct {
	min, max         generator.ID
	refStart, refEnd int64
	// soft and hard are when the block closes, set as it opens (see
	// minBlockIDs); n counts its IDs, wrapping harmlessly (it only keeps
	// a block open until it holds minBlockIDs).
	soft, hard int64
	n          uint32
}

// minBlockIDs and maxBlockSpans bound block sizes: a block closes at the
// first call ending a TimeResolution after the block opened once it holds
// minBlockIDs IDs, or maxBlockSpans resolutions after it opened, or at a
// call that began before it opened.
const (
	minBlockIDs   = 32
	maxBlockSpans = 100
)

// observeIDs runs the per-ID checks of a call's Snowflake IDs.
func (v *Verifier) observeIDs(is *issuer, o *Observation) Found {
	ids := o.IDs
	var f Found
	v.cur.ids += uint64(len(ids))
	is.ids += uint64(len(ids))
	var st *stream
	var prev generator.ID
	hasPrev := false
	if o.Stream != 0 {
		st = v.stream(is, o.Stream, len(ids))
		prev, hasPrev = st.last, st.has
	}
	v.dupAt = v.dupAt[:0]
	lo, hi := ids[0], ids[0]
	checkFloor, floor := is.floorBy >= 0, is.floor
	clk := is.clk
	curTick, run := int64(-1), uint64(0)
	for i, id := range ids {
		lo, hi = min(lo, id), max(hi, id)
		if id <= prev && hasPrev && st != nil {
			f.OrderViolations++
			v.orderViolation(st, is, SnowflakeValue(prev), SnowflakeValue(id), o)
		}
		prev, hasPrev = id, true
		if int64(id) <= floor && checkFloor {
			f.RestartViolations++
			v.restartViolation(is, SnowflakeValue(id), SnowflakeValue(generator.ID(floor)), o)
		}
		// The usual case inline: the node field of the issuer's last ID,
		// which no other issuer has used, and a fresh ID.
		if node := (uint64(id) >> v.seqBits) & v.nodeMsk; node != is.lastNode || !is.solo || !is.set.tryAppend(id) {
			if !v.add(is, id, node) {
				f.Duplicates++
				v.duplicateID(is, id, i, o)
			}
		}
		if t := int64((uint64(id) &^ (1 << 63)) >> clk.shift); t != curTick {
			if run > 0 && clk.off(curTick, o.RefStart, offEnd(o)) {
				v.leadLag(is, curTick, run, o)
			}
			curTick, run = t, 0
		}
		run++
	}
	if clk.off(curTick, o.RefStart, offEnd(o)) {
		v.leadLag(is, curTick, run, o)
	}
	if st != nil {
		st.last, st.has = prev, true
	}

	// The issuer's range and time records.
	if !is.hasIDs {
		is.hasIDs, is.minID, is.maxID = true, lo, hi
	} else {
		is.minID, is.maxID = min(is.minID, lo), max(is.maxID, hi)
	}
	v.record(is, lo, hi, uint32(min(len(ids), math.MaxUint32)), o)
	if is.hasSuccessor {
		v.raiseSuccessors(is)
	}
	return f
}

// observeOne is observeIDs for the most common call, one ID: the same
// checks, without the loop.
func (v *Verifier) observeOne(is *issuer, o *Observation, id generator.ID) Found {
	var f Found
	v.cur.ids++
	is.ids++
	if o.Stream != 0 {
		st := v.stream(is, o.Stream, 1)
		if id <= st.last && st.has {
			f.OrderViolations++
			v.orderViolation(st, is, SnowflakeValue(st.last), SnowflakeValue(id), o)
		}
		st.last, st.has = id, true
	}
	if int64(id) <= is.floor && is.floorBy >= 0 {
		f.RestartViolations++
		v.restartViolation(is, SnowflakeValue(id), SnowflakeValue(generator.ID(is.floor)), o)
	}
	if node := (uint64(id) >> v.seqBits) & v.nodeMsk; node != is.lastNode || !is.solo || !is.set.tryAppend(id) {
		if !v.add(is, id, node) {
			f.Duplicates++
			v.dupAt = v.dupAt[:0]
			v.duplicateID(is, id, 0, o)
		}
	}
	if t := int64((uint64(id) &^ (1 << 63)) >> is.clk.shift); is.clk.off(t, o.RefStart, offEnd(o)) {
		v.leadLag(is, t, 1, o)
	}
	if !is.hasIDs {
		is.hasIDs, is.minID, is.maxID = true, id, id
	} else {
		is.minID, is.maxID = min(is.minID, id), max(is.maxID, id)
	}
	if b := &is.cur; is.hasCur && b.absorbs(id, o) {
		b.max, b.refEnd, b.n = max(b.max, id), max(b.refEnd, o.RefEnd), b.n+1
	} else {
		v.recordSlow(is, id, id, 1, o)
	}
	if is.hasSuccessor {
		v.raiseSuccessors(is)
	}
	return f
}

// raiseSuccessors raises the restart floors of is's higher incarnations
// to its largest ID.
func (v *Verifier) raiseSuccessors(is *issuer) {
	for _, mid := range is.group.members {
		if m := v.issuers[mid]; m.ref.Incarnation > is.ref.Incarnation {
			v.raiseFloor(m, is)
		}
	}
}

// add records id, whose node field is node, as issued by is and reports
// whether it was fresh; when not, v.lastFirst is the issuer whose Set
// holds it.
func (v *Verifier) add(is *issuer, id generator.ID, node uint64) bool {
	if node != is.lastNode {
		v.own(is, node)
	}
	if !is.solo && v.inOthers(is, id) {
		return false
	}
	if is.set.Add(id) {
		return true
	}
	v.lastFirst = is.id
	return false
}

// own makes is an owner of the node field node and caches its list.
func (v *Verifier) own(is *issuer, node uint64) {
	ol := v.owners[node]
	if ol == nil {
		ol = &ownerList{}
		v.owners[node] = ol
	}
	if !slices.Contains(ol.ids, is.id) {
		// The owners that cached this list as theirs alone are no more.
		for _, mid := range ol.ids {
			if m := v.issuers[mid]; m.lastOwner == ol {
				m.solo = false
			}
		}
		ol.ids = append(ol.ids, is.id)
	}
	is.lastNode, is.lastOwner, is.solo = node, ol, len(ol.ids) == 1
}

// inOthers reports whether another owner of is's current node field holds
// id, setting v.lastFirst to it.
func (v *Verifier) inOthers(is *issuer, id generator.ID) bool {
	for _, oid := range is.lastOwner.ids {
		if oid == is.id {
			continue
		}
		other := v.issuers[oid]
		if !other.hasIDs || id > other.maxID || id < other.minID {
			continue
		}
		if other.set.Contains(id) {
			v.lastFirst = oid
			return true
		}
	}
	return false
}

// duplicateID records that is repeated id, the call's i-th ID, first
// issued by v.lastFirst.
func (v *Verifier) duplicateID(is *issuer, id generator.ID, i int, o *Observation) {
	if d := v.duplicate(is, v.lastFirst, o); d != nil {
		d.ID = SnowflakeValue(id)
		// When the same call issued id earlier and that occurrence was
		// fresh, this call is the first issue.
		inCall := false
		if v.lastFirst == is.id {
			if j := slices.Index(o.IDs[:i], id); j >= 0 && !slices.Contains(v.dupAt, j) {
				inCall = true
			}
		}
		if inCall {
			d.FirstRefStart, d.FirstRefEnd = o.RefStart, o.RefEnd
		} else {
			d.FirstRefStart, d.FirstRefEnd = v.issuers[v.lastFirst].bracket(id)
		}
	}
	v.dupAt = append(v.dupAt, i)
}

// bracket returns the reference-time span of the calls of is that may
// have issued id: the union of the blocks whose range holds it.
func (is *issuer) bracket(id generator.ID) (start, end int64) {
	holds := func(b *block) bool { return b.min <= id && id <= b.max }
	if is.monotone {
		bs := is.blocks
		i, _ := slices.BinarySearchFunc(bs, id, func(b block, id generator.ID) int { return cmp.Compare(b.max, id) })
		if i < len(bs) && holds(&bs[i]) {
			return bs[i].refStart, bs[i].refEnd
		}
		if is.hasCur && holds(&is.cur) {
			return is.cur.refStart, is.cur.refEnd
		}
	}
	found := false
	note := func(b *block) {
		if !holds(b) {
			return
		}
		if !found {
			start, end, found = b.refStart, b.refEnd, true
		} else {
			start, end = min(start, b.refStart), max(end, b.refEnd)
		}
	}
	for i := range is.blocks {
		note(&is.blocks[i])
	}
	if is.hasCur {
		note(&is.cur)
	}
	if !found { // cannot happen: every issued ID is in a block
		return is.firstRef, is.lastRef
	}
	return start, end
}

// record notes that is issued IDs in [lo, hi] during the call o,
// extending the open block while it is small.
func (v *Verifier) record(is *issuer, lo, hi generator.ID, n uint32, o *Observation) {
	if b := &is.cur; is.hasCur && b.absorbs(lo, o) {
		b.max, b.refEnd, b.n = max(b.max, hi), max(b.refEnd, o.RefEnd), b.n+n
		return
	}
	v.recordSlow(is, lo, hi, n, o)
}

// absorbs reports whether the open block b can take a call o whose
// smallest ID is lo without moving its minimum or closing: the usual
// case, inlined.
func (b *block) absorbs(lo generator.ID, o *Observation) bool {
	return lo >= b.min && o.RefStart >= b.refStart && o.RefEnd < b.hard && (o.RefEnd < b.soft || b.n < minBlockIDs)
}

// recordSlow is record for a call that lowers the block's minimum, began
// before it, or closes it.
func (v *Verifier) recordSlow(is *issuer, lo, hi generator.ID, n uint32, o *Observation) {
	b := &is.cur
	if is.hasCur {
		if o.RefStart >= b.refStart && o.RefEnd < b.hard && (o.RefEnd < b.soft || b.n < minBlockIDs) {
			// Only the minimum moves down.
			b.min = lo
			if k := len(is.blocks); k > 0 && lo <= is.blocks[k-1].max {
				is.monotone = false
			}
			b.max, b.refEnd, b.n = max(b.max, hi), max(b.refEnd, o.RefEnd), b.n+n
			return
		}
		is.blocks = append(is.blocks, *b)
		if lo <= b.max {
			is.monotone = false
		}
	}
	// Field by field: a composite literal would be built on the stack and
	// copied, a store-forwarding stall on the per-call path.
	b.min, b.max, b.refStart, b.refEnd, b.n = lo, hi, o.RefStart, o.RefEnd, n
	b.soft, b.hard = addSat(o.RefStart, v.blkSpan), addSat(o.RefStart, maxBlockSpans*v.blkSpan)
	is.hasCur = true
}

// addSat returns a+d (d >= 0), saturating at MaxInt64.
func addSat(a, d int64) int64 {
	if a > math.MaxInt64-d {
		return math.MaxInt64
	}
	return a + d
}
