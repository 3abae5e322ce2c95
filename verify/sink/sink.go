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
	mu     struct {
		sync.Mutex
		v        *verify.Verifier
		streams  map[string]uint64
		issuers  map[Labels]verify.IssuerID
		names    map[string]int64 // issuer name -> its worker group
		nodes    map[int64]verify.IssuerID
		batches  int
		badLines uint64
		errs     []LineError
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
	s := &Sink{cfg: cfg, parser: NewParser(cfg.Kind)}
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

// Ingest verifies one batch of lines, as received now: body holds whole
// lines (the last may lack its newline). The lines that parse are
// verified even when others do not; every bad line is counted and the
// first are kept. The error is non-nil only when a label is out of
// bounds, and nothing is verified then.
func (s *Sink) Ingest(body []byte, src Source) (BatchResult, error) {
	start := s.cfg.Now()
	var res BatchResult
	var ids IDs
	var errs []LineError
	line := max(src.FirstLine, 1)
	for len(body) > 0 {
		b := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			b, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		var err error
		if len(b) > s.cfg.MaxLineBytes {
			err = &LineError{Line: line, Value: clip(b), Err: fmt.Errorf("line longer than %d bytes", s.cfg.MaxLineBytes)}
		} else {
			err = s.parser.Line(b, line, &ids)
		}
		if err != nil {
			res.BadLines++
			var le *LineError
			if errors.As(err, &le) && len(errs) < s.cfg.MaxErrors {
				errs = append(errs, *le)
			}
		}
		line++
	}
	end := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLabelsLocked(src.Labels); err != nil {
		return res, err
	}
	s.mu.batches++
	res.Batch = s.mu.batches
	res.IDs = ids.Len()
	if src.Request {
		for i := range errs {
			errs[i].Batch = res.Batch
		}
	}
	res.Errors = errs
	s.mu.badLines += uint64(res.BadLines)
	for _, e := range errs {
		if len(s.mu.errs) >= s.cfg.MaxErrors {
			break
		}
		s.mu.errs = append(s.mu.errs, e)
	}
	return res, s.observeLocked(&ids, src.Labels, start, end, &res)
}

// Consume verifies the lines of r as they arrive, until r ends: what has
// arrived is verified whenever reading would wait (so a pipe is verified
// live) or a megabyte has gathered. Lines are numbered across the whole
// input; a line over MaxLineBytes is reported as such and its rest
// skipped. It returns the number of lines and the first error reading r
// or from Ingest; bad lines are counted, not returned.
func (s *Sink) Consume(r io.Reader, l Labels) (lines int, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var batch []byte
	first := 1
	lineStart := 0    // where the current line starts in batch
	skipping := false // discarding the rest of an over-long line
	flush := func() error {
		// Only whole lines: keep a partial last line for the next batch.
		cut := lineStart
		if cut == 0 {
			return nil
		}
		_, err := s.Ingest(batch[:cut], Source{Labels: l, FirstLine: first})
		first += bytes.Count(batch[:cut], []byte{'\n'})
		batch = append(batch[:0], batch[cut:]...)
		lineStart = 0
		return err
	}
	for {
		b, rerr := br.ReadSlice('\n')
		if rerr != nil && !errors.Is(rerr, bufio.ErrBufferFull) && !errors.Is(rerr, io.EOF) {
			if err := flush(); err != nil {
				return first - 1, err
			}
			return first - 1, fmt.Errorf("sink: reading line %d: %w", first+bytes.Count(batch, []byte{'\n'}), rerr)
		}
		if !skipping {
			batch = append(batch, b...)
			if len(batch)-lineStart > s.cfg.MaxLineBytes+1 {
				// Keep enough for Ingest to report it; drop the rest.
				batch = batch[:lineStart+s.cfg.MaxLineBytes+1]
				skipping = true
			}
		}
		if rerr == nil {
			if skipping {
				batch = append(batch, '\n')
				skipping = false
			}
			lineStart = len(batch)
		}
		if errors.Is(rerr, io.EOF) {
			partial := len(batch) > lineStart // a last line without a newline
			lineStart = len(batch)
			if err := flush(); err != nil {
				return first - 1, err
			}
			if partial {
				first++
			}
			return first - 1, nil
		}
		if br.Buffered() == 0 || lineStart >= 1<<20 {
			if err := flush(); err != nil {
				return first - 1, err
			}
		}
	}
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

// observeLocked feeds a batch's IDs to the Verifier under the labels, as
// one call per run of IDs of one issuer.
func (s *Sink) observeLocked(ids *IDs, l Labels, start, end int64, res *BatchResult) error {
	var stream uint64
	if l.Stream != "" {
		var ok bool
		if stream, ok = s.mu.streams[l.Stream]; !ok {
			stream = uint64(len(s.mu.streams) + 1)
			s.mu.streams[l.Stream] = stream
		}
	}
	o := verify.Observation{Stream: stream, RefStart: start, RefEnd: end}
	add := func(f verify.Found) {
		res.Duplicates += f.Duplicates
		res.OrderViolations += f.OrderViolations
		res.RestartViolations += f.RestartViolations
	}
	v := s.mu.v
	if l.Issuer != "" || s.cfg.Kind != verify.KindSnowflake {
		if l.Issuer == "" {
			l.Issuer = "sink"
		}
		is, err := s.issuerLocked(l)
		if err != nil {
			return err
		}
		o.Issuer = is
		switch {
		case s.cfg.Kind == verify.KindSnowflake:
			o.IDs = ids.Snowflakes
			add(v.Observe(o))
		case s.cfg.Kind == verify.KindString:
			add(v.ObserveStrings(o, ids.Strings))
		default:
			add(v.ObserveWide(o, ids.Wide))
		}
		return nil
	}
	// Snowflakes without an issuer: one call per run of one node field.
	all := ids.Snowflakes
	if len(all) == 0 {
		o.Issuer, _ = s.nodeLocked(-1) // an empty batch is a call too
		add(v.Observe(o))
		return nil
	}
	nodeOf := func(id generator.ID) int64 {
		return int64(uint64(id)&^(1<<63)>>s.cfg.Layout.SeqBits) & s.cfg.Layout.MaxNode()
	}
	lastNode, is := int64(-2), verify.IssuerID(0)
	for i := 0; i < len(all); {
		node := nodeOf(all[i])
		j := i + 1
		for j < len(all) && nodeOf(all[j]) == node {
			j++
		}
		if node != lastNode {
			var err error
			if is, err = s.nodeLocked(node); err != nil {
				return err
			}
			lastNode = node
		}
		o.Issuer, o.IDs = is, all[i:j]
		add(v.Observe(o))
		i = j
	}
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
}

// Totals returns the running counts.
func (s *Sink) Totals() Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mu.v.Progress()
	return Totals{Batches: s.mu.batches, IDs: p.IDs, BadLines: s.mu.badLines,
		Duplicates: p.Duplicates, OrderViolations: p.OrderViolations, RestartViolations: p.RestartViolations}
}

// Report is the sink's final word: the totals, the first line errors and
// the Verifier's full Result.
type Report struct {
	Totals
	Errors []LineError
	Result verify.Result
}

// Report computes the report so far.
func (s *Sink) Report() Report {
	t := s.Totals()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Report{Totals: t, Errors: append([]LineError(nil), s.mu.errs...), Result: s.mu.v.Result()}
}

// Exit codes of a sink run, as every snowchaos command uses them.
const (
	ExitOK      = 0 // every ID unique and in order, nothing invalid, enough IDs
	ExitFinding = 1 // a duplicate, an order or a restart violation
	ExitInvalid = 2 // a bad line, or fewer IDs than expected: no verdict
)

// ExitCode maps totals to the exit code: a finding is 1 (even when some
// input was also invalid); else invalid lines, or fewer than expect IDs
// (so that a run in which nothing arrived is not green), are 2; else 0.
func (t Totals) ExitCode(expect uint64) int {
	switch {
	case t.Duplicates+t.OrderViolations+t.RestartViolations > 0:
		return ExitFinding
	case t.BadLines > 0 || t.IDs < expect:
		return ExitInvalid
	}
	return ExitOK
}

// bytesString views b as a string without copying; the string is valid
// while b is not modified.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
