// Package sink is the verification sink: a Verifier that any load tool
// (autocannon, wrk, vegeta, k6, a shell loop) streams the IDs it received
// to, over HTTP or on standard input, with live counts, Prometheus metrics
// and a CI verdict. The protocol is in docs/verify-sink.md and on Handler.
package sink

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unsafe"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

// Config configures a Sink. The zero value checks Snowflakes in the
// default layout.
type Config struct {
	// Kind is the kind of ID received.
	Kind verify.Kind
	// Layout is the Snowflakes' layout (zero: generator.DefaultLayout()):
	// it decodes their time for lead and lag, and their node field names
	// the issuer of IDs sent without one.
	Layout generator.Layout
	// Now returns the reference time, Unix ns, at which IDs are received:
	// lead and lag are measured against it (an ID whose embedded time is
	// after its receipt was certainly ahead). Nil means no reference time:
	// every call is at time 0 and lead and lag are meaningless.
	Now func() int64
	// MaxDetails caps the detailed findings kept (zero: 100).
	MaxDetails int
	// MaxErrors caps the line errors kept (zero: 100); all are counted.
	MaxErrors int
	// MaxLineBytes bounds one line (zero: 4 MiB, room for a JSON array of
	// tens of thousands of IDs); MaxStreams and MaxIssuers bound the
	// distinct stream labels and issuers (zero: 100,000 each).
	MaxLineBytes, MaxStreams, MaxIssuers int
}

// Labels name where a batch's IDs belong.
type Labels struct {
	// Stream labels a sequential stream (for example one connection of a
	// load tool, which sends its next request after the previous answer):
	// batches of one stream must be sent in order, and for ordered kinds
	// each ID must be above the stream's previous one. Empty: no stream.
	Stream string
	// Issuer names the node that issued the IDs, and Incarnation its
	// restart count; empty means, for Snowflakes, "node-N" from each ID's
	// node field (so IDs of several nodes may share a batch), and "sink"
	// for other kinds.
	Issuer      string
	Incarnation int
}

// maxLabel bounds a stream or issuer label.
const maxLabel = 200

// Sink is a Verifier fed with batches of lines. It is safe for concurrent
// use: batches are parsed concurrently and verified one at a time.
type Sink struct {
	cfg    Config
	parser *Parser
	// bufSize is the buffer lines are read through (readBufSize; tests
	// make it small to reach the paths of long lines).
	bufSize int
	mu      struct {
		sync.Mutex
		v        *verify.Verifier
		streams  map[string]uint64
		issuers  map[Labels]verify.IssuerID
		names    map[string]int64 // issuer name -> its worker group
		nodes    map[int64]verify.IssuerID
		batches  int
		badLines uint64
		errs     []LineError
		// incomplete counts batches that stopped part way, incompletes
		// keeps the first; refused counts requests refused unread.
		incomplete  uint64
		incompletes []IncompleteError
		refused     uint64
	}
}

