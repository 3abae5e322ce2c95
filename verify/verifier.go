package verify

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/snowchaos/snowchaos/generator"
)

// IssuerID names a registered issuer within one Verifier.
type IssuerID int32

// IssuerRef identifies an issuer in results.
type IssuerRef struct {
	// Name is the node's name, for example "node-a" or "node-a-clone".
	Name string
	// Incarnation counts restarts of the node: 0 for its first life.
	Incarnation int
	// Worker is the node (worker) ID the issuer puts into its IDs.
	Worker int64
}

// String returns "name#incarnation".
func (r IssuerRef) String() string { return fmt.Sprintf("%s#%d", r.Name, r.Incarnation) }

// IssuerSpec describes an issuer to Register.
type IssuerSpec struct {
	// Name, Incarnation and Worker identify the issuer (see IssuerRef). A
	// restart is the same Name with a higher Incarnation; a clone is
	// another Name with the same Worker; a handoff of a worker ID to
	// another node registers that node with an Incarnation above the last
	// holder's, so the restart invariant covers it.
	Name        string
	Incarnation int
	Worker      int64
	// Layout is the layout of the issuer's IDs; zero means Config.Layout.
	Layout generator.Layout
}

// Outcome classifies a call.
type Outcome uint8

// Call outcomes. The zero value is OutcomeOK.
const (
	// OutcomeOK: the call returned its IDs.
	OutcomeOK Outcome = iota
	// OutcomeRefused: the generator refused (clock backwards, lead bound,
	// fence closed, checkpoint failure, closed, ...).
	OutcomeRefused
	// OutcomeWaitExceeded: the call gave up at its wait deadline.
	OutcomeWaitExceeded
	// OutcomeError: a transport failure or any other error.
	OutcomeError
	numOutcomes
)

// String returns "ok", "refused", "wait_exceeded" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeRefused:
		return "refused"
	case OutcomeWaitExceeded:
		return "wait_exceeded"
	case OutcomeError:
		return "error"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// OutcomeOf classifies the error of an in-process generator call: nil is
// OutcomeOK, generator.ErrWaitExceeded is OutcomeWaitExceeded, the
// generator's other refusals are OutcomeRefused, and anything else is
// OutcomeError.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, generator.ErrWaitExceeded):
		return OutcomeWaitExceeded
	case errors.Is(err, generator.ErrClockBackwards), errors.Is(err, generator.ErrLeadExceeded),
		errors.Is(err, generator.ErrFenced), errors.Is(err, generator.ErrCheckpoint),
		errors.Is(err, generator.ErrClosed), errors.Is(err, generator.ErrLifetime),
		errors.Is(err, generator.ErrBeforeEpoch):
		return OutcomeRefused
	}
	return OutcomeError
}

// Observation is one call to an issuer, as the harness saw it. A failed
// call is an Observation too: its Outcome says how it failed.
type Observation struct {
	// Issuer is the node incarnation called (from Issuer or Register).
	Issuer IssuerID
	// Stream is the sequential stream the call belongs to: the IDs of one
	// stream (a client calling one node one call at a time) must be
	// strictly increasing across and within calls. 0 means none: the
	// call's order is not checked.
	Stream uint64
	// RefStart and RefEnd bracket the call in reference (true) time, Unix
	// ns. RefEnd below RefStart counts as RefStart.
	RefStart, RefEnd int64
	// IDs are the IDs the call returned, in the order returned. A failed
	// call may still carry the IDs it returned before failing. Observe
	// does not retain the slice.
	IDs []generator.ID
	// Outcome is how the call ended.
	Outcome Outcome
	// Wait is how long the call waited inside the generator (rewind or
	// sequence exhaustion), as the target reports it.
	Wait time.Duration
}

// Window is a named span of reference time, usually a fault and its
// aftermath.
type Window struct {
	// Name labels the window in results, for example "leap-second".
	Name string
	// Start and End bound the window, [Start, End), in reference Unix ns.
	// End math.MaxInt64 leaves it open (see Verifier.EndWindow).
	Start, End int64
}

// contains reports whether the window holds reference time t.
func (w Window) contains(t int64) bool { return t >= w.Start && t < w.End }

// WindowID names a window within one Verifier.
type WindowID int

