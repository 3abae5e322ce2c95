package exec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/verify"
)

// ParseID parses one ID of kind (the exec block's id, Exec.IDKind) as a
// process answered it: the one step that turns an answer into an ID. It
// takes what verify's parsers take, strictly (a Snowflake in canonical
// decimal; a UUID of the kind's version, hyphenated or not; a ULID; a
// string of printable text), and the error, wrapping verify.ErrInvalidID,
// names the value.
func ParseID(kind verify.Kind, s string) (verify.Value, error) {
	switch kind {
	case verify.KindSnowflake:
		id, err := verify.ParseSnowflake(s)
		if err != nil {
			return verify.Value{}, err
		}
		return verify.SnowflakeValue(id), nil
	case verify.KindString:
		if err := verify.ParseString(s); err != nil {
			return verify.Value{}, err
		}
		return verify.Value{Kind: kind, Text: s}, nil
	case verify.KindUUIDv7, verify.KindULID, verify.KindUUIDv4, verify.KindUUID:
		x, err := verify.Parse128(kind, s)
		if err != nil {
			return verify.Value{}, err
		}
		return verify.Value{Kind: kind, Bits: x}, nil
	}
	return verify.Value{}, fmt.Errorf("exec: unknown ID kind %s", kind)
}

// ParseResponse splits an HTTP answer into ID strings as format says:
// "lines" (one per non-empty line), "json-array" (an array of strings or
// numbers, kept digit for digit) or "json-field" (an object whose field
// holds one ID or an array of them).
func ParseResponse(format, field string, body []byte) ([]string, error) {
	switch format {
	case scenario.FormatLines, "":
		var out []string
		for _, l := range strings.Split(string(body), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return out, nil
	case scenario.FormatJSONArray:
		return jsonIDs(body)
	case scenario.FormatJSONField:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, fmt.Errorf("want a JSON object with field %q: %v", field, err)
		}
		v, ok := obj[field]
		if !ok {
			return nil, fmt.Errorf("the JSON answer has no field %q", field)
		}
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '[' {
			return jsonIDs(t)
		}
		s, err := jsonID(v)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	return nil, fmt.Errorf("exec: unknown response format %q", format)
}

// jsonIDs parses a JSON array of IDs.
func jsonIDs(b []byte) ([]string, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of IDs: %v", err)
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		s, err := jsonID(r)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// jsonID returns a JSON string's value, or a JSON number's digits exactly
// (a number above 2^53 read into a float64 would silently lose digits).
func jsonID(r json.RawMessage) (string, error) {
	r = bytes.TrimSpace(r)
	if len(r) > 0 && r[0] == '"' {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if len(r) > 0 && (r[0] >= '0' && r[0] <= '9' || r[0] == '-') {
		return string(r), nil
	}
	return "", errors.New("want an ID as a JSON string or number, found " + clip(string(r)))
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
