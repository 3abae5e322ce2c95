package server

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/snowchaos/snowchaos/generator"
)

// ErrBadCount reports a count query parameter that is not a decimal integer
// in [1, max]. Its text never changes once published.
var ErrBadCount = errors.New("server: invalid count")

// maxQuoted caps how much of a bad input an error message repeats.
const maxQuoted = 64

// quote quotes s for an error message, truncated to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// ParseCount parses the count query parameter of /v1/ids: ASCII digits only
// (no sign, no spaces, no exponent, no leading zero, as an ID), a value in
// [1, max]. The error names the value and wraps ErrBadCount. It does not
// allocate on success.
func ParseCount(s string, max int) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: count is empty (want an integer in [1, %d])", ErrBadCount, max)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: count %s is not a decimal integer in [1, %d]", ErrBadCount, quote(s), max)
		}
		if n > max {
			continue // keep scanning so a later non-digit is reported as such
		}
		n = n*10 + int(c-'0')
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: count %s has a leading zero (want an integer in [1, %d] without one)", ErrBadCount, quote(s), max)
	}
	if n < 1 || n > max {
		return 0, fmt.Errorf("%w: count %s is out of range [1, %d]", ErrBadCount, quote(s), max)
	}
	return n, nil
}

// ParseQuery parses a raw query strictly (a malformed escape or a ';' is
// an error naming it, where url.ParseQuery would only report the first)
// and rejects any key not in allowed, naming it and what the route takes.
func ParseQuery(rawQuery string, allowed ...string) (map[string][]string, error) {
	vals := map[string][]string{}
	for q := rawQuery; q != ""; {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "" {
			continue
		}
		if strings.Contains(kv, ";") {
			return nil, errors.New("query " + quote(kv) + " contains a semicolon")
		}
		k, v, _ := strings.Cut(kv, "=")
		uk, err := unescape(k)
		if err != nil {
			return nil, errors.New("query key " + quote(k) + ": " + err.Error())
		}
		if !slices.Contains(allowed, uk) {
			takes := "takes none"
			if len(allowed) > 0 {
				takes = "want " + strings.Join(allowed, ", ")
			}
			return nil, errors.New("unknown query parameter " + quote(uk) + " (" + takes + ")")
		}
		uv, err := unescape(v)
		if err != nil {
			return nil, errors.New("query value " + quote(v) + " of " + quote(uk) + ": " + err.Error())
		}
		vals[uk] = append(vals[uk], uv)
	}
	return vals, nil
}

// unescape is url.QueryUnescape without allocating when s has no escapes.
func unescape(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// decodePrefix is the path prefix of the decode endpoint.
const decodePrefix = "/v1/decode/"

// ParseDecodePath extracts and parses the ID from a /v1/decode/{id} path
// (the escaped path as received, so "%2F" cannot smuggle a slash). The ID
// must be a strict decimal (generator.ParseID); the error names the value
// and wraps generator.ErrInvalidID.
func ParseDecodePath(escapedPath string) (generator.ID, error) {
	rest, ok := strings.CutPrefix(escapedPath, decodePrefix)
	if !ok {
		if escapedPath+"/" == decodePrefix {
			rest = ""
		} else {
			return 0, fmt.Errorf("%w: path %s is not under %s", generator.ErrInvalidID, quote(escapedPath), decodePrefix)
		}
	}
	if strings.IndexByte(rest, '/') >= 0 {
		return 0, fmt.Errorf("%w: %s contains a slash", generator.ErrInvalidID, quote(rest))
	}
	return generator.ParseID(rest)
}
