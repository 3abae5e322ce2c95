package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/snowchaos/snowchaos/server"
)

// Defaults of HTTPConfig's zero fields.
const (
	// DefaultMaxBody bounds a request body.
	DefaultMaxBody = 64 << 20
	// DefaultMaxRequests bounds the bodies read and verified at once.
	DefaultMaxRequests = 16
	// DefaultMaxConns bounds the open connections (less when the
	// open-file limit is low; see HTTPConfig.MaxConns).
	DefaultMaxConns = 1024
	// DefaultRequestTimeout bounds one body: long enough for
	// DefaultMaxBody from a loaded machine.
	DefaultRequestTimeout = time.Minute
	// MaxRequestsLimit bounds HTTPConfig.MaxRequests.
	MaxRequestsLimit = 4096
	// answerTime is how long writing an answer may take after the body.
	answerTime = 5 * time.Second
)

// HTTPConfig bounds what the sink's HTTP server holds and how long it
// waits. Its zero value is the defaults; the timeouts and the connection
// limit work as snowchaos serve's.
type HTTPConfig struct {
	// MaxBody bounds a request body (zero: DefaultMaxBody, at most 1 GiB).
	// A body announced larger is refused unread (413); one that grows
	// past it while read (chunked) stops there, its lines before verified
	// (413 naming the line and byte).
	MaxBody int64
	// MaxRequests bounds the bodies read and verified at once (zero:
	// DefaultMaxRequests, at most MaxRequestsLimit), and so the memory
	// they take (see docs/verify-sink.md). A request beyond waits for a
	// slot, its body unread, for at most RequestTimeout, then is answered
	// 503 with Retry-After.
	MaxRequests int
	// MaxConns bounds the open connections (zero: DefaultMaxConns, or the
	// open-file limit less 64 when that is lower, as server.DefaultMaxConns;
	// at most server.MaxConnsLimit). A new connection at the limit closes
	// the connection that has been idle longest (a keep-alive connection
	// between requests); when none is idle it is answered 503 with
	// Retry-After at once and closed. At most maxShedding such answers are
	// written at once; beyond that a refused connection is closed
	// without one.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's line and headers (zero:
	// server.DefaultReadHeaderTimeout); IdleTimeout a keep-alive
	// connection's wait for its next request (zero:
	// server.DefaultIdleTimeout). RequestTimeout bounds, each, a body's
	// wait for a slot and the reading and verifying of the body, which
	// then has answerTime to be answered (zero: DefaultRequestTimeout).
	// Each is at most server.MaxTimeout, IdleTimeout server.MaxIdleTimeout.
	ReadHeaderTimeout, RequestTimeout, IdleTimeout time.Duration
}

// withDefaults checks c's bounds and fills its zero fields.
func (c HTTPConfig) withDefaults() (HTTPConfig, error) {
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxBody < 1 || c.MaxBody > 1<<30 {
		return c, fmt.Errorf("sink: MaxBody %d: want 1..%d", c.MaxBody, 1<<30)
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.MaxRequests < 1 || c.MaxRequests > MaxRequestsLimit {
		return c, fmt.Errorf("sink: MaxRequests %d: want 1..%d", c.MaxRequests, MaxRequestsLimit)
	}
	if c.MaxConns == 0 {
		c.MaxConns = min(DefaultMaxConns, server.DefaultMaxConns(openFileLimit()))
	}
	if c.MaxConns < 1 || c.MaxConns > server.MaxConnsLimit {
		return c, fmt.Errorf("sink: MaxConns %d: want 1..%d", c.MaxConns, server.MaxConnsLimit)
	}
	for _, d := range []struct {
		name     string
		v        *time.Duration
		def, max time.Duration
	}{
		{"ReadHeaderTimeout", &c.ReadHeaderTimeout, server.DefaultReadHeaderTimeout, server.MaxTimeout},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout, server.MaxTimeout},
		{"IdleTimeout", &c.IdleTimeout, server.DefaultIdleTimeout, server.MaxIdleTimeout},
	} {
		if *d.v < 0 || *d.v > d.max {
			return c, fmt.Errorf("sink: %s %v: want 0..%v (0: the default)", d.name, *d.v, d.max)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return c, nil
}

// Handler serves the sink's HTTP protocol:
//
//	POST /v1/ids[?stream=S][&issuer=NAME][&incarnation=N]
//	    body: lines, each one ID or a JSON form of them (see Parser); any
//	    content type. The body is verified as it streams in (IngestFrom).
//	    Answers 200 with the batch's counts as JSON when every line is
//	    valid; 400 naming the first bad line (batch, line, value) when
//	    some are not (the valid lines are still verified); 400 for a bad
//	    query (nothing verified). A body that stops part way is answered
//	    with what was verified and the line and byte where it stopped: 413
//	    past MaxBody, 408 past RequestTimeout, 400 when the client went
//	    away or a bound was reached. Refused unread: 413 for a body
//	    announced over MaxBody, 503 (Retry-After: 1) when no slot of
//	    MaxRequests freed within RequestTimeout.
//	GET  /v1/totals     the running totals as JSON
//	POST /v1/stop       asks the sink to stop (calls stop), so a load
//	                    tool's script can end the run
//	GET  /healthz       200
//
// Every answer but /healthz's is JSON. A stream's batches must be sent
// one after another (the next once the previous is answered), or their
// order is not the order received. The error is cfg's.
func (s *Sink) Handler(cfg HTTPConfig, stop func()) (http.Handler, error) {
	h, err := s.newHandler(cfg, stop)
	if err != nil {
		return nil, err
	}
	return h.mux, nil
}

// handler is the sink's HTTP protocol.
type handler struct {
	s     *Sink
	cfg   HTTPConfig
	slots chan struct{} // one per body being read
	mux   *http.ServeMux
}

func (s *Sink) newHandler(cfg HTTPConfig, stop func()) (*handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &handler{s: s, cfg: cfg, slots: make(chan struct{}, cfg.MaxRequests), mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /v1/ids", h.ids)
	h.mux.HandleFunc("GET /v1/totals", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, totalsJSON(s.Totals()))
	})
	h.mux.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, totalsJSON(s.Totals()))
		if stop != nil {
			stop()
		}
	})
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	return h, nil
}

