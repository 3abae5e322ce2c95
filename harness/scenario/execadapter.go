package scenario

import (
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// The helpers below serve exec.go, which still reads its block from the
// node tree with explicit key paths; the rest of the parser decodes into
// tagged structs (decode.go).

// entry is one key of a mapping with its value.
type entry struct {
	key *yaml.Node
	val *yaml.Node
}

// mapping checks that n is a mapping whose keys are all in allowed,
// reporting unknown and repeated keys, and returns the entries by key.
func (p *parser) mapping(n *yaml.Node, path string, allowed ...string) map[string]entry {
	n = deref(n)
	out := map[string]entry{}
	if n == nil || n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping with keys %s, found %s", strings.Join(allowed, ", "), describe(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode:
			p.errorf(k, path, "keys must be plain names")
		case !slices.Contains(allowed, k.Value):
			p.errorf(k, join(path, k.Value), "unknown key %q%s (known: %s)", k.Value, suggest(k.Value, allowed), strings.Join(allowed, ", "))
		case out[k.Value].key != nil:
			p.errorf(k, join(path, k.Value), "key %q repeated", k.Value)
		default:
			out[k.Value] = entry{k, deref(v)}
		}
	}
	return out
}

// scalar returns the value of a scalar node, or reports what it found.
func (p *parser) scalar(n *yaml.Node, key, want string) (string, bool) {
	v, ok := scalar(n)
	if !ok {
		p.errorf(n, key, "want %s, found %s", want, describe(n))
	}
	return v, ok
}

// sequence returns a list's items, or reports what it found.
func (p *parser) sequence(n *yaml.Node, key string) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		p.errorf(n, key, "want a list, found %s", describe(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
	}
	return out
}

// integer reads a whole number within [lo, hi].
func (p *parser) integer(n *yaml.Node, key string, lo, hi int64) (int64, bool) {
	s, ok := p.scalar(n, key, "a whole number")
	if !ok {
		return 0, false
	}
	var v whole
	if bad := read(&v, s); bad != "" {
		p.errorf(n, key, "%s", bad)
		return 0, false
	}
	if int64(v) < lo || int64(v) > hi {
		p.errorf(n, key, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return int64(v), true
}

// duration reads a duration; negative values only when signed.
func (p *parser) duration(n *yaml.Node, key string, signed bool) (time.Duration, bool) {
	s, ok := p.scalar(n, key, "a duration such as 150ms")
	if !ok {
		return 0, false
	}
	var d offset
	if bad := read(&d, s); bad != "" {
		p.errorf(n, key, "%s", bad)
		return 0, false
	}
	if d < 0 && !signed {
		p.errorf(n, key, "must not be negative, found %s", s)
		return 0, false
	}
	return time.Duration(d), true
}

// contains reports whether ss holds s.
func contains(ss []string, s string) bool { return slices.Contains(ss, s) }
