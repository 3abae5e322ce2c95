package verify

import (
	"cmp"
	"math"
	"slices"
	"time"
	"unsafe"
)

// Result is everything a Verifier found. Lists are in a deterministic
// order, so equal inputs give equal Results.
type Result struct {
	// Kind is the kind of ID checked; Ordered and Timed say whether the
	// order figures (OrderViolations, RestartViolations, Streams) and the
	// embedded-time figures (Lead, Lag) apply to it: where they do not,
	// they are zero and a report should show them as not applicable.
	Kind           Kind
	Ordered, Timed bool
	// Calls counts every call by outcome; Calls.Availability() is the
	// run's availability.
	Calls Calls
	// IDs counts IDs observed, Unique the distinct ones, Duplicates the
	// rest (IDs = Unique + Duplicates).
	IDs, Unique, Duplicates uint64
	// DuplicatePairs counts duplicates per (first, second) issuer pair,
	// most first.
	DuplicatePairs []DuplicatePair
	// DuplicateDetails are the first Config.MaxDetails duplicates.
	DuplicateDetails []Duplicate
	// OrderViolations counts IDs not above their stream's previous ID;
	// Streams counts the streams checked; ViolatedStreams lists each stream
	// with a violation, by stream ID; OrderDetails are the first ones.
	OrderViolations uint64
	Streams         uint64
	ViolatedStreams []StreamResult
	OrderDetails    []OrderViolation
	// RestartViolations counts IDs not above every ID a lower incarnation
	// of their worker issued; RestartDetails are the first ones.
	RestartViolations uint64
	RestartDetails    []RestartViolation
	// Lead is, per ID, how far its embedded time certainly lay ahead of
	// reference time: the start of its tick minus the call's RefEnd (0 when
	// not ahead). Lag is how far it certainly lay behind: the call's
	// RefStart minus the end of its tick (0 when not behind). A generator
	// in step with reference time scores 0 on both.
	Lead, Lag Dist
	// MaxLeadOwn is the largest lead over the issuer's own clock: the
	// start of an ID's tick minus the call's end as the issuer's clock
	// read it (Observation.OwnOffset). After a rewind a logical clock's
	// lead shows here, not in Lead, and its bound applies to this figure.
	MaxLeadOwn time.Duration
	// Wait is the distribution of per-call waits; MaxWaitIssuer and
	// MaxWaitAt say where the longest happened.
	Wait          Dist
	MaxWaitIssuer IssuerRef
	MaxWaitAt     int64
	// LongestGap is the longest time, over the run, in which no call
	// succeeded, to within Config.GapResolution.
	LongestGap time.Duration
	// FirstRef and LastRef bound the observed calls.
	FirstRef, LastRef int64
	// Windows holds one entry per fault window, in the order added.
	Windows []WindowResult
	// Issuers holds one entry per issuer, in registration order.
	Issuers []IssuerResult
	// Bytes estimates the memory the Verifier holds.
	Bytes uint64
}

// DuplicatePair counts duplicates between two issuers.
type DuplicatePair struct {
	// First issued the IDs before Second did.
	First, Second IssuerRef
	// Count is how many IDs Second repeated.
	Count uint64
}

// StreamResult is one stream's order figures.
type StreamResult struct {
	// Stream is the stream's ID.
	Stream uint64
	// Calls and IDs count what it observed, Violations its order
	// violations.
	Calls, IDs, Violations uint64
	// First is the stream's first violation.
	First OrderViolation
}

// WindowResult is one fault window's figures, over the calls whose
// RefStart falls inside it.
type WindowResult struct {
	// Window is the window as last set.
	Window
	// Calls counts its calls by outcome.
	Calls Calls
	// LongestGap is the longest time within the window (clipped to the
	// observed calls) in which no call succeeded; LongestIssuerGap the
	// longest for any single issuer within its own active span, and
	// GapIssuer that issuer.
	LongestGap, LongestIssuerGap time.Duration
	GapIssuer                    IssuerRef
	// Lead, Lag and Wait are its distributions (see Result).
	Lead, Lag, Wait Dist
	// MaxLeadOwn is its largest lead over the issuer's own clock.
	MaxLeadOwn time.Duration
	// Duplicates, OrderViolations and RestartViolations count its findings.
	Duplicates, OrderViolations, RestartViolations uint64
}

// IssuerResult is one issuer's figures.
type IssuerResult struct {
	// IssuerRef names the issuer.
	IssuerRef
	// Calls counts its calls by outcome.
	Calls Calls
	// IDs it returned; Duplicates among them that were issued before;
	// RestartViolations among them not above a lower incarnation's IDs.
	IDs, Duplicates, RestartViolations uint64
	// MinID and MaxID bound its IDs, for ordered kinds (zero Values when
	// none).
	MinID, MaxID Value
	// MaxLead, MaxLag and MaxWait are its extremes (see Result);
	// MaxLeadOwn its largest lead over its own clock.
	MaxLead, MaxLag, MaxWait time.Duration
	MaxLeadOwn               time.Duration
	// LongestGap is the longest time between its first and last call in
	// which none of its calls succeeded.
	LongestGap time.Duration
	// FirstRef and LastRef bound its calls (0 when it had none).
	FirstRef, LastRef int64
}