// ids serves POST /v1/ids.
func (h *handler) ids(w http.ResponseWriter, r *http.Request) {
	s, cfg := h.s, h.cfg
	src, err := sourceOf(r.URL.RawQuery)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	if r.ContentLength > cfg.MaxBody {
		s.Refuse()
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body of %d bytes is over %d (the sink's maximum body): nothing verified", r.ContentLength, cfg.MaxBody)})
		return
	}
	if !acquire(r, h.slots, cfg.RequestTimeout) {
		s.Refuse()
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: fmt.Sprintf("%d requests are being verified (the sink's maximum) and none ended within %v: nothing verified, retry later", cfg.MaxRequests, cfg.RequestTimeout)})
		return
	}
	defer func() { <-h.slots }()
	// The body gets its own deadlines, from now: the wait is over.
	rc := http.NewResponseController(w)
	now := time.Now()
	rc.SetReadDeadline(now.Add(cfg.RequestTimeout))
	rc.SetWriteDeadline(now.Add(cfg.RequestTimeout + answerTime))
	res, err := s.IngestFrom(http.MaxBytesReader(w, r.Body, cfg.MaxBody), src)
	var ie *IncompleteError
	switch {
	case errors.As(err, &ie):
		code, why := incompleteStatus(ie, cfg)
		writeJSON(w, code, errorBody{BatchResult: &res, Error: why + ie.Error(), Line: ie.Line, Byte: &ie.Byte})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case res.BadLines > 0:
		e := errorBody{BatchResult: &res, Error: fmt.Sprintf("%d bad lines (the valid ones were verified)", res.BadLines)}
		if len(res.Errors) > 0 {
			first := res.Errors[0]
			e.Error, e.Line, e.Value = first.Error(), first.Line, first.Value
		}
		writeJSON(w, http.StatusBadRequest, e)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// acquire takes a slot, waiting at most d (or until the client leaves).
func acquire(r *http.Request, slots chan struct{}, d time.Duration) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-t.C:
	case <-r.Context().Done():
	}
	return false
}

// incompleteStatus is the answer to a body that stopped part way, and
// what to say before the error.
func incompleteStatus(ie *IncompleteError, cfg HTTPConfig) (int, string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(ie.Err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the body grew past %d bytes (the sink's maximum): ", cfg.MaxBody)
	case errors.Is(ie.Err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, fmt.Sprintf("the body was not read within %v (the sink's request timeout): ", cfg.RequestTimeout)
	}
	return http.StatusBadRequest, ""
}

// errorBody is a 4xx or 5xx answer: the error, the first bad line or
// where the body stopped, and the counts of what was verified.
type errorBody struct {
	*BatchResult
	Error string `json:"error"`
	Line  int    `json:"line,omitempty"`
	Byte  *int64 `json:"byte,omitempty"`
	Value string `json:"value,omitempty"`
}

// totalsJSON is Totals as the HTTP protocol shows them.
func totalsJSON(t Totals) map[string]uint64 {
	return map[string]uint64{"batches": uint64(t.Batches), "ids": t.IDs, "bad_lines": t.BadLines,
		"duplicates": t.Duplicates, "order_violations": t.OrderViolations, "restart_violations": t.RestartViolations,
		"incomplete": t.Incomplete, "refused": t.Refused}
}

// sourceOf reads the query: stream, issuer and incarnation, nothing else.
func sourceOf(rawQuery string) (Source, error) {
	src := Source{Request: true}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return src, fmt.Errorf("bad query %s: %v", quoted(rawQuery), err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return src, fmt.Errorf("query parameter %s given %d times", quoted(k), len(vs))
		}
		v := vs[0]
		switch k {
		case "stream":
			src.Stream = v
		case "issuer":
			src.Issuer = v
		case "incarnation":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1<<20 {
				return src, fmt.Errorf("incarnation %s: want an integer in 0..%d", quoted(v), 1<<20)
			}
			src.Incarnation = n
		default:
			return src, fmt.Errorf("unknown query parameter %s (want stream, issuer, incarnation)", quoted(k))
		}
	}
	if len(src.Stream) > maxLabel || len(src.Issuer) > maxLabel {
		return src, fmt.Errorf("stream or issuer longer than %d bytes", maxLabel)
	}
	if src.Incarnation > 0 && src.Issuer == "" {
		return src, fmt.Errorf("incarnation %d without an issuer", src.Incarnation)
	}
	return src, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