// Config configures a Verifier. The zero value is usable.
type Config struct {
	// Layout is the layout of issuers registered without one, and the one
	// whose node field groups IDs for duplicate attribution. Zero means
	// generator.DefaultLayout().
	Layout generator.Layout
	// Windows are fault windows known in advance.
	Windows []Window
	// MaxDetails caps the detailed records kept of each kind of finding
	// (duplicates, order violations, restart violations); all are still
	// counted. Zero means 100; negative means none.
	MaxDetails int
	// TimeResolution is how finely the Verifier remembers when each issuer
	// issued which IDs, which bounds how wide a duplicate's FirstRef
	// bracket can be. Zero means 10ms. Memory per ID falls as it grows.
	TimeResolution time.Duration
	// GapResolution is the granularity of the longest-gap figures. Zero
	// means 1ms.
	GapResolution time.Duration
}

// Found counts what one Observe call found; the harness's fail-fast mode
// stops on the first non-zero Duplicates.
type Found struct {
	// Duplicates, OrderViolations and RestartViolations count the call's
	// IDs that broke each invariant.
	Duplicates, OrderViolations, RestartViolations int
}

// Any reports whether anything was found.
func (f Found) Any() bool { return f.Duplicates+f.OrderViolations+f.RestartViolations > 0 }

// Verifier checks every invariant of a run in one pass over the calls the
// harness observes: exact duplicates across all issuers (each with both
// issuers, the first issue's time and the fault windows), strict order per
// stream, restart monotonicity per worker, embedded-time lead and lag
// against reference time, availability and longest gaps overall and per
// fault window, and the longest wait.
//
// It never reads a clock: all times come in Observations. Memory is the
// Set's few bytes per distinct ID, plus at most 40 bytes per 32 IDs or per
// TimeResolution of each issuer's calls for the time records (about 1.3
// bytes per ID at one ID per ms), plus bounded histograms. A Verifier is
// for one goroutine; see Concurrent for many.
type Verifier struct {
	cfg     Config
	layout  generator.Layout
	seqBits uint
	nodeMsk uint64
	details int
	blkSpan int64
	gapRes  int64

	issuers []*issuer
	byName  map[IssuerRef]IssuerID
	workers map[int64]*workerGroup
	owners  map[uint64]*ownerList
	streams map[uint64]*stream

	windows []*window
	winHit  []int // scratch: windows containing the current call

	calls                Calls
	ids, dups            uint64
	orderViol, restViol  uint64
	lead, lag, wait      hist
	maxWait              time.Duration
	maxWaitBy            IssuerID
	maxWaitAt            int64
	seenRef              bool
	firstRef, lastRef    int64
	succ                 buckets
	bucket, bucketStart  int64 // last gap bucket computed and its start (ns), when bucketOK
	bucketOK             bool
	dupDetails           []Duplicate
	orderDetails         []OrderViolation
	restartDetails       []RestartViolation
	pairs                map[[2]IssuerID]uint64
	streamsWithViolation map[uint64]*stream
	lastFirst            IssuerID // first issuer of the duplicate add just found
	dupAt                []int    // scratch: positions of duplicates in the current call
}

// Calls counts calls by outcome.
type Calls struct {
	// Total is every call observed.
	Total uint64
	// OK, Refused, WaitExceeded and Errors split Total by Outcome.
	OK, Refused, WaitExceeded, Errors uint64
}

// Availability returns OK/Total, or 1 when there were no calls.
func (c Calls) Availability() float64 {
	if c.Total == 0 {
		return 1
	}
	return float64(c.OK) / float64(c.Total)
}

func (c *Calls) add(o Outcome) {
	c.Total++
	switch o {
	case OutcomeOK:
		c.OK++
	case OutcomeRefused:
		c.Refused++
	case OutcomeWaitExceeded:
		c.WaitExceeded++
	default:
		c.Errors++
	}
}

// issuer is the state of one node incarnation.
type issuer struct {
	ref IssuerRef
	id  IssuerID
	set Set

	// Layout-derived constants for embedded time.
	tickShift uint
	epochNs   int64
	tickNs    int64
	maxTick   int64 // beyond it the tick's end overflows int64

	calls          Calls
	ids, dups      uint64
	restViol       uint64
	hasIDs         bool
	minID, maxID   generator.ID
	maxLead, maxLg int64
	maxWait        time.Duration
	seen           bool
	firstRef       int64
	lastRef        int64

	// Restart lineage: floor is the largest ID any lower incarnation of
	// the same worker issued (-1: none), floorBy who issued it.
	group        *workerGroup
	floor        int64
	floorBy      IssuerID
	hasSuccessor bool

	// Time records: IDs issued in [min, max] during [refStart, refEnd].
	// cur is the open block, blocks the closed ones.
	cur       block
	hasCur    bool
	blocks    []block
	monotone  bool // blocks and cur ordered by ID with no overlap: binary search works
	lastNode  uint64
	lastOwner *ownerList

	succ    buckets // success gap buckets
	lastStr *stream // the stream of its last call
}

