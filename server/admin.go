package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// Duration is a time.Duration that marshals to JSON as a Go duration string
// ("-150ms") and unmarshals from one or from an integer of nanoseconds.
type Duration time.Duration

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "1.5s", "-150ms" or an integer of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %s: %v", quote(s), err)
		}
		*d = Duration(v)
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s is neither a duration string nor integer nanoseconds", quote(string(b)))
	}
	*d = Duration(v)
	return nil
}

// Fault kinds the admin API accepts, besides those of package faults.
const ()

// FaultRequest is the body of POST /admin/v1/faults: one fault and its
// parameters. Each kind takes exactly the parameters listed; any other
// parameter set is an error, so a misspelt scenario fails loudly. Every
// value is bounded (FaultKinds has the table; docs/http-api.md prints it).
//
//	step    by            wall += by at once (negative: back)
//	freeze  [for]         wall stands still for `for` (0 or absent: until release)
//	release               ends a freeze or a pause
//	leap    at | in       a leap second at `at` (RFC 3339) or `in` from the clock's now
//	smear   by, window    wall moves by `by` linearly over `window`
//	slew    by, [ppm]     wall moves by `by` at ppm (0: 500)
//	drift   ppm           constant rate error
//	pause   for           wall and mono stand still for `for`
//	jitter  max, [seed]   readings jitter by up to max (max 0 removes it)
type FaultRequest struct {
	Kind   faults.Kind `json:"kind"`             // the fault kind, as above
	By     *Duration   `json:"by,omitempty"`     // how far the wall clock moves (step, smear, slew)
	For    *Duration   `json:"for,omitempty"`    // how long it lasts (freeze, pause)
	Window *Duration   `json:"window,omitempty"` // a smear's window
	PPM    *float64    `json:"ppm,omitempty"`    // a slew's or drift's rate, parts per million
	At     *string     `json:"at,omitempty"`     // a leap second's instant, RFC 3339
	In     *Duration   `json:"in,omitempty"`     // a leap second's delay from the clock's now
	Max    *Duration   `json:"max,omitempty"`    // a jitter's bound
	Seed   *uint64     `json:"seed,omitempty"`   // a jitter's random seed
}

// Ptr returns a pointer to v, for building a FaultRequest.
func Ptr[T any](v T) *T { return &v }

// params lists the parameters r sets.
func (r FaultRequest) params() []string {
	var out []string
	for _, p := range []struct {
		name string
		set  bool
	}{{"by", r.By != nil}, {"for", r.For != nil}, {"window", r.Window != nil}, {"ppm", r.PPM != nil},
		{"at", r.At != nil}, {"in", r.In != nil}, {"max", r.Max != nil}, {"seed", r.Seed != nil}} {
		if p.set {
			out = append(out, p.name)
		}
	}
	return out
}

// Fault returns the request as a fault of the vocabulary, reading c's
// wall clock for a leap given as a delay. Call Validate (and CheckAgainst)
// first.
func (r FaultRequest) Fault(c *faults.Clock) faults.Fault {
	dur := func(d *Duration) time.Duration {
		if d == nil {
			return 0
		}
		return time.Duration(*d)
	}
	f := faults.Fault{Kind: r.Kind, By: dur(r.By), For: dur(r.For), Window: dur(r.Window), Max: dur(r.Max)}
	if r.PPM != nil {
		f.PPM = *r.PPM
	}
	if r.Seed != nil {
		f.Seed = *r.Seed
	}
	if r.Kind == faults.KindLeap {
		if r.At != nil {
			f.At, _ = time.Parse(time.RFC3339Nano, *r.At)
		} else {
			wall, _ := c.Now()
			f.At = time.Unix(0, wall).Add(dur(r.In))
		}
	}
	return f
}

// ActiveFault is one entry of FaultState.Active.
type ActiveFault struct {
	Kind   faults.Kind `json:"kind"`   // fault kind
	Detail string      `json:"detail"` // what it does and how far it got
	Since  time.Time   `json:"since"`  // the clock's wall time when it began
}

// FaultState is the body of every admin response: the clock's faults and
// offsets after the request took effect.
type FaultState struct {
	// Active lists the faults shaping the clock (faults.Clock.Active).
	Active []ActiveFault `json:"active"`
	// Offset is the clock's wall minus its base wall (faults.Clock.Offset);
	// OffsetNs is the same in nanoseconds.
	Offset   Duration `json:"offset"`
	OffsetNs int64    `json:"offset_ns"`
	// MonoOffset is the monotonic offset (only a pause moves it).
	MonoOffset   Duration `json:"mono_offset"`
	MonoOffsetNs int64    `json:"mono_offset_ns"`
	// Wall is the clock's wall reading.
	Wall time.Time `json:"wall"`
	// Warnings, in a POST response only, say what the fault's effects
	// outlive (a forward fault on a node with a checkpoint persists).
	Warnings []string `json:"warnings,omitempty"`
}

