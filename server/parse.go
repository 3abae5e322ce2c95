package server

import (
	"errors"
	"fmt"
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
// (no sign, no spaces, no exponent), a value in [1, max]. The error names
// the value and wraps ErrBadCount. It does not allocate on success.
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
	if n < 1 || n > max {
		return 0, fmt.Errorf("%w: count %s is out of range [1, %d]", ErrBadCount, quote(s), max)
	}
	return n, nil
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
