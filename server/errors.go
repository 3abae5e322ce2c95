package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	// Error is a short, stable description ("invalid count", "not ready").
	Error string `json:"error"`
	// Detail explains this occurrence and names the offending value.
	Detail string `json:"detail"`
}

// Short error descriptions, the Error field of ErrorBody.
const (
	errInvalidCount   = "invalid count"
	errInvalidID      = "invalid id"
	errNotFound       = "not found"
	errMethod         = "method not allowed"
	errUnauthorized   = "unauthorized"
	errForbidden      = "forbidden"
	errTooLarge       = "request body too large"
	errBadRequest     = "bad request"
	errUnavailable    = "unavailable"
	errNotReady       = "not ready"
	errInternal       = "internal error"
	errBadFault       = "invalid fault"
	errConflict       = "fault refused"
	errAdminDisabled  = "admin API disabled"
	errNotAcceptable  = "not acceptable"
	errUnsupportedMed = "unsupported media type"
	errNotImplemented = "not implemented"
	errVersion        = "HTTP version not supported"
)

// errorJSON is the body of an error response.
func errorJSON(short, detail string) []byte {
	b, _ := json.Marshal(ErrorBody{Error: short, Detail: detail})
	return append(b, '\n')
}

// writeError writes a JSON error body with status code (the net/http
// handlers': the admin API).
func writeError(w http.ResponseWriter, code int, short, detail string) {
	h := w.Header()
	h["Content-Type"] = contentJSON
	h["Cache-Control"] = noStore
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(code)
	w.Write(errorJSON(short, detail))
}

// writeErrorCtx writes a JSON error body with status code.
func writeErrorCtx(c *fasthttp.RequestCtx, code int, short, detail string) {
	c.SetStatusCode(code)
	h := &c.Response.Header
	h.SetContentTypeBytes(ctJSON)
	h.SetCanonical(hdrCacheControl, valNoStore)
	h.SetCanonical(hdrNosniff, valNosniff)
	c.SetBody(errorJSON(short, detail))
}

// retryAfter returns the Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := math.Ceil(d.Seconds())
	if s < 1 || math.IsNaN(s) {
		s = 1
	}
	if s > 3600 {
		s = 3600
	}
	return strconv.Itoa(int(s))
}

// writeGenError maps an error from the generator to a response: refusals
// (rewind, wait bound, lead bound, fence, checkpoint, shutdown, deadline) are
// 503 with Retry-After; a layout whose lifetime is over is 500.
func writeGenError(c *fasthttp.RequestCtx, err error) {
	var re *generator.RewindError
	after := time.Second
	if errors.As(err, &re) && re.By > after {
		after = re.By
	}
	switch {
	case errors.Is(err, generator.ErrLifetime):
		writeErrorCtx(c, http.StatusInternalServerError, errInternal, err.Error())
		return
	case errors.Is(err, context.DeadlineExceeded):
		writeErrorCtx(c, http.StatusServiceUnavailable, errUnavailable, "request deadline exceeded: "+err.Error())
	default:
		writeErrorCtx(c, http.StatusServiceUnavailable, errUnavailable, err.Error())
	}
	c.Response.Header.Set("Retry-After", retryAfter(after))
}
