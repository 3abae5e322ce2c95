package harness

import (
	"bufio"
	"compress/gzip"
	"io"
	"strconv"
	"time"

	"github.com/snowchaos/snowchaos/verify"
)

// historyWriter writes one NDJSON line per request (docs/history.md is
// the schema; a test keeps the two in step):
//
//	{"scenario":"step-back-small","target":"wait","t":2.000213,"ref":"2026-06-30T23:59:32.000213Z",
//	 "node":"a","incarnation":0,"client":3,"outcome":"ok","wait":0,"ids":["1234"]}
//
// With gzip set, each run's lines are one gzip member at BestSpeed (the
// built-in suite's 700 MB shrink about 11 times, the work spread over the
// parallel runs); members written one after another form one gzip stream,
// which gzip -d, zcat and Go's gzip.Reader read whole.
type historyWriter struct {
	w   *bufio.Writer
	gz  *gzip.Writer // nil: plain NDJSON
	buf []byte
	err error
}

func newHistoryWriter(w io.Writer, compress bool) *historyWriter {
	h := &historyWriter{}
	if compress {
		h.gz, _ = gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
		w = h.gz
	}
	h.w = bufio.NewWriterSize(w, 1<<16)
	return h
}

func (h *historyWriter) write(r *run, sl *slot, incarnation, client int, arrive, end time.Duration, ids *idBuf, o verify.Outcome, err error) {
	if h.err != nil {
		return
	}
	b := h.buf[:0]
	b = append(b, `{"scenario":`...)
	b = strconv.AppendQuote(b, r.s.Name)
	b = append(b, `,"target":`...)
	b = strconv.AppendQuote(b, r.st.Name)
	b = append(b, `,"t":`...)
	b = strconv.AppendFloat(b, end.Seconds(), 'f', -1, 64)
	b = append(b, `,"ref":"`...)
	b = time.Unix(0, r.startNs+int64(end)).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","node":`...)
	b = strconv.AppendQuote(b, sl.name)
	b = append(b, `,"incarnation":`...)
	b = strconv.AppendInt(b, int64(incarnation), 10)
	b = append(b, `,"client":`...)
	b = strconv.AppendInt(b, int64(client), 10)
	b = append(b, `,"outcome":"`...)
	b = append(b, o.String()...)
	b = append(b, `","wait":`...)
	b = strconv.AppendFloat(b, (end - arrive).Seconds(), 'f', -1, 64)
	b = append(b, `,"ids":`...)
	b = ids.appendJSON(b)
	if err != nil {
		b = append(b, `,"error":`...)
		b = strconv.AppendQuote(b, err.Error())
	}
	b = append(b, "}\n"...)
	h.buf = b
	_, h.err = h.w.Write(b)
}

// flush writes what is buffered and, with gzip, ends the run's member.
func (h *historyWriter) flush() error {
	if h.err != nil {
		return h.err
	}
	if h.err = h.w.Flush(); h.err == nil && h.gz != nil {
		h.err = h.gz.Close()
	}
	return h.err
}
