package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
)

// ErrBadBody reports a response body that is not a valid list of IDs. Its
// text never changes once published.
var ErrBadBody = errors.New("server: bad ID body")

// ParseIDs parses a /v1/id or /v1/ids response body, text or JSON, into
// IDs (see AppendIDs).
func ParseIDs(body []byte) ([]generator.ID, error) { return AppendIDs(nil, body) }

// AppendIDs parses a /v1/id or /v1/ids response body and appends its IDs to
// dst. It accepts exactly what the server writes: newline-separated strict
// decimals (a trailing newline optional, CRLF tolerated), a JSON array of
// decimal strings, or a JSON object {"id":"..."}. Anything else, including
// an empty body, is an error wrapping ErrBadBody that names the bad token.
// Text and arrays are parsed without allocating beyond dst's growth.
func AppendIDs(dst []generator.ID, body []byte) ([]generator.ID, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return dst, fmt.Errorf("%w: empty body", ErrBadBody)
	}
	switch b[0] {
	case '{':
		var v struct {
			ID *generator.ID `json:"id"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return dst, fmt.Errorf("%w: %v", ErrBadBody, err)
		}
		if v.ID == nil {
			return dst, fmt.Errorf("%w: object without \"id\": %s", ErrBadBody, quote(string(b)))
		}
		return append(dst, *v.ID), nil
	case '[':
		return appendArray(dst, b)
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		id, err := parseDigits(line)
		if err != nil {
			return dst, err
		}
		dst = append(dst, id)
	}
	return dst, nil
}

// appendArray parses a JSON array of decimal strings.
func appendArray(dst []generator.ID, b []byte) ([]generator.ID, error) {
	i := 1
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
	}
	ws()
	if i < len(b) && b[i] == ']' && i == len(b)-1 {
		return dst, nil
	}
	for {
		ws()
		if i >= len(b) || b[i] != '"' {
			return dst, fmt.Errorf("%w: array element at byte %d is not a string", ErrBadBody, i)
		}
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			return dst, fmt.Errorf("%w: unterminated string at byte %d", ErrBadBody, i)
		}
		id, err := parseDigits(b[i+1 : i+1+j])
		if err != nil {
			return dst, err
		}
		dst = append(dst, id)
		i += j + 2
		ws()
		if i >= len(b) {
			return dst, fmt.Errorf("%w: unterminated array", ErrBadBody)
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			if i != len(b)-1 {
				return dst, fmt.Errorf("%w: trailing data after the array", ErrBadBody)
			}
			return dst, nil
		default:
			return dst, fmt.Errorf("%w: unexpected %q at byte %d", ErrBadBody, b[i], i)
		}
	}
}

// parseDigits parses a strict decimal ID as generator.ParseID does, without
// allocating on success.
func parseDigits(s []byte) (generator.ID, error) {
	if len(s) == 0 || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, badID(s)
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, badID(s)
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 1<<63-1 {
		return 0, badID(s)
	}
	return generator.ID(v), nil
}

// badID builds the error for an invalid ID token.
func badID(s []byte) error {
	_, err := generator.ParseID(string(s))
	if err == nil {
		err = fmt.Errorf("%w: %s", generator.ErrInvalidID, quote(string(s)))
	}
	return fmt.Errorf("%w: %w", ErrBadBody, err)
}

// StatusError is a non-2xx response from a node, with its JSON error body
// when it had one.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Body is the decoded error body (zero when the body was not JSON).
	Body ErrorBody
	// RetryAfter is the Retry-After header, if any.
	RetryAfter string
}

// Error returns e.g. "server: HTTP 503: unavailable: generator: ...".
func (e *StatusError) Error() string {
	return fmt.Sprintf("server: HTTP %d: %s: %s", e.Code, e.Body.Error, e.Body.Detail)
}

// generatorErrors are the generator's sentinels a node's 503 detail may
// carry, most specific first.
var generatorErrors = []error{
	generator.ErrWaitExceeded, generator.ErrLeadExceeded, generator.ErrClockBackwards,
	generator.ErrFenced, generator.ErrCheckpoint, generator.ErrClosed,
	generator.ErrLifetime, generator.ErrBeforeEpoch,
}

// sentinelIn returns the generator sentinel whose text appears in s.
func sentinelIn(s string) error {
	for _, e := range generatorErrors {
		if strings.Contains(s, e.Error()) {
			return e
		}
	}
	return nil
}

// Unwrap returns the generator sentinel error (generator.ErrWaitExceeded,
// ErrClockBackwards, ...) named in the detail of a refusal, so errors.Is
// classifies a remote refusal as it would a local one; nil otherwise.
func (e *StatusError) Unwrap() error { return sentinelIn(e.Body.Detail) }

// PartialError reports a batch the node cut short: it issued Got IDs and
// then refused for Reason. It unwraps to the generator sentinel named in
// Reason.
type PartialError struct {
	Got    int    // IDs issued before the refusal
	Reason string // the refusal, as the node reported it
}

// Error returns e.g. "server: partial batch of 12: generator: ...".
func (e *PartialError) Error() string {
	return fmt.Sprintf("server: partial batch of %d: %s", e.Got, e.Reason)
}

// Unwrap returns the generator sentinel named in Reason, if any.
func (e *PartialError) Unwrap() error { return sentinelIn(e.Reason) }

// Client talks to one node over HTTP: the ID API, health, and (with Token)
// the admin fault API. Its zero value is not usable: set BaseURL.
type Client struct {
	// BaseURL is the node's root, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// Token is the admin bearer token.
	Token string
	// HTTP is the client used. Nil: a client with a 10 s timeout.
	HTTP *http.Client
}

// defaultClient is Client's HTTP client when none is set.
var defaultClient = &http.Client{Timeout: 10 * time.Second}

// do sends a request and decodes a 2xx JSON body into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any, accept string) ([]byte, error) {
	b, _, err := c.doHeader(ctx, method, path, in, out, accept)
	return b, err
}

// doHeader is do that also returns the response header.
func (c *Client) doHeader(ctx context.Context, method, path string, in, out any, accept string) ([]byte, http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.Token != "" && strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		if json.Unmarshal(b, &se.Body) != nil {
			se.Body = ErrorBody{Error: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		return nil, resp.Header, se
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, resp.Header, fmt.Errorf("server: decoding %s %s: %w", method, path, err)
		}
	}
	return b, resp.Header, nil
}

// Inject posts a fault and returns the clock's state after it took effect.
func (c *Client) Inject(ctx context.Context, f faults.Fault) (FaultState, error) {
	var st FaultState
	_, err := c.do(ctx, http.MethodPost, "/admin/v1/faults", f, &st, "")
	return st, err
}

// Faults returns the active faults and the clock's offsets.
func (c *Client) Faults(ctx context.Context) (FaultState, error) {
	var st FaultState
	_, err := c.do(ctx, http.MethodGet, "/admin/v1/faults", nil, &st, "")
	return st, err
}

// Revert removes every fault.
func (c *Client) Revert(ctx context.Context) (FaultState, error) {
	var st FaultState
	_, err := c.do(ctx, http.MethodDelete, "/admin/v1/faults", nil, &st, "")
	return st, err
}

// Info returns the node's /v1/info.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var in Info
	_, err := c.do(ctx, http.MethodGet, "/v1/info", nil, &in, "")
	return in, err
}

// Healthy returns nil when /healthz answers 200.
func (c *Client) Healthy(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, "")
	return err
}

// Ready returns nil when /readyz answers 200, else why not.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, "")
	return err
}

// ID fetches one ID.
func (c *Client) ID(ctx context.Context) (generator.ID, error) {
	b, err := c.do(ctx, http.MethodGet, "/v1/id", nil, nil, "")
	if err != nil {
		return 0, err
	}
	ids, err := ParseIDs(b)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("%w: %d IDs for /v1/id", ErrBadBody, len(ids))
	}
	return ids[0], nil
}

// IDs fetches a batch of n IDs (see Issue).
func (c *Client) IDs(ctx context.Context, n int) ([]generator.ID, error) {
	dst := make([]generator.ID, n)
	got, err := c.Issue(ctx, dst)
	return dst[:got], err
}

// Issue fills dst with IDs from the node (GET /v1/id for one, /v1/ids for
// more) and returns how many it wrote; n < len(dst) only with an error: a
// *PartialError when the node cut the batch short, a *StatusError when it
// refused (both unwrap to the generator's sentinel), or a transport or
// ErrBadBody error.
func (c *Client) Issue(ctx context.Context, dst []generator.ID) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	path := "/v1/id"
	if len(dst) > 1 {
		path = "/v1/ids?count=" + strconv.Itoa(len(dst))
	}
	b, hdr, err := c.doHeader(ctx, http.MethodGet, path, nil, nil, "")
	if err != nil {
		return 0, err
	}
	ids, err := AppendIDs(dst[:0], b)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 || len(ids) > len(dst) || &ids[0] != &dst[0] {
		return 0, fmt.Errorf("%w: %d IDs for a request of %d", ErrBadBody, len(ids), len(dst))
	}
	if len(ids) < len(dst) {
		reason := hdr.Get(PartialHeader)
		if reason == "" {
			return 0, fmt.Errorf("%w: %d IDs for a request of %d, without %s", ErrBadBody, len(ids), len(dst), PartialHeader)
		}
		return len(ids), &PartialError{Got: len(ids), Reason: reason}
	}
	return len(ids), nil
}