// block records that an issuer issued IDs within [min, max] (not
// necessarily all of them) during [refStart, refEnd].
type block struct {
	min, max         generator.ID
	refStart, refEnd int64
	n                uint32
}

// minBlockIDs and maxBlockSpans bound block sizes: a block closes once it
// spans TimeResolution and holds minBlockIDs IDs, or once it spans
// maxBlockSpans resolutions.
const (
	minBlockIDs   = 32
	maxBlockSpans = 100
)

type workerGroup struct{ members []IssuerID }

// ownerList lists the issuers whose Sets may hold IDs with one node field.
type ownerList struct{ ids []IssuerID }

type stream struct {
	id         uint64
	last       generator.ID
	has        bool
	calls, ids uint64
	violations uint64
	first      *OrderViolation
}

type window struct {
	Window
	calls              Calls
	lead, lag, wait    hist
	maxWait            time.Duration
	dups, order, restv uint64
}

// New returns a Verifier for cfg.
func New(cfg Config) *Verifier {
	l := cfg.Layout
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	v := &Verifier{
		cfg:     cfg,
		layout:  l,
		seqBits: min(l.SeqBits, 63),
		nodeMsk: 1<<min(l.NodeBits, 63) - 1,
		details: cfg.MaxDetails,
		blkSpan: int64(cfg.TimeResolution),
		gapRes:  int64(cfg.GapResolution),
		byName:  make(map[IssuerRef]IssuerID),
		workers: make(map[int64]*workerGroup),
		owners:  make(map[uint64]*ownerList),
		streams: make(map[uint64]*stream),
		pairs:   make(map[[2]IssuerID]uint64),

		streamsWithViolation: make(map[uint64]*stream),
	}
	if v.details == 0 {
		v.details = 100
	} else if v.details < 0 {
		v.details = 0
	}
	if v.blkSpan <= 0 {
		v.blkSpan = int64(10 * time.Millisecond)
	}
	if v.gapRes <= 0 {
		v.gapRes = int64(time.Millisecond)
	}
	for _, w := range cfg.Windows {
		v.FaultWindow(w.Name, w.Start, w.End)
	}
	return v
}

// Issuer registers a node incarnation using Config.Layout; see Register.
func (v *Verifier) Issuer(name string, incarnation int, worker int64) IssuerID {
	return v.Register(IssuerSpec{Name: name, Incarnation: incarnation, Worker: worker})
}

// Register registers a node incarnation and returns its ID. Registering
// the same Name and Incarnation again returns the same ID; it panics if
// the Worker differs. Every ID an issuer issues must be greater than every
// ID that issuers of the same Worker with a lower Incarnation issued (the
// restart invariant).
func (v *Verifier) Register(s IssuerSpec) IssuerID {
	ref := IssuerRef{Name: s.Name, Incarnation: s.Incarnation, Worker: s.Worker}
	key := IssuerRef{Name: s.Name, Incarnation: s.Incarnation}
	if id, ok := v.byName[key]; ok {
		if got := v.issuers[id].ref; got.Worker != s.Worker {
			panic(fmt.Sprintf("verify: issuer %s registered with worker %d, now %d", got, got.Worker, s.Worker))
		}
		return id
	}
	l := s.Layout
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = v.layout
	}
	id := IssuerID(len(v.issuers))
	is := &issuer{
		ref:      ref,
		id:       id,
		floor:    -1,
		floorBy:  -1,
		monotone: true,
		lastNode: math.MaxUint64,
	}
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	is.set.init(l)
	is.tickShift = min(l.NodeBits+l.SeqBits, 63)
	t0 := l.TimeOf(0)
	is.epochNs = t0.UnixNano()
	is.tickNs = max(int64(l.TimeOf(1).Sub(t0)), 1)
	is.maxTick = (math.MaxInt64 - is.tickNs - max(is.epochNs, 0)) / is.tickNs

	g := v.workers[s.Worker]
	if g == nil {
		g = &workerGroup{}
		v.workers[s.Worker] = g
	}
	for _, mid := range g.members {
		m := v.issuers[mid]
		switch {
		case m.ref.Incarnation < s.Incarnation:
			m.hasSuccessor = true
			if m.hasIDs && int64(m.maxID) > is.floor {
				is.floor, is.floorBy = int64(m.maxID), mid
			}
		case m.ref.Incarnation > s.Incarnation:
			is.hasSuccessor = true
		}
	}
	g.members = append(g.members, id)
	is.group = g
	v.issuers = append(v.issuers, is)
	v.byName[key] = id
	return id
}

