package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// Duration is a time.Duration whose JSON form is a Go duration string
// ("-150ms"); it also reads an integer of nanoseconds. It is the form of
// every duration of the admin API, the fault parameters' included.
type Duration = faults.Duration

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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, errBadFault, "reading the body: "+err.Error())
		return
	}
	f, err := ParseFault(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadFault, err.Error())
		return
	}
	c := s.fault
	s.adminMu.Lock() // the check and the injection see one clock state
	wall, _ := c.Now()
	if err := CheckAgainst(f, wall, c.Offset(), len(c.Active())); err != nil {
		s.adminMu.Unlock()
		code, short := http.StatusBadRequest, errBadFault
		if errors.Is(err, ErrFaultConflict) {
			code, short = http.StatusConflict, errConflict
		}
		writeError(w, code, short, err.Error())
		return
	}
	_ = f.ApplyTo(c) // validated: a clock fault
	st := s.faultState()
	s.adminMu.Unlock()
	st.Warnings = s.faultWarnings(f)
	applied, _ := f.MarshalJSON() // valid: an admin kind
	s.log.Info("admin: fault injected", "kind", f.Kind, "fault", string(applied))
	writeJSON(w, http.StatusOK, st)
}

// faultWarnings says what a request's effects outlive: a fault that can
// move the wall ahead, on a node with a checkpoint, moves the persisted
// mark, which survives a revert and a restart.
func (s *Server) faultWarnings(f faults.Fault) []string {
	spec, _ := faults.Lookup(f.Kind)
	if !spec.Forward || s.node.Settings().Checkpoint == nil {
		return nil
	}
	ahead := ""
	switch {
	case f.Kind == faults.KindDrift && f.PPM > 0:
		ahead = "ever further ahead of the real clock while the drift runs"
	case f.Kind == faults.KindJitter && f.Max > 0:
		ahead = "up to " + f.Max.String() + " ahead of the real clock"
	case f.By > 0:
		ahead = "up to " + f.By.String() + " ahead of the real clock"
	default:
		return nil
	}
	return []string{"the node persists its high-water mark (checkpoint): IDs issued while the clock runs ahead leave a mark " + ahead +
		", which survives DELETE /admin/v1/faults and a restart: until the real clock passes it, the node issues no ID"}
}
