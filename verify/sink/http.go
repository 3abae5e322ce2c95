package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// DefaultMaxBody bounds a request body unless Handler is given another.
const DefaultMaxBody = 64 << 20

// Handler serves the sink's HTTP protocol:
//
//	POST /v1/ids[?stream=S][&issuer=NAME][&incarnation=N]
//	    body: lines, each one ID or a JSON form of them (see Parser); any
//	    content type. Answers 200 with the batch's counts as JSON when
//	    every line is valid; 400 naming the first bad line (batch, line,
//	    value) when some are not (the valid lines are still verified);
//	    400 for a bad query; 413 for a body over maxBody (nothing
//	    verified).
//	GET  /v1/totals     the running totals as JSON
//	POST /v1/stop       asks the sink to stop (calls stop), so a load
//	                    tool's script can end the run
//	GET  /healthz       200
//
// A stream's batches must be sent one after another (the next once the
// previous is answered), or their order is not the order received.
func (s *Sink) Handler(maxBody int64, stop func()) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/ids", func(w http.ResponseWriter, r *http.Request) {
		src, err := sourceOf(r.URL.RawQuery)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body over %d bytes: nothing verified", maxBody)})
				return
			}
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "reading the body: " + err.Error()})
			return
		}
		res, err := s.Ingest(body, src)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
			return
		}
		if len(res.Errors) > 0 || res.BadLines > 0 {
			e := errorBody{BatchResult: &res, Error: fmt.Sprintf("%d bad lines (the valid ones were verified)", res.BadLines)}
			if len(res.Errors) > 0 {
				first := res.Errors[0]
				e.Error, e.Line, e.Value = first.Error(), first.Line, first.Value
			}
			writeJSON(w, http.StatusBadRequest, e)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /v1/totals", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, totalsJSON(s.Totals()))
	})
	mux.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, totalsJSON(s.Totals()))
		if stop != nil {
			stop()
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// errorBody is a 4xx answer.
type errorBody struct {
	*BatchResult
	Error string `json:"error"`
	Line  int    `json:"line,omitempty"`
	Value string `json:"value,omitempty"`
}

// totalsJSON is Totals as the HTTP protocol shows them.
func totalsJSON(t Totals) map[string]uint64 {
	return map[string]uint64{"batches": uint64(t.Batches), "ids": t.IDs, "bad_lines": t.BadLines,
		"duplicates": t.Duplicates, "order_violations": t.OrderViolations, "restart_violations": t.RestartViolations}
}

// sourceOf reads the query: stream, issuer and incarnation, nothing else.
func sourceOf(rawQuery string) (Source, error) {
	src := Source{Request: true}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return src, fmt.Errorf("bad query %q: %v", clip([]byte(rawQuery)), err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return src, fmt.Errorf("query parameter %q given %d times", k, len(vs))
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
				return src, fmt.Errorf("incarnation %q: want an integer in 0..%d", clip([]byte(v)), 1<<20)
			}
			src.Incarnation = n
		default:
			return src, fmt.Errorf("unknown query parameter %q (want stream, issuer, incarnation)", clip([]byte(k)))
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