// FaultWindow adds a window and returns its ID. A window counts the calls
// observed after it is added whose RefStart falls inside it, so add
// windows before feeding their calls (the harness knows its schedule);
// gap figures and duplicate details are computed over all windows at
// Result time regardless.
func (v *Verifier) FaultWindow(name string, start, end int64) WindowID {
	v.windows = append(v.windows, &window{Window: Window{Name: name, Start: start, End: end}})
	return WindowID(len(v.windows) - 1)
}

// EndWindow sets the end of a window added open (End math.MaxInt64).
func (v *Verifier) EndWindow(id WindowID, end int64) {
	v.windows[id].End = end
}

// Observe checks one call and reports what it found. It panics if
// o.Issuer was not registered.
func (v *Verifier) Observe(o Observation) Found {
	if o.Issuer < 0 || int(o.Issuer) >= len(v.issuers) {
		panic(fmt.Sprintf("verify: unknown issuer %d", o.Issuer))
	}
	is := v.issuers[o.Issuer]
	if o.RefEnd < o.RefStart {
		o.RefEnd = o.RefStart
	}
	if !v.seenRef {
		v.seenRef, v.firstRef, v.lastRef = true, o.RefStart, o.RefEnd
	} else {
		v.firstRef, v.lastRef = min(v.firstRef, o.RefStart), max(v.lastRef, o.RefEnd)
	}
	if !is.seen {
		is.seen, is.firstRef, is.lastRef = true, o.RefStart, o.RefEnd
	} else {
		is.firstRef, is.lastRef = min(is.firstRef, o.RefStart), max(is.lastRef, o.RefEnd)
	}

	v.winHit = v.winHit[:0]
	for i, w := range v.windows {
		if w.contains(o.RefStart) {
			v.winHit = append(v.winHit, i)
		}
	}

	v.calls.add(o.Outcome)
	is.calls.add(o.Outcome)
	if o.Outcome == OutcomeOK {
		// Calls arrive in about time order: reuse the last bucket number.
		// Rather than divide: the test is modular, so it stays exact
		// where bucketStart wrapped around for absurd times.
		if !v.bucketOK || uint64(o.RefEnd-v.bucketStart) >= uint64(v.gapRes) {
			v.bucket = floorDiv(o.RefEnd, v.gapRes)
			v.bucketStart, v.bucketOK = v.bucket*v.gapRes, true
		}
		b := v.bucket
		v.succ.add(b)
		is.succ.add(b)
	}
	w := max(o.Wait, 0)
	v.wait.add(int64(w), 1)
	if w > v.maxWait {
		v.maxWait, v.maxWaitBy, v.maxWaitAt = w, o.Issuer, o.RefStart
	}
	is.maxWait = max(is.maxWait, w)
	for _, i := range v.winHit {
		win := v.windows[i]
		win.calls.add(o.Outcome)
		win.wait.add(int64(w), 1)
		win.maxWait = max(win.maxWait, w)
	}

	var f Found
	if len(o.IDs) > 0 {
		f = v.observeIDs(is, &o)
		for _, i := range v.winHit {
			win := v.windows[i]
			win.dups += uint64(f.Duplicates)
			win.order += uint64(f.OrderViolations)
			win.restv += uint64(f.RestartViolations)
		}
	}
	return f
}

