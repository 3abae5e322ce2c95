package exec

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// A process's own clock reading, the answer to the time request, is the
// one line it prints (stdio) or the body it returns (http): its wall clock
// as
//
//	1767225600.123456   Unix seconds with a fraction (any number of digits)
//	1767225600123       Unix time as an integer: 10 or 11 digits are
//	                    seconds, 12 to 14 milliseconds, 15 to 17
//	                    microseconds, 18 to 20 nanoseconds
//	2026-01-01T00:00:00.123Z   RFC 3339
//
// what Date.now(), time.time(), System.currentTimeMillis(),
// time.Now().UnixNano(), clock_gettime or $EPOCHREALTIME print as they
// are. The reading's resolution (its last digit) widens the interval the
// harness places it in.

// ErrNotReading: an answer to the time request is not a clock reading.
var ErrNotReading = errors.New("exec: not a clock reading")

// ParseReading parses a clock reading as above and returns it in Unix ns
// with its resolution.
func ParseReading(s string) (ns int64, res time.Duration, err error) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || len(s) > 40 {
		return 0, 0, fmt.Errorf("%w: %q (want Unix seconds such as 1767225600.123, an integer of ms, µs or ns, or RFC 3339)", ErrNotReading, clip(s))
	}
	if strings.ContainsAny(s, "T-:") {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %q (want Unix seconds such as 1767225600.123, an integer of ms, µs or ns, or RFC 3339 such as 2026-01-01T00:00:00.123Z)", ErrNotReading, clip(s))
		}
		res := time.Second
		if i := strings.IndexByte(s, '.'); i >= 0 {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			res = pow10(9 - (j - i - 1))
		}
		return t.UnixNano(), res, nil
	}
	whole, frac, dot := strings.Cut(s, ".")
	if !digits(whole) || (dot && !digits(frac)) || whole[0] == '0' {
		return 0, 0, fmt.Errorf("%w: %q (want Unix seconds such as 1767225600.123, an integer of ms, µs or ns, or RFC 3339)", ErrNotReading, clip(s))
	}
	if dot {
		if len(whole) > 11 {
			return 0, 0, fmt.Errorf("%w: %q: %d digits before the point; seconds have 10", ErrNotReading, clip(s), len(whole))
		}
		if len(frac) > 9 {
			frac = frac[:9] // below a nanosecond
		}
		ns = atoi(whole)*1e9 + atoi(frac)*int64(pow10(9-len(frac)))
		return ns, pow10(9 - len(frac)), nil
	}
	var unit int64
	switch n := len(whole); {
	case n >= 10 && n <= 11:
		unit = 1e9
	case n >= 12 && n <= 14:
		unit = 1e6
	case n >= 15 && n <= 17:
		unit = 1e3
	case n == 18 || n == 19 && whole <= "9223372036854775807":
		unit = 1
	default:
		return 0, 0, fmt.Errorf("%w: %q: an integer of %d digits is no Unix time in s, ms, µs or ns", ErrNotReading, clip(s), n)
	}
	v := atoi(whole)
	if v > (1<<63-1)/unit {
		return 0, 0, fmt.Errorf("%w: %q: out of range", ErrNotReading, clip(s))
	}
	return v * unit, time.Duration(unit), nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// atoi parses at most 19 decimal digits (checked by the caller).
func atoi(s string) int64 {
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v
}

// pow10 returns 10^e ns for e in [0, 9].
func pow10(e int) time.Duration {
	d := time.Duration(1)
	for ; e > 0; e-- {
		d *= 10
	}
	return d
}
