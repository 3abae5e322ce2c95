package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/node"
)

// PartialHeader is set on a /v1/ids response that carries fewer IDs than
// asked for: the generator issued a prefix of the batch and then refused
// (its value is the refusal). The IDs issued are never thrown away, so a
// client can account for every ID the node issued.
const PartialHeader = "X-Snowchaos-Partial"

// wantsJSON reports whether the request's Accept header asks for JSON.
func wantsJSON(c *fasthttp.RequestCtx) bool {
	for _, a := range c.Request.Header.PeekAll(fasthttp.HeaderAccept) {
		if bytes.Contains(a, mimeJSON) {
			return true
		}
	}
	return false
}

// setBody sets a successful response's headers and body (copied).
func setBody(c *fasthttp.RequestCtx, ct, body []byte) {
	h := &c.Response.Header
	h.SetContentTypeBytes(ct)
	h.SetCanonical(hdrCacheControl, valNoStore)
	c.SetBody(body)
}

// noQuery answers 400 and reports false when a route that takes no
// query parameter got one.
func noQuery(c *fasthttp.RequestCtx) bool {
	q := c.URI().QueryString()
	if len(q) == 0 {
		return true
	}
	if _, err := ParseQuery(string(q)); err != nil {
		writeErrorCtx(c, http.StatusBadRequest, errBadRequest, err.Error())
		return false
	}
	return true
}

// handleID serves GET /v1/id.
func (s *Server) handleID(ctx context.Context, c *fasthttp.RequestCtx) {
	if !noQuery(c) {
		return
	}
	var ids [1]generator.ID
	bctx := newBudgetCtx(ctx, requestStart(c), s.budget)
	_, err := s.node.Issue(bctx, ids[:])
	bctx.release()
	if err != nil {
		writeGenError(c, err)
		return
	}
	id := ids[0]
	var buf [32]byte
	b := buf[:0]
	ct := ctText
	if wantsJSON(c) {
		b = append(b, `{"id":"`...)
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, "\"}\n"...)
		ct = ctJSON
	} else {
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '\n')
	}
	setBody(c, ct, b)
}

// batchBuf is a pooled buffer for one batch response.
type batchBuf struct {
	ids  []generator.ID
	body []byte
}

// countParam returns the count of a /v1/ids query: max when absent. Any
// other parameter, a repeated count or a malformed one is an error naming
// it (the short description and the detail of a 400).
func countParam(q []byte, max int) (n int, short string, err error) {
	if len(q) == 0 {
		return max, "", nil
	}
	// The common query, "count=N", is parsed without allocating.
	if v, ok := bytes.CutPrefix(q, []byte("count=")); ok && !bytes.ContainsAny(v, "&;%+") {
		if n, err = ParseCount(string(v), max); err != nil {
			return 0, errInvalidCount, err
		}
		return n, "", nil
	}
	vals, err := ParseQuery(string(q), "count")
	if err != nil {
		return 0, errBadRequest, err
	}
	cs, ok := vals["count"]
	switch {
	case !ok:
		return max, "", nil
	case len(cs) != 1:
		return 0, errInvalidCount, errors.New("count given " + strconv.Itoa(len(cs)) + " times")
	}
	if n, err = ParseCount(cs[0], max); err != nil {
		return 0, errInvalidCount, err
	}
	return n, "", nil
}

// handleIDs serves GET /v1/ids?count=N.
func (s *Server) handleIDs(ctx context.Context, c *fasthttp.RequestCtx) {
	n, short, err := countParam(c.URI().QueryString(), s.cfg.MaxBatch)
	if err != nil {
		writeErrorCtx(c, http.StatusBadRequest, short, err.Error())
		return
	}
	bb := s.batchPool.Get().(*batchBuf)
	defer s.batchPool.Put(bb)
	if cap(bb.ids) < n {
		bb.ids = make([]generator.ID, n)
	}
	ids := bb.ids[:n]
	bctx := newBudgetCtx(ctx, requestStart(c), s.budget)
	got, err := s.node.Issue(bctx, ids)
	bctx.release()
	if got == 0 {
		if err == nil {
			err = errors.New("server: generator issued no ID")
		}
		writeGenError(c, err)
		return
	}
	asJSON := wantsJSON(c)
	bb.body = AppendIDList(bb.body[:0], ids[:got], asJSON)
	if err != nil {
		c.Response.Header.Set(PartialHeader, err.Error())
	}
	ct := ctText
	if asJSON {
		ct = ctJSON
	}
	setBody(c, ct, bb.body)
}