// Result computes the figures so far. It costs time in proportion to the
// number of issuers, windows and success buckets, not IDs; the Verifier
// can keep observing afterwards.
func (v *Verifier) Result() Result {
	t := v.runTally()
	calls := t.callCounts()
	r := Result{
		Kind: v.kind, Ordered: v.kind.Ordered(), Timed: v.kind.Timed(),
		Calls: calls, IDs: t.ids, Duplicates: t.dups, Unique: t.ids - t.dups,
		OrderViolations: t.order, RestartViolations: t.restv,
		Lead: t.lead.dist(t.ids), Lag: t.lag.dist(t.ids), Wait: t.wait.dist(calls.Total),
		MaxLeadOwn:     time.Duration(t.maxLeadOwn),
		MaxWaitAt:      t.maxWaitAt,
		OrderDetails:   slices.Clone(v.orderDetails),
		RestartDetails: slices.Clone(v.restartDetails),
	}
	if v.kind.Ordered() {
		r.Streams = uint64(len(v.streams))
	}
	// The run's span and successes are its issuers', joined here rather
	// than kept per call.
	seen := calls.Total > 0
	firstRef, lastRef := int64(math.MaxInt64), int64(math.MinInt64)
	var all []*buckets
	for _, is := range v.issuers {
		firstRef, lastRef = min(firstRef, is.firstRef), max(lastRef, is.lastRef)
		all = append(all, &is.succ)
	}
	succ := union(all)
	if seen {
		r.FirstRef, r.LastRef = firstRef, lastRef
	}
	if t.maxWait > 0 {
		r.MaxWaitIssuer = v.issuers[t.maxWaitBy].ref
	}
	for k, n := range v.pairs {
		r.DuplicatePairs = append(r.DuplicatePairs, DuplicatePair{First: v.issuers[k[0]].ref, Second: v.issuers[k[1]].ref, Count: n})
	}
	slices.SortFunc(r.DuplicatePairs, func(a, b DuplicatePair) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmpRef(a.First, b.First), cmpRef(a.Second, b.Second))
	})
	for _, d := range v.dupDetails {
		d.Windows = nil
		for _, w := range v.windows {
			if w.contains(d.SecondRefStart) {
				d.Windows = append(d.Windows, w.Name)
			}
		}
		r.DuplicateDetails = append(r.DuplicateDetails, d)
	}
	for _, st := range v.streamsWithViolation {
		r.ViolatedStreams = append(r.ViolatedStreams, StreamResult{Stream: st.id, Calls: st.calls, IDs: st.ids, Violations: st.violations, First: *st.first})
	}
	slices.SortFunc(r.ViolatedStreams, func(a, b StreamResult) int { return cmp.Compare(a.Stream, b.Stream) })
	if seen {
		r.LongestGap = succ.longestGap(firstRef, lastRef, v.gapRes)
	}
	for i := range v.windows {
		w := &v.windows[i]
		wt := v.windowTally(i)
		wc := wt.callCounts()
		wr := WindowResult{Window: w.Window, Calls: wc, Lead: wt.lead.dist(wt.ids), Lag: wt.lag.dist(wt.ids), Wait: wt.wait.dist(wc.Total), MaxLeadOwn: time.Duration(wt.maxLeadOwn),
			Duplicates: wt.dups, OrderViolations: wt.order, RestartViolations: wt.restv}
		if seen {
			wr.LongestGap = succ.longestGap(max(w.Start, firstRef), min(w.End, lastRef), v.gapRes)
		}
		for _, is := range v.issuers {
			if !is.seen() {
				continue
			}
			if g := is.succ.longestGap(max(w.Start, is.firstRef), min(w.End, is.lastRef), v.gapRes); g > wr.LongestIssuerGap {
				wr.LongestIssuerGap, wr.GapIssuer = g, is.ref
			}
		}
		r.Windows = append(r.Windows, wr)
	}
	r.Bytes = v.bytes()
	for _, is := range v.issuers {
		ir := IssuerResult{IssuerRef: is.ref, Calls: is.calls(), IDs: is.ids, Duplicates: is.dups, RestartViolations: is.restViol,
			MaxLead: time.Duration(is.maxLead), MaxLag: time.Duration(is.maxLag), MaxWait: is.maxWait, MaxLeadOwn: time.Duration(is.maxLeadOw)}
		switch {
		case !is.hasIDs:
		case v.kind == KindSnowflake:
			ir.MinID, ir.MaxID = SnowflakeValue(is.minID), SnowflakeValue(is.maxID)
		case v.kind.Ordered():
			ir.MinID, ir.MaxID = Value{Kind: v.kind, Bits: is.minW}, Value{Kind: v.kind, Bits: is.maxW}
		}
		if is.seen() {
			ir.FirstRef, ir.LastRef = is.firstRef, is.lastRef
			ir.LongestGap = is.succ.longestGap(is.firstRef, is.lastRef, v.gapRes)
		}
		r.Issuers = append(r.Issuers, ir)
	}
	return r
}

func cmpRef(a, b IssuerRef) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Incarnation, b.Incarnation), cmp.Compare(a.Worker, b.Worker))
}

// bytes estimates the Verifier's memory: Sets and tables, time records,
// gap bitmaps and histograms.
func (v *Verifier) bytes() uint64 {
	b := v.cur.bytes() + v.run.bytes()
	for i := range v.windows {
		b += v.windows[i].t.bytes()
	}
	for _, is := range v.issuers {
		b += is.set.Bytes() + uint64(cap(is.blocks))*uint64(unsafe.Sizeof(block{})) + is.succ.bytes()
	}
	b += uint64(len(v.streams)) * 96
	b += v.wset.bytes() + v.sset.bytes() + uint64(cap(v.spans))*uint64(unsafe.Sizeof(span{}))
	return b
}