// observeIDs runs the per-ID checks of one call.
func (v *Verifier) observeIDs(is *issuer, o *Observation) Found {
	var f Found
	var st *stream
	v.dupAt = v.dupAt[:0]
	if o.Stream != 0 {
		st = is.lastStr
		if st == nil || st.id != o.Stream {
			st = v.stream(o.Stream)
			is.lastStr = st
		}
		st.calls++
		st.ids += uint64(len(o.IDs))
	}
	v.ids += uint64(len(o.IDs))
	is.ids += uint64(len(o.IDs))

	lo, hi := o.IDs[0], o.IDs[0]
	floor := is.floor
	curTick, run := int64(-1), uint64(0)
	for i, id := range o.IDs {
		lo, hi = min(lo, id), max(hi, id)
		if st != nil {
			if st.has && id <= st.last {
				f.OrderViolations++
				v.orderViolation(st, is, st.last, id, o)
			}
			st.last, st.has = id, true
		}
		if int64(id) <= floor && is.floorBy >= 0 {
			f.RestartViolations++
			v.restartViolation(is, id, o)
		}
		if !v.add(is, id) {
			f.Duplicates++
			v.duplicate(is, id, i, o)
		}
		if t := int64((uint64(id) &^ (1 << 63)) >> is.tickShift); t != curTick {
			if run > 0 {
				v.leadLag(is, curTick, run, o)
			}
			curTick, run = t, 0
		}
		run++
	}
	v.leadLag(is, curTick, run, o)

	// The issuer's range and time records.
	if !is.hasIDs {
		is.hasIDs, is.minID, is.maxID = true, lo, hi
	} else {
		is.minID, is.maxID = min(is.minID, lo), max(is.maxID, hi)
	}
	v.record(is, lo, hi, uint32(min(len(o.IDs), math.MaxUint32)), o)
	if is.hasSuccessor {
		for _, mid := range is.group.members {
			m := v.issuers[mid]
			if m.ref.Incarnation > is.ref.Incarnation && int64(is.maxID) > m.floor {
				m.floor, m.floorBy = int64(is.maxID), is.id
			}
		}
	}
	return f
}

// add records id as issued by is and reports whether it was fresh. Every
// ID lives in exactly one issuer's Set, the first issuer's; owners lists,
// per node field, the issuers whose Sets may hold it.
func (v *Verifier) add(is *issuer, id generator.ID) bool {
	node := (uint64(id) >> v.seqBits) & v.nodeMsk
	ol := is.lastOwner
	if node != is.lastNode {
		ol = v.owners[node]
		if ol == nil {
			ol = &ownerList{}
			v.owners[node] = ol
		}
		if !slices.Contains(ol.ids, is.id) {
			ol.ids = append(ol.ids, is.id)
		}
		is.lastNode, is.lastOwner = node, ol
	}
	for _, oid := range ol.ids {
		if oid == is.id {
			continue
		}
		other := v.issuers[oid]
		if !other.hasIDs || id > other.maxID || id < other.minID {
			continue
		}
		if other.set.Contains(id) {
			v.lastFirst = oid
			return false
		}
	}
	if is.set.Add(id) {
		return true
	}
	v.lastFirst = is.id
	return false
}

// stream returns the state of stream id, creating it.
func (v *Verifier) stream(id uint64) *stream {
	st := v.streams[id]
	if st == nil {
		st = &stream{id: id}
		v.streams[id] = st
	}
	return st
}

// OrderViolation is an ID not above its predecessor in a sequential
// stream.
type OrderViolation struct {
	// Stream is the stream, Issuer the node that issued ID.
	Stream uint64
	Issuer IssuerRef
	// Prev is the stream's previous ID, ID the one not above it.
	Prev, ID generator.ID
	// RefStart is the reference time the call began.
	RefStart int64
}

func (v *Verifier) orderViolation(st *stream, is *issuer, prev, id generator.ID, o *Observation) {
	v.orderViol++
	st.violations++
	ov := OrderViolation{Stream: st.id, Issuer: is.ref, Prev: prev, ID: id, RefStart: o.RefStart}
	if st.first == nil {
		st.first = &ov
		v.streamsWithViolation[st.id] = st
	}
	if len(v.orderDetails) < v.details {
		v.orderDetails = append(v.orderDetails, ov)
	}
}

// RestartViolation is an ID not above every ID a lower incarnation of the
// same worker issued.
type RestartViolation struct {
	// Issuer issued ID.
	Issuer IssuerRef
	// ID is the offending ID.
	ID generator.ID
	// Floor is the largest ID a lower incarnation issued, FloorIssuer the
	// incarnation that issued it.
	Floor       generator.ID
	FloorIssuer IssuerRef
	// RefStart is the reference time the call began.
	RefStart int64
}

