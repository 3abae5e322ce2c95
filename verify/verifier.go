package verify

import (
	"errors"
	"fmt"
	"math"
	"time"

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
	// holder's, so the restart invariant covers it. For kinds without a
	// worker field (UUIDs, ULIDs, strings) Worker only groups the
	// incarnations of one node.
	Name        string
	Incarnation int
	Worker      int64
	// Layout is the layout of the issuer's Snowflake IDs; zero means
	// Config.Layout. Other kinds ignore it.
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
	// call's order is not checked. Kinds without an order ignore it.
	Stream uint64
	// RefStart and RefEnd bracket the call in reference (true) time, Unix
	// ns. RefEnd below RefStart counts as RefStart.
	RefStart, RefEnd int64
	// IDs are the Snowflake IDs the call returned, in the order returned.
	// A failed call may still carry the IDs it returned before failing.
	// Observe does not retain the slice. IDs of other kinds go to
	// ObserveWide or ObserveStrings, which leave IDs empty.
	IDs []generator.ID
	// Outcome is how the call ended.
	Outcome Outcome
	// Wait is how long the call waited inside the generator (rewind or
	// sequence exhaustion), as the target reports it.
	Wait time.Duration
	// OwnOffset is the issuer's own clock minus reference time at RefEnd
	// (negative after a rewind): the lead over the issuer's own clock
	// (Result.MaxLeadOwn) is measured against RefEnd+OwnOffset. Zero
	// means its clock agrees with reference time.
	OwnOffset time.Duration
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
	// Kind is the kind of ID checked; the zero value is KindSnowflake.
	Kind Kind
	// Layout is the layout of issuers registered without one, and the one
	// whose node field groups Snowflake IDs for duplicate attribution.
	// Zero means generator.DefaultLayout().
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
// One Verifier checks one Kind of ID (Config.Kind). Snowflakes, the
// harness's own IDs, take the 64-bit path (Observe): compressed per-issuer
// Sets, no allocation per ID. UUIDs and ULIDs take the 128-bit path
// (ObserveWide): one hash table holding each ID, its first issuer and
// when, about 24 bytes plus 11 to 22 bytes of index per ID, nothing
// allocated per ID beyond the table's doubling. Strings (ObserveStrings)
// are copied once into an arena, hashed, and compared byte for byte, so a
// hash collision is never a false duplicate.
//
// It never reads a clock: all times come in Observations. Memory for
// Snowflakes is the Set's few bytes per distinct ID, plus at most 56 bytes
// per 32 IDs or per TimeResolution of each issuer's calls for the time
// records (about 1.8 bytes per ID at one ID per ms), plus bounded
// histograms; for 128-bit IDs about 35 to 46 bytes per ID; for strings
// about 31 to 42 plus their length. A Verifier is for one goroutine; see Concurrent
// for many.
type Verifier struct {
	kind    Kind
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
	clocks  map[tickClock]*tickClock

	// Tallies: cur is the current epoch's (see checkEpoch), run the
	// folded epochs'; windows hold their folded epochs'.
	cur, run         tally
	windows          []window
	active           []int
	epochLo, epochHi int64

	bucket, bucketStart int64 // last gap bucket computed and its start (ns), when bucketOK
	bucketOK            bool

	dupDetails           []Duplicate
	orderDetails         []OrderViolation
	restartDetails       []RestartViolation
	pairs                map[[2]IssuerID]uint64
	streamsWithViolation map[uint64]*stream
	lastFirst            IssuerID // first issuer of the duplicate add just found
	dupAt                []int    // scratch: positions of duplicates in the current call

	// The wide kinds' first issues (see wide.go).
	wset  set128
	sset  stringSet
	spans []span
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

// issuer is the state of one node incarnation. The fields a call of one
// Snowflake ID reads and writes fill the first four cache lines (the
// object is line-aligned by its size class), in this order, so that with
// many issuers interleaved a call misses on as few lines as can be; a
// layout test keeps them there.
type issuer struct {
	// Line 0.
	ok, ids           uint64
	firstRef, lastRef int64   // MaxInt64, MinInt64 before the first call
	lastStr           *stream // the stream of its last call
	lastNode          uint64  // node field of its last ID
	minID, maxID      generator.ID

	// Line 1.
	floor        int64      // largest ID (as int64, above -1) any lower incarnation issued
	clk          *tickClock // how its IDs embed time
	succ         buckets
	floorBy      IssuerID // who issued floor (or floorW); -1: none
	solo         bool     // the owner list of lastNode holds only this issuer
	hasIDs       bool
	hasSuccessor bool
	monotone     bool // blocks and cur ordered by ID with no overlap: binary search works
	hasCur       bool

	// Lines 2 and 3.
	cur block // the open time record
	set Set   // its top ends line 2, its pending IDs fill line 3

	// Per 128-bit ID of an ordered kind.
	minW, maxW, floorW ID128

	// Rarely touched.
	ref       IssuerRef
	id        IssuerID
	failed    [numOutcomes]uint64 // failed calls by outcome
	dups      uint64
	restViol  uint64
	maxLead   int64
	maxLeadOw int64 // lead over its own clock
	maxLag    int64
	maxWait   time.Duration
	group     *workerGroup
	lastOwner *ownerList
	blocks    []block // closed time records
}

// tickClock is how an issuer's IDs embed time: tick t starts at
// epochNs + t*tickNs, and a Snowflake's tick is its bits above shift.
// Issuers of one layout share one.
type tickClock struct {
	epochNs, tickNs int64
	maxTick         int64 // the last tick whose end fits in int64
	shift           uint8
}

// calls returns the issuer's calls as a Calls.
func (is *issuer) calls() Calls {
	c := Calls{OK: is.ok, Refused: is.failed[OutcomeRefused], WaitExceeded: is.failed[OutcomeWaitExceeded], Errors: is.failed[OutcomeError]}
	c.Total = c.OK + c.Refused + c.WaitExceeded + c.Errors
	return c
}

// seen reports whether the issuer has had a call.
func (is *issuer) seen() bool { return is.firstRef <= is.lastRef }

type workerGroup struct{ members []IssuerID }

type stream struct {
	id         uint64
	last       generator.ID
	lastW      ID128
	has        bool
	calls, ids uint64
	violations uint64
	first      *OrderViolation
}

type window struct {
	Window
	t tally // the folded epochs in which the window was active
}

// New returns a Verifier for cfg. It panics if cfg.Kind is unknown.
func New(cfg Config) *Verifier {
	if cfg.Kind >= numKinds {
		panic(fmt.Sprintf("verify: unknown kind %d", cfg.Kind))
	}
	l := cfg.Layout
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	v := &Verifier{
		kind:    cfg.Kind,
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
		clocks:  make(map[tickClock]*tickClock),
		pairs:   make(map[[2]IssuerID]uint64),
		epochLo: 1,

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

// Kind returns the kind of ID the Verifier checks.
func (v *Verifier) Kind() Kind { return v.kind }

// Issuer registers a node incarnation using Config.Layout; see Register.
func (v *Verifier) Issuer(name string, incarnation int, worker int64) IssuerID {
	return v.Register(IssuerSpec{Name: name, Incarnation: incarnation, Worker: worker})
}

// Register registers a node incarnation and returns its ID. Registering
// the same Name and Incarnation again returns the same ID; it panics if
// the Worker differs. For ordered kinds, every ID an issuer issues must be
// greater than every ID that issuers of the same Worker with a lower
// Incarnation issued (the restart invariant).
func (v *Verifier) Register(s IssuerSpec) IssuerID {
	ref := IssuerRef{Name: s.Name, Incarnation: s.Incarnation, Worker: s.Worker}
	key := IssuerRef{Name: s.Name, Incarnation: s.Incarnation}
	if id, ok := v.byName[key]; ok {
		if got := v.issuers[id].ref; got.Worker != s.Worker {
			panic(fmt.Sprintf("verify: issuer %s registered with worker %d, now %d", got, got.Worker, s.Worker))
		}
		return id
	}
	id := IssuerID(len(v.issuers))
	is := &issuer{
		ref:      ref,
		id:       id,
		floor:    -1,
		floorBy:  -1,
		monotone: true,
		lastNode: math.MaxUint64,
		firstRef: math.MaxInt64,
		lastRef:  math.MinInt64,
	}
	c := tickClock{tickNs: 1} // no embedded time
	switch {
	case v.kind == KindSnowflake:
		l := s.Layout
		if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
			l = v.layout
		}
		is.set.init(l)
		t0 := l.TimeOf(0)
		c = tickClock{epochNs: t0.UnixNano(), tickNs: max(int64(l.TimeOf(1).Sub(t0)), 1), shift: uint8(min(l.NodeBits+l.SeqBits, 63))}
	case v.kind.Timed(): // UUIDv7, ULID: Unix milliseconds
		c = tickClock{tickNs: int64(time.Millisecond)}
	}
	c.maxTick = (math.MaxInt64 - c.tickNs - max(c.epochNs, 0)) / c.tickNs
	if is.clk = v.clocks[c]; is.clk == nil {
		is.clk = &c
		v.clocks[c] = is.clk
	}

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
			if m.hasIDs {
				v.raiseFloor(is, m)
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

// raiseFloor raises is's restart floor to m's largest ID, if greater (m
// is a lower incarnation of the same worker, with IDs).
func (v *Verifier) raiseFloor(is, m *issuer) {
	if v.kind == KindSnowflake {
		if int64(m.maxID) > is.floor {
			is.floor, is.floorBy = int64(m.maxID), m.id
		}
	} else if is.floorBy < 0 || is.floorW.less(m.maxW) {
		is.floorW, is.floorBy = m.maxW, m.id
	}
}

// FaultWindow adds a window and returns its ID. A window counts the calls
// observed after it is added whose RefStart falls inside it, so add
// windows before feeding their calls (the harness knows its schedule);
// gap figures and duplicate details are computed over all windows at
// Result time regardless.
func (v *Verifier) FaultWindow(name string, start, end int64) WindowID {
	v.invalidateEpoch()
	v.windows = append(v.windows, window{Window: Window{Name: name, Start: start, End: end}})
	return WindowID(len(v.windows) - 1)
}

// EndWindow sets the end of a window added open (End math.MaxInt64).
func (v *Verifier) EndWindow(id WindowID, end int64) {
	v.invalidateEpoch()
	v.windows[id].End = end
}

// Observe checks one call of Snowflake IDs and reports what it found. It
// panics if o.Issuer was not registered, or if o carries IDs and the
// Verifier's Kind is not KindSnowflake.
func (v *Verifier) Observe(o Observation) Found {
	if len(o.IDs) > 0 && v.kind != KindSnowflake {
		panic(fmt.Sprintf("verify: Snowflake IDs observed by a %s Verifier", v.kind))
	}
	is := v.call(&o)
	switch len(o.IDs) {
	case 0:
		return Found{}
	case 1:
		return v.observeOne(is, &o, o.IDs[0])
	}
	return v.observeIDs(is, &o)
}

// ObserveWide checks one call of 128-bit IDs (UUIDs or ULIDs): o
// describes the call, with o.IDs empty, and ids are its IDs in the order
// returned. It does not retain ids. It panics as Observe does, or if the
// Verifier's Kind is not a 128-bit one.
func (v *Verifier) ObserveWide(o Observation, ids []ID128) Found {
	if len(o.IDs) > 0 || len(ids) > 0 && !v.kind.wide() {
		panic(fmt.Sprintf("verify: %d 128-bit and %d Snowflake IDs observed by a %s Verifier", len(ids), len(o.IDs), v.kind))
	}
	is := v.call(&o)
	if len(ids) == 0 {
		return Found{}
	}
	return v.observeWide(is, &o, ids)
}

// ObserveStrings checks one call of string IDs: o describes the call, with
// o.IDs empty, and ids are its IDs. It copies what it keeps, so ids may
// point into a reused buffer. It panics as Observe does, or if the
// Verifier's Kind is not KindString.
func (v *Verifier) ObserveStrings(o Observation, ids []string) Found {
	if len(o.IDs) > 0 || len(ids) > 0 && v.kind != KindString {
		panic(fmt.Sprintf("verify: %d string and %d Snowflake IDs observed by a %s Verifier", len(ids), len(o.IDs), v.kind))
	}
	is := v.call(&o)
	if len(ids) == 0 {
		return Found{}
	}
	return v.observeStrings(is, &o, ids)
}

// call runs the per-call checks of o (whose RefEnd it clamps) and returns
// its issuer.
func (v *Verifier) call(o *Observation) *issuer {
	if o.Issuer < 0 || int(o.Issuer) >= len(v.issuers) {
		panic(fmt.Sprintf("verify: unknown issuer %d", o.Issuer))
	}
	is := v.issuers[o.Issuer]
	start, end := o.RefStart, max(o.RefEnd, o.RefStart)
	o.RefEnd = end
	if start < v.epochLo || start >= v.epochHi {
		v.checkEpoch(start)
	}
	out := o.Outcome
	if out >= numOutcomes {
		out = OutcomeError
	}
	v.cur.calls[out]++
	is.firstRef, is.lastRef = min(is.firstRef, start), max(is.lastRef, end)
	if out == OutcomeOK {
		is.ok++
		// Calls arrive in about time order: reuse the last bucket number.
		// Rather than divide: the test is modular, so it stays exact
		// where bucketStart wrapped around for absurd times.
		if !v.bucketOK || uint64(end-v.bucketStart) >= uint64(v.gapRes) {
			v.bucket = floorDiv(end, v.gapRes)
			v.bucketStart, v.bucketOK = v.bucket*v.gapRes, true
		}
		is.succ.add(v.bucket)
	} else {
		is.failed[out]++
	}
	if o.Wait > 0 {
		v.recordWait(is, o.Wait, start)
	}
	return is
}

// recordWait records a call's positive wait.
func (v *Verifier) recordWait(is *issuer, w time.Duration, start int64) {
	t := &v.cur
	t.wait.add(int64(w), 1)
	if w > t.maxWait {
		t.maxWait, t.maxWaitBy, t.maxWaitAt = w, is.id, start
	}
	is.maxWait = max(is.maxWait, w)
}

// stream returns the state of stream id for a call of is, creating it.
func (v *Verifier) stream(is *issuer, id uint64, n int) *stream {
	st := is.lastStr
	if st == nil || st.id != id {
		st = v.streams[id]
		if st == nil {
			st = &stream{id: id}
			v.streams[id] = st
		}
		is.lastStr = st
	}
	st.calls++
	st.ids += uint64(n)
	return st
}

// OrderViolation is an ID not above its predecessor in a sequential
// stream.
type OrderViolation struct {
	// Stream is the stream, Issuer the node that issued ID.
	Stream uint64
	Issuer IssuerRef
	// Prev is the stream's previous ID, ID the one not above it.
	Prev, ID Value
	// RefStart is the reference time the call began.
	RefStart int64
}

func (v *Verifier) orderViolation(st *stream, is *issuer, prev, id Value, o *Observation) {
	v.cur.order++
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
	ID Value
	// Floor is the largest ID a lower incarnation issued, FloorIssuer the
	// incarnation that issued it.
	Floor       Value
	FloorIssuer IssuerRef
	// RefStart is the reference time the call began.
	RefStart int64
}

func (v *Verifier) restartViolation(is *issuer, id, floor Value, o *Observation) {
	v.cur.restv++
	is.restViol++
	if len(v.restartDetails) < v.details {
		v.restartDetails = append(v.restartDetails, RestartViolation{
			Issuer: is.ref, ID: id, Floor: floor, FloorIssuer: v.issuers[is.floorBy].ref, RefStart: o.RefStart,
		})
	}
}

// Duplicate is an ID issued twice.
type Duplicate struct {
	// ID is the repeated ID.
	ID Value
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

// duplicate counts a duplicate that is repeated of first, and returns a
// record to fill in, or nil when details are full.
func (v *Verifier) duplicate(is *issuer, first IssuerID, o *Observation) *Duplicate {
	v.cur.dups++
	is.dups++
	v.pairs[[2]IssuerID{first, is.id}]++
	if len(v.dupDetails) >= v.details {
		return nil
	}
	v.dupDetails = append(v.dupDetails, Duplicate{First: v.issuers[first].ref, Second: is.ref,
		SecondRefStart: o.RefStart, SecondRefEnd: o.RefEnd, Stream: o.Stream})
	return &v.dupDetails[len(v.dupDetails)-1]
}

// off reports whether tick lies off the reference span [start, end] of a
// call, so that its IDs have a lead or a lag; false, the common case,
// costs a multiply and three compares. Up to maxTick e+tickNs fits in
// int64, so they cannot overflow (ticks are never negative).
func (c *tickClock) off(tick, start, end int64) bool {
	e := c.epochNs + tick*c.tickNs
	return tick > c.maxTick || e > end || start > e+c.tickNs
}

// offEnd is the end bound the off test uses for call o: its RefEnd, or
// its end on the issuer's own clock when that is behind, so that a lead
// over the issuer's own clock is never skipped.
func offEnd(o *Observation) int64 {
	if o.OwnOffset < 0 {
		return o.RefEnd + int64(o.OwnOffset)
	}
	return o.RefEnd
}

// leadLag records the lead or lag of n IDs of one tick issued in call o:
// how far the tick began after the call ended (lead; and after it ended
// on the issuer's own clock, the lead over its own clock) or ended before
// it began (lag).
func (v *Verifier) leadLag(is *issuer, tick int64, n uint64, o *Observation) {
	// Start of the tick, saturating so that its end still fits in int64.
	c := is.clk
	e := c.epochNs
	if tick > c.maxTick {
		e = math.MaxInt64 - c.tickNs
	} else {
		e += tick * c.tickNs
	}
	if lead := subSat(e, o.RefEnd); lead > 0 {
		v.cur.lead.add(lead, n)
		is.maxLead = max(is.maxLead, lead)
	}
	if own := subSat(e, o.RefEnd+int64(o.OwnOffset)); own > 0 {
		v.cur.maxLeadOwn = max(v.cur.maxLeadOwn, own)
		is.maxLeadOw = max(is.maxLeadOw, own)
	}
	if lag := subSat(o.RefStart, e+c.tickNs); lag > 0 {
		v.cur.lag.add(lag, n)
		is.maxLag = max(is.maxLag, lag)
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
	r, c := &v.run, &v.cur
	return Progress{Calls: r.total() + c.total(), IDs: r.ids + c.ids, Duplicates: r.dups + c.dups,
		OrderViolations: r.order + c.order, RestartViolations: r.restv + c.restv}
}