// AppendIDList appends ids as the /v1/ids body: one decimal per line, or
// with asJSON a JSON array of decimal strings. It grows b once and writes
// in place, without allocating when b has room. An ID's digits are kept in
// three machine words and stored with three word writes; an ID one above
// the previous one (the common case within a tick) increments the digits
// in their words, and only a jump formats them anew, so a batch costs a
// few instructions per ID.
func AppendIDList(b []byte, ids []generator.ID, asJSON bool) []byte {
	const perID = 19 + 3 // the longest int64, its quotes and separator
	// Each ID's digits are stored 24 bytes at a time, the excess
	// overwritten by what follows: hence the slack.
	b = slices.Grow(b, len(ids)*perID+3+24)
	start := len(b)
	out := b[start:cap(b)]
	pos := 0
	if asJSON {
		out[pos] = '['
		pos++
	}
	var (
		digits [24]byte
		w      [3]uint64 // digits, little-endian
		n      int       // how many digits
		prev   = int64(-2)
	)
	le := binary.LittleEndian
	for i, id := range ids {
		v := int64(id)
		if v != prev+1 || prev < 0 || !incWords(&w, n) {
			n = len(strconv.AppendInt(digits[:0], v, 10))
			w[0], w[1], w[2] = le.Uint64(digits[0:]), le.Uint64(digits[8:]), le.Uint64(digits[16:])
		}
		prev = v
		if asJSON {
			if i > 0 {
				out[pos] = ','
				pos++
			}
			out[pos] = '"'
			pos++
		}
		o := out[pos : pos+24]
		le.PutUint64(o[0:], w[0])
		le.PutUint64(o[8:], w[1])
		le.PutUint64(o[16:], w[2])
		pos += n
		if asJSON {
			out[pos] = '"'
		} else {
			out[pos] = '\n'
		}
		pos++
	}
	if asJSON {
		out[pos], out[pos+1] = ']', '\n'
		pos += 2
	}
	return b[:start+pos]
}

// incWords adds one to the n ASCII decimal digits held little-endian in w;
// it reports false (w unspecified) when the result needs another digit.
func incWords(w *[3]uint64, n int) bool {
	for k := n - 1; k >= 0; k-- {
		word, shift := &w[k/8], uint(k%8)*8
		if byte(*word>>shift) != '9' {
			*word += 1 << shift
			return true
		}
		*word -= 9 << shift // '9' becomes '0', carry on
	}
	return false
}

// DecodeResponse is the body of GET /v1/decode/{id}.
type DecodeResponse struct {
	// ID is the decoded ID, as a decimal string.
	ID generator.ID `json:"id"`
	// Layout names the node's layout.
	Layout string `json:"layout"`
	// Tick is the time field: ticks since the layout's epoch.
	Tick int64 `json:"tick"`
	// Time is the start of Tick, in UTC.
	Time time.Time `json:"time"`
	// Node is the whole node field; Datacenter and Worker split it for
	// layouts with a datacenter view.
	Node       int64 `json:"node"`
	Datacenter int64 `json:"datacenter"`
	Worker     int64 `json:"worker"`
	// Seq is the sequence field.
	Seq int64 `json:"seq"`
}

// handleDecode serves GET /v1/decode/{id}.
func (s *Server) handleDecode(_ context.Context, c *fasthttp.RequestCtx) {
	if !noQuery(c) {
		return
	}
	id, err := ParseDecodePath(string(c.URI().PathOriginal()))
	if err != nil {
		writeErrorCtx(c, http.StatusBadRequest, errInvalidID, err.Error())
		return
	}
	p := s.layout.Decode(id)
	writeJSONCtx(c, http.StatusOK, DecodeResponse{
		ID: id, Layout: s.layout.Name, Tick: p.Tick, Time: p.Time,
		Node: p.Node, Datacenter: p.Datacenter, Worker: p.Worker, Seq: p.Seq,
	})
}

// Info is the body of GET /v1/info: what a client needs to know about the
// node to verify its IDs.
type Info struct {
	// Node is the node (worker) ID the generator issues with.
	Node int64 `json:"node"`
	// Layout describes the ID layout.
	Layout LayoutInfo `json:"layout"`
	// Policy is the rewind policy ("wait", "refuse", "logical").
	Policy string `json:"policy"`
	// MaxWait and MaxLead are the policy's bounds (Go duration strings).
	MaxWait string `json:"max_wait"`
	MaxLead string `json:"max_lead"`
	// MaxBatch is the largest count /v1/ids accepts.
	MaxBatch int `json:"max_batch"`
	// Admin reports whether the admin fault API is enabled.
	Admin bool `json:"admin"`
	// Stats is the generator's counters.
	Stats InfoStats `json:"stats"`
}

// InfoStats is generator.Stats as JSON, with the same meanings.
type InfoStats struct {
	Issued           uint64 `json:"issued"`
	RewindsWaited    uint64 `json:"rewinds_waited"`
	RewindsLogical   uint64 `json:"rewinds_logical"`
	RewindsRefused   uint64 `json:"rewinds_refused"`
	LastRewindWallNs int64  `json:"last_rewind_wall_ns"` // Unix ns, 0 if none
	LastRewindByNs   int64  `json:"last_rewind_by_ns"`
	Exhaustions      uint64 `json:"exhaustions"`
	Refusals         uint64 `json:"refusals"`
	LeadNs           int64  `json:"lead_ns"`
	MaxLeadNs        int64  `json:"max_lead_ns"`
	MarkMs           int64  `json:"mark_ms"` // Unix ms, 0 without a checkpoint
	CheckpointWrites uint64 `json:"checkpoint_writes"`
	CheckpointErrors uint64 `json:"checkpoint_errors"`
	LastTick         int64  `json:"last_tick"`
}

