package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// PartialHeader is set on a /v1/ids response that carries fewer IDs than
// asked for: the generator issued a prefix of the batch and then refused
// (its value is the refusal). The IDs issued are never thrown away, so a
// client can account for every ID the node issued.
const PartialHeader = "X-Snowchaos-Partial"

// wantsJSON reports whether the request's Accept header asks for JSON.
func wantsJSON(r *http.Request) bool {
	for _, a := range r.Header["Accept"] {
		if strings.Contains(a, "application/json") {
			return true
		}
	}
	return false
}

// setBodyHeaders sets the headers of a successful body of n bytes.
func setBodyHeaders(w http.ResponseWriter, ct []string, n int) {
	h := w.Header()
	h["Content-Type"] = ct
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// noQuery answers 400 and reports false when a route that takes no
// query parameter got one.
func noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	if _, err := ParseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, errBadRequest, err.Error())
		return false
	}
	return true
}

// handleID serves GET /v1/id.
func (s *Server) handleID(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	bud := s.budget.Load()
	ctx, cancel := context.WithTimeoutCause(r.Context(), bud.d, bud.cause)
	id, err := s.gen.Load().NextContext(ctx)
	cancel()
	if err != nil {
		writeGenError(w, err)
		return
	}
	b := make([]byte, 0, 32)
	ct := contentText
	if wantsJSON(r) {
		b = append(b, `{"id":"`...)
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, "\"}\n"...)
		ct = contentJSON
	} else {
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '\n')
	}
	setBodyHeaders(w, ct, len(b))
	w.Write(b)
}

// batchBuf is a pooled buffer for one batch response.
type batchBuf struct {
	ids  []generator.ID
	body []byte
}

// handleIDs serves GET /v1/ids?count=N.
func (s *Server) handleIDs(w http.ResponseWriter, r *http.Request) {
	n := s.cfg.MaxBatch
	if q := r.URL.RawQuery; q != "" {
		vals, err := ParseQuery(q, "count")
		if err != nil {
			writeError(w, http.StatusBadRequest, errBadRequest, err.Error())
			return
		}
		if cs, ok := vals["count"]; ok {
			if len(cs) != 1 {
				writeError(w, http.StatusBadRequest, errInvalidCount, "count given "+strconv.Itoa(len(cs))+" times")
				return
			}
			if n, err = ParseCount(cs[0], s.cfg.MaxBatch); err != nil {
				writeError(w, http.StatusBadRequest, errInvalidCount, err.Error())
				return
			}
		}
	}
	bb := s.batchPool.Get().(*batchBuf)
	defer s.batchPool.Put(bb)
	if cap(bb.ids) < n {
		bb.ids = make([]generator.ID, n)
	}
	ids := bb.ids[:n]
	bud := s.budget.Load()
	ctx, cancel := context.WithTimeoutCause(r.Context(), bud.d, bud.cause)
	got, err := s.gen.Load().NextNContext(ctx, ids)
	cancel()
	if got == 0 {
		if err == nil {
			err = errors.New("server: generator issued no ID")
		}
		writeGenError(w, err)
		return
	}
	ids = ids[:got]
	asJSON := wantsJSON(r)
	b := AppendIDList(bb.body[:0], ids, asJSON)
	bb.body = b
	if err != nil {
		w.Header().Set(PartialHeader, err.Error())
	}
	ct := contentText
	if asJSON {
		ct = contentJSON
	}
	setBodyHeaders(w, ct, len(b))
	w.Write(b)
}

// AppendIDList appends ids as the /v1/ids body: one decimal per line, or
// with asJSON a JSON array of decimal strings. Consecutive IDs (the common
// case within a tick) are formatted by incrementing the previous one's
// digits, so a batch costs a copy per ID rather than a division chain.
func AppendIDList(b []byte, ids []generator.ID, asJSON bool) []byte {
	var digits [24]byte
	n := 0
	prev := int64(-2)
	if asJSON {
		b = append(b, '[')
	}
	for i, id := range ids {
		v := int64(id)
		if v == prev+1 && incDecimal(digits[:n]) {
			// digits now hold v
		} else {
			n = len(strconv.AppendInt(digits[:0], v, 10))
		}
		prev = v
		if asJSON {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, digits[:n]...)
			b = append(b, '"')
		} else {
			b = append(b, digits[:n]...)
			b = append(b, '\n')
		}
	}
	if asJSON {
		b = append(b, "]\n"...)
	}
	return b
}

// incDecimal adds one to the decimal digits d in place; it reports false
// (leaving d unspecified) when the result needs another digit.
func incDecimal(d []byte) bool {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] != '9' {
			d[i]++
			return true
		}
		d[i] = '0'
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
func (s *Server) handleDecode(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, err := ParseDecodePath(r.URL.EscapedPath())
	if err != nil {
		writeError(w, http.StatusBadRequest, errInvalidID, err.Error())
		return
	}
	p := s.layout.Decode(id)
	writeJSON(w, http.StatusOK, DecodeResponse{
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
func (s *Server) handleInfo(w http.ResponseWriter, _ *http.Request) {
	g := s.gen.Load()
	st := g.Settings()
	writeJSON(w, http.StatusOK, Info{
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
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Status{Status: "ok"})
}

// handleReady serves GET /readyz: ready when the generator would issue now
// and every extra check passes.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(r.Context()); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, errNotReady, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, Status{Status: "ready"})
}

// Ready returns nil when the node is ready: the generator's Ready, then
// the fault clock's hold (see HoldError), then every ReadyCheck, the first
// failure named.
func (s *Server) Ready(ctx context.Context) error {
	g := s.gen.Load()
	if err := g.Ready(); err != nil {
		return err
	}
	if c := s.cfg.FaultClock; c != nil {
		kind, left := c.Hold()
		if err := HoldError(kind, left, g.Settings().MaxWait); err != nil {
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

// writeJSON writes v as a JSON body with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errInternal, err.Error())
		return
	}
	b = append(b, '\n')
	h := w.Header()
	h["Content-Type"] = contentJSON
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	w.Write(b)
}
