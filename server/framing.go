package server

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// The node's HTTP/1.1 framing rules (RFC 9112). fasthttp's parser
// enforces most of them: an invalid or repeated Content-Length, a
// Transfer-Encoding other than chunked or repeated (or in HTTP/1.0),
// whitespace between a field name and its colon, a missing or repeated
// Host and a malformed request line are answered 400 (JSON, by
// requestError) and close the connection; an obs-fold is replaced by a
// space, as section 5.2 allows. strict adds what it lets through.

var (
	http11      = []byte("HTTP/1.1")
	chunked     = []byte("chunked")
	gColon      = []byte("g:")
	upperGColon = []byte("G:")
)

// strict answers 400 or 505 and closes the connection, before h, for the
// HTTP/1.1 requests fasthttp parses but RFC 9112 has a server refuse: an
// HTTP major version other than 1 (section 2.6: 505), a request with both
// Transfer-Encoding and Content-Length (section 6.1: fasthttp would read
// it as chunked) and one whose Transfer-Encoding does not end in chunked
// (section 6.3: fasthttp ignores "identity"). It costs a comparison of the
// version and two searches of the header block (BenchmarkStrictFraming),
// and a walk of its lines only when a field name may be
// Transfer-Encoding.
func strict(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(c *fasthttp.RequestCtx) {
		if code, detail := framingError(&c.Request.Header); code != 0 {
			short := errBadRequest
			if code == http.StatusHTTPVersionNotSupported {
				short = errVersion
			}
			writeErrorCtx(c, code, short, detail)
			c.SetConnectionClose()
			return
		}
		h(c)
	}
}

// framingError returns the status and detail for a request h that the
// node refuses for its version or framing, or 0.
func framingError(h *fasthttp.RequestHeader) (int, string) {
	if p := h.Protocol(); !bytes.Equal(p, http11) && (len(p) != len(http11) || p[5] != '1') {
		// fasthttp accepts only "HTTP/" DIGIT "." DIGIT.
		return http.StatusHTTPVersionNotSupported, "HTTP version " + strconv.Quote(string(p)) +
			" is not supported: the node speaks HTTP/1.0 and HTTP/1.1, and HTTP/2 to clients that open with its preface (h2c)"
	}
	te, cl := framingFields(h.RawHeaders())
	switch {
	case te != nil && cl:
		return http.StatusBadRequest, "a request with both Transfer-Encoding and Content-Length: its length is ambiguous (RFC 9112 section 6.1)"
	case te != nil && !bytes.EqualFold(bytes.TrimSpace(te), chunked):
		return http.StatusBadRequest, "Transfer-Encoding whose final coding is not chunked: the request's length cannot be determined (RFC 9112 section 6.3)"
	}
	return 0, ""
}

// framingFields returns the value of the raw header block's (last)
// Transfer-Encoding field line, nil without one, and whether it holds a
// Content-Length field line when it holds a Transfer-Encoding one.
func framingFields(raw []byte) (te []byte, cl bool) {
	// A Transfer-Encoding field name ends in g or G right before its colon
	// (fasthttp refuses whitespace there): a block without "g:" or "G:",
	// as most are, has none, and is not walked line by line.
	if !bytes.Contains(raw, gColon) && !bytes.Contains(raw, upperGColon) {
		return nil, false
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 {
			continue
		}
		switch line[0] | 0x20 {
		case 't':
			if hasFieldName(line, "transfer-encoding") {
				te = line[len("transfer-encoding:"):]
			}
		case 'c':
			cl = cl || hasFieldName(line, "content-length")
		}
	}
	return te, cl
}

// hasFieldName reports whether line is a field line named name (ASCII,
// any case).
func hasFieldName(line []byte, name string) bool {
	return len(line) > len(name) && line[len(name)] == ':' && strings.EqualFold(string(line[:len(name)]), name)
}

// transferCodingError returns the status and detail for a request whose
// Transfer-Encoding fasthttp refused as unsupported (its err's text
// quotes the field's value): 501 when the codings end in one chunked and
// the node does not implement the others (RFC 9112 section 6.1), else
// 400 (section 6.3: chunked not last, or more than once), and false when
// err is not such a refusal.
func transferCodingError(err error) (int, string, bool) {
	const marker = "unsupported transfer-encoding: "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return 0, "", false
	}
	q, qerr := strconv.QuotedPrefix(msg[i+len(marker):])
	v, uerr := strconv.Unquote(q)
	if qerr != nil || uerr != nil {
		return http.StatusBadRequest, "unsupported Transfer-Encoding", true
	}
	codings := strings.Split(v, ",")
	chunked := 0
	for _, c := range codings {
		if strings.EqualFold(strings.TrimSpace(c), "chunked") {
			chunked++
		}
	}
	last := strings.TrimSpace(codings[len(codings)-1])
	if chunked == 1 && strings.EqualFold(last, "chunked") {
		return http.StatusNotImplemented, "Transfer-Encoding " + strconv.Quote(v) + ": the node implements no transfer coding but chunked", true
	}
	return http.StatusBadRequest, "Transfer-Encoding " + strconv.Quote(v) + " does not end in one chunked coding: the request's length cannot be determined (RFC 9112 section 6.3)", true
}