// New returns a Sink for cfg; it checks the labels' bounds and the kind.
func New(cfg Config) (*Sink, error) {
	if cfg.Kind >= verify.Kind(len(verify.Kinds())) {
		return nil, fmt.Errorf("sink: unknown kind %d", cfg.Kind)
	}
	if cfg.Layout.TimeBits == 0 && cfg.Layout.NodeBits == 0 && cfg.Layout.SeqBits == 0 {
		cfg.Layout = generator.DefaultLayout()
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	for _, b := range []struct {
		name string
		v    *int
		def  int
	}{{"MaxLineBytes", &cfg.MaxLineBytes, 4 << 20}, {"MaxStreams", &cfg.MaxStreams, 100_000}, {"MaxIssuers", &cfg.MaxIssuers, 100_000},
		{"MaxErrors", &cfg.MaxErrors, 100}} {
		if *b.v < 0 {
			return nil, fmt.Errorf("sink: %s = %d, want >= 0", b.name, *b.v)
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return 0 }
	}
	s := &Sink{cfg: cfg, parser: NewParser(cfg.Kind), bufSize: readBufSize}
	s.mu.v = verify.New(verify.Config{Kind: cfg.Kind, Layout: cfg.Layout, MaxDetails: cfg.MaxDetails})
	s.mu.streams = map[string]uint64{}
	s.mu.issuers = map[Labels]verify.IssuerID{}
	s.mu.names = map[string]int64{}
	s.mu.nodes = map[int64]verify.IssuerID{}
	return s, nil
}

// Kind returns the kind of ID the sink checks.
func (s *Sink) Kind() verify.Kind { return s.cfg.Kind }

// BatchResult is what one batch carried and what the sink found in it.
type BatchResult struct {
	// Batch numbers the batch, from 1.
	Batch int `json:"batch"`
	// IDs counts the valid IDs in it; Duplicates, OrderViolations and
	// RestartViolations what the Verifier found among them.
	IDs               int `json:"ids"`
	Duplicates        int `json:"duplicates"`
	OrderViolations   int `json:"order_violations"`
	RestartViolations int `json:"restart_violations"`
	// BadLines counts its lines that were not valid (their IDs are not
	// verified); Errors are the first of them.
	BadLines int         `json:"bad_lines"`
	Errors   []LineError `json:"-"`
}

// Source says where a batch of lines came from.
type Source struct {
	Labels
	// FirstLine is the number of the batch's first line (0 means 1): a
	// stream read in pieces numbers its lines across them.
	FirstLine int
	// Request marks a batch that is one request, so that its errors name
	// the batch number as well as the line.
	Request bool
}

// IncompleteError is a batch that stopped part way: reading its input
// failed (the client went away, a deadline, a size bound) or its node
// fields needed more issuers than MaxIssuers. Its lines before Line were
// verified and counted; Line and the lines after it were not. The batch
// counts in Totals.Incomplete.
type IncompleteError struct {
	// Batch is the request's batch number (0 for standard input); First
	// the number of the batch's first line.
	Batch, First int
	// Line is the first line not verified, numbered as LineError.Line;
	// Byte where reading stopped, counted from 0 at the batch's first
	// byte (for a bound, the first byte of Line).
	Line int
	Byte int64
	// Err is the cause: the reader's error or the bound's.
	Err error
}

func (e *IncompleteError) Error() string {
	where := "sink: "
	if e.Batch > 0 {
		where = fmt.Sprintf("sink: batch %d: ", e.Batch)
	}
	done := "no line was verified"
	if e.Line > e.First {
		done = fmt.Sprintf("lines %d to %d were verified", e.First, e.Line-1)
	}
	return fmt.Sprintf("%sstopped at line %d, byte %d: %v; %s, line %d and after were not", where, e.Line, e.Byte, e.Err, done, e.Line)
}

// Unwrap returns the cause.
func (e *IncompleteError) Unwrap() error { return e.Err }

// Ingest verifies one batch of lines, as received now: body holds whole
// lines (the last may lack its newline). It is IngestFrom over body.
func (s *Sink) Ingest(body []byte, src Source) (BatchResult, error) {
	return s.IngestFrom(bytes.NewReader(body), src)
}

// IngestFrom verifies the lines of r as one batch, as they arrive. It
// reads r through a 64 KiB buffer and verifies its IDs every few thousand
// (chunkIDs), so its memory does not grow with r's length: a line longer
// than the buffer is gathered whole up to MaxLineBytes and its rest
// skipped, and a line's IDs are verified together. The lines that parse
// are verified even when others do not; every bad line is counted and
// the first are kept. IDs are verified as received at the moment their
// chunk is verified (Config.Now).
//
// The error is nil when r ended (io.EOF); a label error when a label is
// out of bounds (nothing verified); or an *IncompleteError when reading r
// failed part way or a bound on issuers was reached: the result counts
// what was verified before it.
func (s *Sink) IngestFrom(r io.Reader, src Source) (BatchResult, error) {
	b, err := s.begin(src, false)
	if err != nil {
		return BatchResult{}, err
	}
	_, err = s.read(r, b)
	return b.res, err
}

// Consume verifies the lines of r as they arrive, until r ends: what has
// arrived is verified whenever reading would wait (so a pipe is verified
// live) or a chunk has gathered, each such piece a batch. Lines are
// numbered across the whole input; a line over MaxLineBytes is reported
// as such and its rest skipped. It returns the number of lines, and nil
// at the end of r, else an *IncompleteError or a label error; bad lines
// are counted, not returned.
func (s *Sink) Consume(r io.Reader, l Labels) (lines int, err error) {
	b, err := s.begin(Source{Labels: l}, true)
	if err != nil {
		return 0, err
	}
	return s.read(r, b)
}

// Chunking and buffering of the lines read.
const (
	// chunkIDs is how many IDs a batch gathers before verifying them.
	chunkIDs = 8192
	// chunkBytes bounds the bytes of string IDs gathered.
	chunkBytes = 256 << 10
	// readBufSize is the buffer lines are read through.
	readBufSize = 64 << 10
)

// batch is a batch being read: its labels resolved, its counts.
type batch struct {
	src    Source
	live   bool // standard input: each verified piece is a batch
	called bool // a piece was verified
	stream uint64
	// issuer is the batch's issuer, unless byNode: Snowflakes without an
	// issuer label are issued by "node-N" after their node field.
	issuer verify.IssuerID
	byNode bool
	res    BatchResult
}

// begin checks a batch's labels and registers its stream and issuer,
// before anything is read, and numbers the batch.
func (s *Sink) begin(src Source, live bool) (*batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := src.Labels
	if err := s.checkLabelsLocked(l); err != nil {
		return nil, err
	}
	b := &batch{src: src, live: live, byNode: l.Issuer == "" && s.cfg.Kind == verify.KindSnowflake}
	if !b.byNode {
		if l.Issuer == "" {
			l.Issuer = "sink"
		}
		is, err := s.issuerLocked(l)
		if err != nil {
			return nil, err
		}
		b.issuer = is
	}
	if l.Stream != "" {
		var ok bool
		if b.stream, ok = s.mu.streams[l.Stream]; !ok {
			b.stream = uint64(len(s.mu.streams) + 1)
			s.mu.streams[l.Stream] = b.stream
		}
	}
	if !live { // a live batch is numbered as each piece is verified
		s.mu.batches++
		b.res.Batch = s.mu.batches
	}
	return b, nil
}

// errBatch is the batch number errors name: 0 unless the batch is a
// request.
func (b *batch) errBatch() int {
	if b.src.Request {
		return b.res.Batch
	}
	return 0
}

// reader is the state of one batch being read, kept in a pool.
type reader struct {
	br    *bufio.Reader
	long  []byte // a line longer than br's buffer, gathered
	ids   IDs    // the chunk's IDs
	arena []byte // the bytes of its string IDs
	bad   int    // its bad lines
	errs  []LineError
}

var readers = sync.Pool{New: func() any { return &reader{br: bufio.NewReaderSize(nil, readBufSize)} }}

// getReader returns a reader of r through size bytes.
func getReader(r io.Reader, size int) *reader {
	if size != readBufSize {
		return &reader{br: bufio.NewReaderSize(r, size)}
	}
	rd := readers.Get().(*reader)
	rd.br.Reset(r)
	return rd
}

// putReader returns rd to the pool, dropping what a long line grew.
func putReader(rd *reader) {
	if rd.br.Size() != readBufSize {
		return
	}
	rd.br.Reset(nil)
	rd.clear()
	if cap(rd.long) > readBufSize {
		rd.long = nil
	}
	if max(cap(rd.ids.Snowflakes), cap(rd.ids.Wide), cap(rd.ids.Strings)) > 2*chunkIDs {
		rd.ids = IDs{}
	}
	if cap(rd.arena) > 2*chunkBytes {
		rd.arena = nil
	}
	readers.Put(rd)
}

// clear empties the chunk.
func (rd *reader) clear() {
	rd.ids.reset()
	rd.arena, rd.bad, rd.errs = rd.arena[:0], 0, rd.errs[:0]
}

// nextLine returns the next line without its newline, valid until the
// next call: all of it, or its first max+1 bytes when it is longer than
// max. n counts the bytes it consumed, the newline too. It returns
// io.EOF after the last line; any other error is reading's, and n then
// counts the bytes of the unfinished line that arrived.
func (rd *reader) nextLine(max int) (line []byte, n int64, err error) {
	rd.long = rd.long[:0]
	long := false
	for {
		frag, err := rd.br.ReadSlice('\n')
		n += int64(len(frag))
		switch {
		case err == nil || errors.Is(err, io.EOF) && n > 0:
			if err == nil {
				frag = frag[:len(frag)-1]
			}
			if !long {
				return frag, n, nil
			}
			rd.long = append(rd.long, frag[:min(len(frag), max+1-len(rd.long))]...)
			return rd.long, n, nil
		case errors.Is(err, bufio.ErrBufferFull):
			long = true
			rd.long = append(rd.long, frag[:min(len(frag), max+1-len(rd.long))]...)
		default:
			return nil, n, err
		}
	}
}

// read reads r into b, verifying each chunk as it fills and, when live,
// whatever has arrived whenever reading would wait. It returns the number
// of lines read.
func (s *Sink) read(r io.Reader, b *batch) (int, error) {
	rd := getReader(r, s.bufSize)
	defer putReader(rd)
	first := max(b.src.FirstLine, 1)
	line, off := first, int64(0)
	chunkLine, chunkOff := line, off // the chunk's first line and byte
	stop := func(at int, by int64, err error) (int, error) {
		ie := &IncompleteError{Batch: b.errBatch(), First: first, Line: at, Byte: by, Err: err}
		s.mu.Lock()
		s.mu.incomplete++
		if len(s.mu.incompletes) < s.cfg.MaxErrors {
			s.mu.incompletes = append(s.mu.incompletes, *ie)
		}
		s.mu.Unlock()
		return line - first, ie
	}
	flush := func() error {
		if err := s.flush(b, rd); err != nil {
			return err
		}
		chunkLine, chunkOff = line, off
		return nil
	}
	for {
		text, n, err := rd.nextLine(s.cfg.MaxLineBytes)
		if err != nil {
			pending := line > chunkLine
			if pending || !b.called && !b.live {
				if ferr := flush(); ferr != nil {
					return stop(chunkLine, chunkOff, ferr)
				}
			}
			if errors.Is(err, io.EOF) {
				return line - first, nil
			}
			return stop(line, off+n, err)
		}
		s.parse(rd, text, line)
		line, off = line+1, off+n
		if rd.ids.Len() >= chunkIDs || len(rd.arena) >= chunkBytes || b.live && rd.br.Buffered() == 0 {
			if err := flush(); err != nil {
				return stop(chunkLine, chunkOff, err)
			}
		}
	}
}

// parse parses one line into rd's chunk.
func (s *Sink) parse(rd *reader, text []byte, line int) {
	var err error
	if len(text) > s.cfg.MaxLineBytes {
		err = &LineError{Line: line, Value: clip(text), Err: fmt.Errorf("line longer than %d bytes", s.cfg.MaxLineBytes)}
	} else {
		n := len(rd.ids.Strings)
		err = s.parser.Line(text, line, &rd.ids)
		// The strings point into text, which the next read overwrites:
		// copy them to the chunk's arena (an arena that grows leaves the
		// strings made before on its old array, which stays alive).
		for i := n; i < len(rd.ids.Strings); i++ {
			at := len(rd.arena)
			rd.arena = append(rd.arena, rd.ids.Strings[i]...)
			rd.ids.Strings[i] = bytesString(rd.arena[at:])
		}
	}
	if err != nil {
		rd.bad++
		var le *LineError
		if errors.As(err, &le) && len(rd.errs) < s.cfg.MaxErrors {
			rd.errs = append(rd.errs, *le)
		}
	}
}

// flush verifies the chunk gathered in rd, as received now, and counts
// its bad lines; each piece of a live batch takes a new batch number. It fails, verifying and counting nothing of the chunk, when
// its node fields would need more issuers than MaxIssuers allows.
func (s *Sink) flush(b *batch, rd *reader) error {
	defer rd.clear()
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.live {
		s.mu.batches++
		b.res.Batch = s.mu.batches
	}
	if err := s.observeLocked(b, &rd.ids, now); err != nil {
		return err
	}
	b.called = true
	b.res.BadLines += rd.bad
	s.mu.badLines += uint64(rd.bad)
	for _, e := range rd.errs {
		if b.src.Request {
			e.Batch = b.res.Batch
		}
		if len(b.res.Errors) < s.cfg.MaxErrors {
			b.res.Errors = append(b.res.Errors, e)
		}
		if len(s.mu.errs) < s.cfg.MaxErrors {
			s.mu.errs = append(s.mu.errs, e)
		}
	}
	return nil
}

// checkLabelsLocked checks a batch's labels before anything is counted.
func (s *Sink) checkLabelsLocked(l Labels) error {
	if len(l.Stream) > maxLabel || len(l.Issuer) > maxLabel {
		return fmt.Errorf("sink: a stream or issuer label over %d bytes", maxLabel)
	}
	if l.Incarnation < 0 {
		return fmt.Errorf("sink: incarnation %d, want >= 0", l.Incarnation)
	}
	if _, ok := s.mu.streams[l.Stream]; l.Stream != "" && !ok && len(s.mu.streams) >= s.cfg.MaxStreams {
		return fmt.Errorf("sink: more than %d streams (stream %q)", s.cfg.MaxStreams, l.Stream)
	}
	return nil
}

// observeLocked feeds a chunk's IDs to the Verifier, received at now, as
// one call per run of IDs of one issuer (an empty chunk is one call). It
// registers the node issuers the chunk needs first, and fails before
// verifying anything when they would pass MaxIssuers.
func (s *Sink) observeLocked(b *batch, ids *IDs, now int64) error {
	res := &b.res
	o := verify.Observation{Stream: b.stream, RefStart: now, RefEnd: now}
	add := func(f verify.Found) {
		res.Duplicates += f.Duplicates
		res.OrderViolations += f.OrderViolations
		res.RestartViolations += f.RestartViolations
	}
	v := s.mu.v
	if !b.byNode {
		o.Issuer = b.issuer
		switch {
		case s.cfg.Kind == verify.KindSnowflake:
			o.IDs = ids.Snowflakes
			add(v.Observe(o))
		case s.cfg.Kind == verify.KindString:
			add(v.ObserveStrings(o, ids.Strings))
		default:
			add(v.ObserveWide(o, ids.Wide))
		}
		res.IDs += ids.Len()
		return nil
	}
	// Snowflakes without an issuer: one call per run of one node field.
	all := ids.Snowflakes
	if len(all) == 0 {
		is, err := s.nodeLocked(-1)
		if err != nil {
			return err
		}
		o.Issuer = is
		add(v.Observe(o))
		return nil
	}
	nodeOf := func(id generator.ID) int64 {
		return int64(uint64(id)&^(1<<63)>>s.cfg.Layout.SeqBits) & s.cfg.Layout.MaxNode()
	}
	for i, last := 0, int64(-2); i < len(all); i++ { // every node first: all or nothing
		if node := nodeOf(all[i]); node != last {
			if _, err := s.nodeLocked(node); err != nil {
				return err
			}
			last = node
		}
	}
	for i := 0; i < len(all); {
		node := nodeOf(all[i])
		j := i + 1
		for j < len(all) && nodeOf(all[j]) == node {
			j++
		}
		o.Issuer, o.IDs = s.mu.nodes[node], all[i:j]
		add(v.Observe(o))
		i = j
	}
	res.IDs += len(all)
	return nil
}

// issuerLocked returns the issuer for explicit labels, registering it.
func (s *Sink) issuerLocked(l Labels) (verify.IssuerID, error) {
	key := Labels{Issuer: l.Issuer, Incarnation: l.Incarnation}
	if id, ok := s.mu.issuers[key]; ok {
		return id, nil
	}
	if len(s.mu.issuers)+len(s.mu.nodes) >= s.cfg.MaxIssuers {
		return 0, fmt.Errorf("sink: more than %d issuers (issuer %q)", s.cfg.MaxIssuers, l.Issuer)
	}
	// Incarnations of one name share a worker group, so restarts are
	// checked; each name gets its own negative worker, apart from node
	// fields.
	w, ok := s.mu.names[l.Issuer]
	if !ok {
		w = -2 - int64(len(s.mu.names)) // -1 is the issuer of empty batches
		s.mu.names[l.Issuer] = w
	}
	id := s.mu.v.Register(verify.IssuerSpec{Name: l.Issuer, Incarnation: l.Incarnation, Worker: w})
	s.mu.issuers[key] = id
	return id, nil
}

// nodeLocked returns the issuer "node-N" for a Snowflake node field
// (-1: the issuer of empty batches).
func (s *Sink) nodeLocked(node int64) (verify.IssuerID, error) {
	if id, ok := s.mu.nodes[node]; ok {
		return id, nil
	}
	if len(s.mu.issuers)+len(s.mu.nodes) >= s.cfg.MaxIssuers {
		return 0, fmt.Errorf("sink: more than %d issuers (node %d)", s.cfg.MaxIssuers, node)
	}
	name := "node-" + strconv.FormatInt(node, 10)
	if node < 0 {
		name = "sink"
	}
	id := s.mu.v.Register(verify.IssuerSpec{Name: name, Worker: node})
	s.mu.nodes[node] = id
	return id, nil
}

// Totals are the running counts, in constant time.
type Totals struct {
	// Batches counts batches received; IDs the valid IDs in them; BadLines
	// the lines that were not valid.
	Batches  int
	IDs      uint64
	BadLines uint64
	// Duplicates, OrderViolations and RestartViolations count findings.
	Duplicates, OrderViolations, RestartViolations uint64
	// Incomplete counts batches that stopped part way (IncompleteError):
	// some of what was sent was not verified.
	Incomplete uint64
	// Refused counts requests refused before their body was read (a
	// connection or request limit, a body too large): the client was
	// told, and its IDs were not verified unless it sent them again.
	Refused uint64
}

// Totals returns the running counts.
func (s *Sink) Totals() Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mu.v.Progress()
	return Totals{Batches: s.mu.batches, IDs: p.IDs, BadLines: s.mu.badLines,
		Duplicates: p.Duplicates, OrderViolations: p.OrderViolations, RestartViolations: p.RestartViolations,
		Incomplete: s.mu.incomplete, Refused: s.mu.refused}
}