// NewInfoStats describes st.
func NewInfoStats(st generator.Stats) InfoStats {
	return InfoStats{
		Issued: st.Issued, RewindsWaited: st.RewindsWaited, RewindsLogical: st.RewindsLogical, RewindsRefused: st.RewindsRefused,
		LastRewindWallNs: st.LastRewindWall, LastRewindByNs: int64(st.LastRewindBy), Exhaustions: st.Exhaustions, Refusals: st.Refusals,
		LeadNs: int64(st.Lead), MaxLeadNs: int64(st.MaxLead), MarkMs: st.MarkMs,
		CheckpointWrites: st.CheckpointWrites, CheckpointErrors: st.CheckpointErrors, LastTick: st.LastTick,
	}
}

// LayoutInfo is a layout as JSON.
type LayoutInfo struct {
	Name           string    `json:"name"`            // preset name
	TimeBits       uint      `json:"time_bits"`       // time field width
	NodeBits       uint      `json:"node_bits"`       // node field width
	SeqBits        uint      `json:"seq_bits"`        // sequence field width
	DatacenterBits uint      `json:"datacenter_bits"` // datacenter view of the node field
	Epoch          time.Time `json:"epoch"`           // time of tick 0
	Tick           string    `json:"tick"`            // tick length, a Go duration
}

// Layout returns the generator.Layout li describes.
func (li LayoutInfo) Layout() (generator.Layout, error) {
	tick, err := time.ParseDuration(li.Tick)
	if err != nil {
		return generator.Layout{}, err
	}
	l := generator.Layout{Name: li.Name, TimeBits: li.TimeBits, NodeBits: li.NodeBits, SeqBits: li.SeqBits,
		DatacenterBits: li.DatacenterBits, Epoch: li.Epoch, Tick: tick}
	return l, l.Validate()
}

// NewLayoutInfo describes l.
func NewLayoutInfo(l generator.Layout) LayoutInfo {
	return LayoutInfo{Name: l.Name, TimeBits: l.TimeBits, NodeBits: l.NodeBits, SeqBits: l.SeqBits,
		DatacenterBits: l.DatacenterBits, Epoch: l.Epoch.UTC(), Tick: l.Tick.String()}
}

// handleInfo serves GET /v1/info.
func (s *Server) handleInfo(_ context.Context, c *fasthttp.RequestCtx) {
	g := s.node.Generator()
	if g == nil {
		writeGenError(c, node.ErrStopped)
		return
	}
	st := g.Settings()
	writeJSONCtx(c, http.StatusOK, Info{
		Node: st.Node, Layout: NewLayoutInfo(st.Layout), Policy: st.Policy.String(),
		MaxWait: st.MaxWait.String(), MaxLead: st.MaxLead.String(), MaxBatch: s.cfg.MaxBatch,
		Admin: s.cfg.AdminToken != "", Stats: NewInfoStats(g.Stats()),
	})
}

// Status is the body of a successful /healthz or /readyz.
type Status struct {
	// Status is "ok" or "ready".
	Status string `json:"status"`
}

// handleHealth serves GET /healthz: the process is alive and serving.
func (s *Server) handleHealth(_ context.Context, c *fasthttp.RequestCtx) {
	writeJSONCtx(c, http.StatusOK, Status{Status: "ok"})
}

// handleReady serves GET /readyz: ready when the generator would issue now
// and every extra check passes.
func (s *Server) handleReady(ctx context.Context, c *fasthttp.RequestCtx) {
	if err := s.Ready(ctx); err != nil {
		writeErrorCtx(c, http.StatusServiceUnavailable, errNotReady, err.Error())
		c.Response.Header.Set("Retry-After", "1")
		return
	}
	writeJSONCtx(c, http.StatusOK, Status{Status: "ready"})
}

// Ready returns nil when the node is ready: the node's Ready, then the
// fault clock's hold (see HoldError), then every ReadyCheck, the first
// failure named.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.node.Ready(); err != nil {
		return err
	}
	if c := s.fault; c != nil {
		kind, left := c.Hold()
		if err := HoldError(kind, left, s.budget.maxWait); err != nil {
			return err
		}
	}
	for _, c := range s.cfg.ReadyChecks {
		if err := c.Check(ctx); err != nil {
			return errors.New(c.Name + ": " + err.Error())
		}
	}
	return nil
}

// marshalBody encodes v as a JSON response body.
func marshalBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

// writeJSON writes v as a JSON body with status code (the net/http
// handlers': the admin API).
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshalBody(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errInternal, err.Error())
		return
	}
	h := w.Header()
	h["Content-Type"] = contentJSON
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	w.Write(b)
}

// writeJSONCtx writes v as a JSON body with status code.
func writeJSONCtx(c *fasthttp.RequestCtx, code int, v any) {
	b, err := marshalBody(v)
	if err != nil {
		writeErrorCtx(c, http.StatusInternalServerError, errInternal, err.Error())
		return
	}
	c.SetStatusCode(code)
	setBody(c, ctJSON, b)
}