// faultState reads the fault clock.
func (s *Server) faultState() FaultState {
	c := s.fault
	st := FaultState{Active: []ActiveFault{}}
	for _, a := range c.Active() {
		st.Active = append(st.Active, ActiveFault{Kind: a.Kind, Detail: a.Detail, Since: time.Unix(0, a.SinceWall).UTC()})
	}
	off, moff := c.Offset(), c.MonoOffset()
	wall, _ := c.Now()
	st.Offset, st.OffsetNs = Duration(off), int64(off)
	st.MonoOffset, st.MonoOffsetNs = Duration(moff), int64(moff)
	st.Wall = time.Unix(0, wall).UTC()
	return st
}

// ErrEmptyToken reports an admin token of whitespace only. Its text never
// changes once published.
var ErrEmptyToken = errors.New("server: admin token is empty after trimming whitespace")

// CleanToken returns an admin token as the node compares it, configured
// and presented alike: without leading and trailing whitespace (a token
// file's or a secret's newline does not count). A non-empty s of
// whitespace only is ErrEmptyToken; an empty s is "" (no token).
func CleanToken(s string) (string, error) {
	t := strings.TrimSpace(s)
	if t == "" && s != "" {
		return "", ErrEmptyToken
	}
	return t, nil
}

// adminAbsent answers /admin/... on a handler without the admin routes:
// disabled (no token), or served on the separate admin listener.
func (s *Server) adminAbsent(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdminToken != "" {
		writeError(w, http.StatusNotFound, errNotFound, "no route for "+quote(r.URL.Path)+": the admin API is served on the admin listener (--admin-addr)")
		return
	}
	writeError(w, http.StatusNotFound, errAdminDisabled, "the admin fault API is disabled: start the node with an admin token "+
		"(SNOWCHAOS_ADMIN_TOKEN, --admin-token-file or --admin-token) on a loopback address, or with --admin-allow-remote")
}

// adminOnly checks the bearer token before h: 401 without credentials, 403
// with a wrong token (compared in constant time over SHA-256 digests, so
// neither the content nor the length of the token leaks).
func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, tok, ok := strings.Cut(auth, " ")
		tok, _ = CleanToken(tok)
		if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="snowchaos-admin"`)
			detail := "missing bearer token (send Authorization: Bearer <token>)"
			if auth != "" {
				detail = "malformed Authorization header (want Bearer <token>)"
			}
			writeError(w, http.StatusUnauthorized, errUnauthorized, detail)
			return
		}
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
			writeError(w, http.StatusForbidden, errForbidden, "wrong admin token")
			return
		}
		h(w, r)
	}
}

// handleFaultsGet serves GET /admin/v1/faults.
func (s *Server) handleFaultsGet(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.faultState())
}

// handleFaultsDelete serves DELETE /admin/v1/faults: every fault reverted.
func (s *Server) handleFaultsDelete(w http.ResponseWriter, _ *http.Request) {
	s.fault.Revert()
	s.log.Info("admin: faults reverted")
	writeJSON(w, http.StatusOK, s.faultState())
}

// handleFaultsPost serves POST /admin/v1/faults.
func (s *Server) handleFaultsPost(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, errUnsupportedMed, "content type "+quote(ct)+" (want application/json)")
			return
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req FaultRequest
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("body exceeds %d bytes", mbe.Limit))
			return
		}
		if errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, errBadFault, "empty body (want a JSON fault)")
			return
		}
		writeError(w, http.StatusBadRequest, errBadFault, "decoding fault: "+err.Error())
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, errBadFault, "trailing data after the JSON fault")
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, errBadFault, err.Error())
		return
	}
	c := s.fault
	s.adminMu.Lock() // the check and the injection see one clock state
	wall, _ := c.Now()
	if err := req.CheckAgainst(wall, c.Offset(), len(c.Active())); err != nil {
		s.adminMu.Unlock()
		code, short := http.StatusBadRequest, errBadFault
		if errors.Is(err, ErrFaultConflict) {
			code, short = http.StatusConflict, errConflict
		}
		writeError(w, code, short, err.Error())
		return
	}
	_ = req.Fault(c).ApplyTo(c) // validated: a clock fault
	st := s.faultState()
	s.adminMu.Unlock()
	st.Warnings = s.faultWarnings(req)
	s.log.Info("admin: fault injected", "kind", req.Kind, "params", req.params())
	writeJSON(w, http.StatusOK, st)
}

// faultWarnings says what a request's effects outlive: a fault that can
// move the wall ahead, on a node with a checkpoint, moves the persisted
// mark, which survives a revert and a restart.
func (s *Server) faultWarnings(req FaultRequest) []string {
	spec, _ := lookupKind(req.Kind)
	if !spec.Forward || s.node.Settings().Checkpoint == nil {
		return nil
	}
	ahead := ""
	switch {
	case req.Kind == faults.KindDrift && *req.PPM > 0:
		ahead = "ever further ahead of the real clock while the drift runs"
	case req.Kind == faults.KindJitter && time.Duration(*req.Max) > 0:
		ahead = "up to " + time.Duration(*req.Max).String() + " ahead of the real clock"
	case req.By != nil && *req.By > 0:
		ahead = "up to " + time.Duration(*req.By).String() + " ahead of the real clock"
	default:
		return nil
	}
	return []string{"the node persists its high-water mark (checkpoint): IDs issued while the clock runs ahead leave a mark " + ahead +
		", which survives DELETE /admin/v1/faults and a restart: until the real clock passes it, the node issues no ID"}
}