// Refuse counts a request refused before its body was read (see
// Totals.Refused).
func (s *Sink) Refuse() {
	s.mu.Lock()
	s.mu.refused++
	s.mu.Unlock()
}

// Report is the sink's final word: the totals, the first line errors and
// incomplete batches, and the Verifier's full Result.
type Report struct {
	Totals
	Errors           []LineError
	IncompleteErrors []IncompleteError
	Result           verify.Result
}

// Report computes the report so far.
func (s *Sink) Report() Report {
	t := s.Totals()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Report{Totals: t, Errors: append([]LineError(nil), s.mu.errs...),
		IncompleteErrors: append([]IncompleteError(nil), s.mu.incompletes...), Result: s.mu.v.Result()}
}

// Exit codes of a sink run, as every snowchaos command uses them.
const (
	ExitOK      = 0 // every ID unique and in order, nothing invalid, enough IDs
	ExitFinding = 1 // a duplicate, an order or a restart violation
	ExitInvalid = 2 // a bad line, an incomplete batch, or fewer IDs than expected: no verdict
)

// ExitCode maps totals to the exit code: a finding is 1 (even when some
// input was also invalid); else invalid lines, incomplete batches, or
// fewer than expect IDs (so that a run in which nothing arrived is not
// green) are 2; else 0. Refused requests do not count: their clients
// were told (a forwarder that does not send them again falls short of
// expect).
func (t Totals) ExitCode(expect uint64) int {
	switch {
	case t.Duplicates+t.OrderViolations+t.RestartViolations > 0:
		return ExitFinding
	case t.BadLines > 0 || t.Incomplete > 0 || t.IDs < expect:
		return ExitInvalid
	}
	return ExitOK
}

// bytesString views b as a string without copying; the string is valid
// while b is not modified.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