func (v *Verifier) restartViolation(is *issuer, id generator.ID, o *Observation) {
	v.restViol++
	is.restViol++
	if len(v.restartDetails) < v.details {
		v.restartDetails = append(v.restartDetails, RestartViolation{
			Issuer: is.ref, ID: id, Floor: generator.ID(is.floor),
			FloorIssuer: v.issuers[is.floorBy].ref, RefStart: o.RefStart,
		})
	}
}

// Duplicate is an ID issued twice.
type Duplicate struct {
	// ID is the repeated ID.
	ID generator.ID
	// First issued ID before Second did. They may be the same issuer (a
	// generator that repeated itself, for example after a clock rewind).
	First, Second IssuerRef
	// FirstRefStart and FirstRefEnd bracket, in reference Unix ns, the
	// call that first issued ID: exact when that call is the one that
	// repeated it, otherwise as wide as the Verifier's TimeResolution
	// records (see Config.TimeResolution).
	FirstRefStart, FirstRefEnd int64
	// SecondRefStart and SecondRefEnd bracket the repeating call.
	SecondRefStart, SecondRefEnd int64
	// Stream is the repeating call's stream (0: none).
	Stream uint64
	// Windows names the fault windows holding SecondRefStart.
	Windows []string
}

func (v *Verifier) duplicate(is *issuer, id generator.ID, i int, o *Observation) {
	first := v.issuers[v.lastFirst]
	v.dups++
	is.dups++
	v.pairs[[2]IssuerID{first.id, is.id}]++
	if len(v.dupDetails) < v.details {
		d := Duplicate{ID: id, First: first.ref, Second: is.ref,
			SecondRefStart: o.RefStart, SecondRefEnd: o.RefEnd, Stream: o.Stream}
		// When the same call issued id earlier and that occurrence was
		// fresh, this call is the first issue.
		inCall := false
		if first == is {
			if j := slices.Index(o.IDs[:i], id); j >= 0 && !slices.Contains(v.dupAt, j) {
				inCall = true
			}
		}
		if inCall {
			d.FirstRefStart, d.FirstRefEnd = o.RefStart, o.RefEnd
		} else {
			d.FirstRefStart, d.FirstRefEnd = first.bracket(id)
		}
		v.dupDetails = append(v.dupDetails, d)
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
	if is.hasCur {
		b := &is.cur
		span := max(o.RefEnd, b.refEnd) - min(o.RefStart, b.refStart)
		if (span < v.blkSpan || b.n < minBlockIDs) && span < maxBlockSpans*v.blkSpan {
			if lo < b.min {
				b.min = lo
				if k := len(is.blocks); k > 0 && lo <= is.blocks[k-1].max {
					is.monotone = false
				}
			}
			b.max = max(b.max, hi)
			b.refStart, b.refEnd = min(b.refStart, o.RefStart), max(b.refEnd, o.RefEnd)
			b.n += min(n, math.MaxUint32-b.n)
			return
		}
		is.blocks = append(is.blocks, *b)
		if lo <= b.max {
			is.monotone = false
		}
	}
	is.cur, is.hasCur = block{min: lo, max: hi, refStart: o.RefStart, refEnd: o.RefEnd, n: n}, true
}

// leadLag records n IDs of one tick issued in call o.
func (v *Verifier) leadLag(is *issuer, tick int64, n uint64, o *Observation) {
	// Start of the tick, saturating so that its end still fits in int64.
	e := is.epochNs
	if tick > is.maxTick {
		e = math.MaxInt64 - is.tickNs
	} else {
		e += tick * is.tickNs
	}
	lead := subSat(e, o.RefEnd)
	lag := subSat(o.RefStart, e+is.tickNs)
	v.lead.add(lead, n)
	v.lag.add(lag, n)
	is.maxLead, is.maxLg = max(is.maxLead, lead), max(is.maxLg, lag)
	for _, i := range v.winHit {
		v.windows[i].lead.add(lead, n)
		v.windows[i].lag.add(lag, n)
	}
}

// subSat returns a-b, saturating at the int64 limits.
func subSat(a, b int64) int64 {
	d := a - b
	if (a >= 0) != (b >= 0) && (d >= 0) != (a >= 0) {
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}

// floorDiv divides rounding toward minus infinity (d > 0).
func floorDiv(n, d int64) int64 {
	q := n / d
	if n%d < 0 {
		q--
	}
	return q
}

// Progress is a cheap snapshot for live display.
type Progress struct {
	// Calls and IDs count what was observed; the rest count findings, as
	// in Result.
	Calls, IDs, Duplicates, OrderViolations, RestartViolations uint64
}

// Progress returns the running totals in constant time.
func (v *Verifier) Progress() Progress {
	return Progress{Calls: v.calls.Total, IDs: v.ids, Duplicates: v.dups, OrderViolations: v.orderViol, RestartViolations: v.restViol}
}

// Result is everything a Verifier found. Lists are in a deterministic
// order, so equal inputs give equal Results.
type Result struct {
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
	// MinID and MaxID bound its IDs (0 when none).
	MinID, MaxID generator.ID
	// MaxLead, MaxLag and MaxWait are its extremes (see Result).
	MaxLead, MaxLag, MaxWait time.Duration
	// LongestGap is the longest time between its first and last call in
	// which none of its calls succeeded.
	LongestGap time.Duration
	// FirstRef and LastRef bound its calls.
	FirstRef, LastRef int64
}

// Result computes the figures so far. It costs time in proportion to the
// number of issuers, windows and success buckets, not IDs; the Verifier
// can keep observing afterwards.
func (v *Verifier) Result() Result {
	r := Result{
		Calls: v.calls, IDs: v.ids, Duplicates: v.dups, Unique: v.ids - v.dups,
		OrderViolations: v.orderViol, Streams: uint64(len(v.streams)),
		RestartViolations: v.restViol,
		Lead:              v.lead.dist(), Lag: v.lag.dist(), Wait: v.wait.dist(),
		MaxWaitAt: v.maxWaitAt, FirstRef: v.firstRef, LastRef: v.lastRef,
		OrderDetails:   slices.Clone(v.orderDetails),
		RestartDetails: slices.Clone(v.restartDetails),
	}
	if v.maxWait > 0 {
		r.MaxWaitIssuer = v.issuers[v.maxWaitBy].ref
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
	if v.seenRef {
		r.LongestGap = v.succ.longestGap(v.firstRef, v.lastRef, v.gapRes)
	}
	for _, w := range v.windows {
		wr := WindowResult{Window: w.Window, Calls: w.calls, Lead: w.lead.dist(), Lag: w.lag.dist(), Wait: w.wait.dist(),
			Duplicates: w.dups, OrderViolations: w.order, RestartViolations: w.restv}
		if v.seenRef {
			wr.LongestGap = v.succ.longestGap(max(w.Start, v.firstRef), min(w.End, v.lastRef), v.gapRes)
		}
		for _, is := range v.issuers {
			if !is.seen {
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
		ir := IssuerResult{IssuerRef: is.ref, Calls: is.calls, IDs: is.ids, Duplicates: is.dups, RestartViolations: is.restViol,
			MaxLead: time.Duration(is.maxLead), MaxLag: time.Duration(is.maxLg), MaxWait: is.maxWait,
			FirstRef: is.firstRef, LastRef: is.lastRef}
		if is.hasIDs {
			ir.MinID, ir.MaxID = is.minID, is.maxID
		}
		if is.seen {
			ir.LongestGap = is.succ.longestGap(is.firstRef, is.lastRef, v.gapRes)
		}
		r.Issuers = append(r.Issuers, ir)
	}
	return r
}

func cmpRef(a, b IssuerRef) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Incarnation, b.Incarnation), cmp.Compare(a.Worker, b.Worker))
}

// bytes estimates the Verifier's memory: Sets, time records, gap bitmaps
// and histograms.
func (v *Verifier) bytes() uint64 {
	b := v.succ.bytes()
	hb := func(h *hist) uint64 { return uint64(cap(h.counts)) * 8 }
	b += hb(&v.lead) + hb(&v.lag) + hb(&v.wait)
	for _, w := range v.windows {
		b += hb(&w.lead) + hb(&w.lag) + hb(&w.wait)
	}
	for _, is := range v.issuers {
		b += is.set.Bytes() + uint64(cap(is.blocks))*uint64(unsafe.Sizeof(block{})) + is.succ.bytes()
	}
	b += uint64(len(v.streams)) * 96
	return b
}
