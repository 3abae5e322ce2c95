package verify

import (
	"math"
	"strings"
)

// The wide paths: 128-bit IDs (UUIDs, ULIDs) and opaque strings. One set
// holds every distinct ID with its first issuer and the span of the call
// that first issued it, so a duplicate names both issuers and brackets
// the first issue without per-issuer sets.

// span is a stretch of reference time covering consecutive calls; a wide
// ID's first issue is remembered as the span its call fell in.
type span struct{ start, end int64 }

// spanOf returns the span holding call o: the current one, extended,
// while it stays within TimeResolution, else a new one.
func (v *Verifier) spanOf(o *Observation) uint32 {
	if k := len(v.spans); k > 0 {
		s := &v.spans[k-1]
		lo, hi := min(s.start, o.RefStart), max(s.end, o.RefEnd)
		if subSat(hi, lo) < v.blkSpan || k == math.MaxUint32 {
			s.start, s.end = lo, hi
			return uint32(k - 1)
		}
	}
	v.spans = append(v.spans, span{o.RefStart, o.RefEnd})
	return uint32(len(v.spans) - 1)
}

// wideDuplicate records that is repeated an ID first issued as f, and
// returns the detail record whose ID to fill in, or nil.
func (v *Verifier) wideDuplicate(is *issuer, f first, o *Observation) *Duplicate {
	d := v.duplicate(is, f.who, o)
	if d != nil {
		sp := v.spans[f.span]
		d.FirstRefStart, d.FirstRefEnd = sp.start, sp.end
	}
	return d
}

// observeWide runs the per-ID checks of a call's 128-bit IDs.
func (v *Verifier) observeWide(is *issuer, o *Observation, ids []ID128) Found {
	var f Found
	v.cur.ids += uint64(len(ids))
	is.ids += uint64(len(ids))
	sp := v.spanOf(o)
	ordered, timed := v.kind.Ordered(), v.kind.Timed()
	var st *stream
	var prev ID128
	hasPrev := false
	if o.Stream != 0 && ordered {
		st = v.stream(is, o.Stream, len(ids))
		prev, hasPrev = st.lastW, st.has
	}
	checkFloor, floor := is.floorBy >= 0 && ordered, is.floorW
	lo, hi := ids[0], ids[0]
	curTick, run := int64(-1), uint64(0)
	clk := is.clk
	for _, x := range ids {
		if ordered {
			if x.less(lo) {
				lo = x
			}
			if hi.less(x) {
				hi = x
			}
			if st != nil && hasPrev && !prev.less(x) {
				f.OrderViolations++
				v.orderViolation(st, is, Value{Kind: v.kind, Bits: prev}, Value{Kind: v.kind, Bits: x}, o)
			}
			prev, hasPrev = x, true
			if checkFloor && !floor.less(x) {
				f.RestartViolations++
				v.restartViolation(is, Value{Kind: v.kind, Bits: x}, Value{Kind: v.kind, Bits: floor}, o)
			}
		}
		if first, fresh := v.wset.add(x, is.id, sp); !fresh {
			f.Duplicates++
			if d := v.wideDuplicate(is, first, o); d != nil {
				d.ID = Value{Kind: v.kind, Bits: x}
			}
		}
		if timed {
			if t := x.UnixMilli(); t != curTick {
				if run > 0 && clk.off(curTick, o.RefStart, offEnd(o)) {
					v.leadLag(is, curTick, run, o)
				}
				curTick, run = t, 0
			}
			run++
		}
	}
	if run > 0 && clk.off(curTick, o.RefStart, offEnd(o)) {
		v.leadLag(is, curTick, run, o)
	}
	if st != nil {
		st.lastW, st.has = prev, true
	}
	if ordered {
		if !is.hasIDs {
			is.minW, is.maxW = lo, hi
		} else {
			if lo.less(is.minW) {
				is.minW = lo
			}
			if is.maxW.less(hi) {
				is.maxW = hi
			}
		}
	}
	is.hasIDs = true
	if is.hasSuccessor && ordered {
		v.raiseSuccessors(is)
	}
	return f
}

// observeStrings runs the per-ID checks of a call's string IDs: exact
// duplicates only (strings have no order or embedded time).
func (v *Verifier) observeStrings(is *issuer, o *Observation, ids []string) Found {
	var f Found
	v.cur.ids += uint64(len(ids))
	is.ids += uint64(len(ids))
	sp := v.spanOf(o)
	for _, x := range ids {
		if first, fresh := v.sset.add(x, is.id, sp); !fresh {
			f.Duplicates++
			if d := v.wideDuplicate(is, first, o); d != nil {
				d.ID = Value{Kind: KindString, Text: strings.Clone(x)}
			}
		}
	}
	is.hasIDs = true
	return f
}
