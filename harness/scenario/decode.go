package scenario

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// A scenario file is read in three steps. The YAML library parses it into
// a node tree; the tree is decoded into the tagged structs of parse.go,
// whose every value is one of the wrappers below (a leaf, an object, a
// list); then the structs become the model. The wrappers keep each
// value's node and never fail the decode: what is malformed (a value of
// the wrong type, an unknown or repeated key) is reported by report, with
// the file, line and key path of the node (paths), and the conversion to
// the model sees only values that are present and well formed.
//
// An object checks its keys against its struct's yaml tags itself rather
// than through Decoder.KnownFields: that switch reaches no value decoded
// by a custom unmarshaler (Node.Decode has none), and its error names the
// Go type, not the key path, with no suggestion.

// Scalar types of a scenario file: each reads one YAML scalar, with the
// bounds every value of its kind has.
type (
	text     string        // any string
	name     string        // a name (validName)
	whole    int64         // a whole number; '_' separates digits
	number   float64       // a finite number
	onOff    bool          // on/off, true/false, yes/no
	duration time.Duration // a Go duration, not negative, at most a year
	offset   time.Duration // a Go duration of either sign, at most a year
	instant  time.Time     // an RFC 3339 time in the years 1971 to 2200
)

// maxDuration bounds every duration in a file (a year).
const maxDuration = 366 * 24 * time.Hour

// leaf is one scalar value of type T. N is its node (nil when the key is
// absent); a value that is not a T leaves V zero and says why.
type leaf[T text | name | whole | number | onOff | duration | offset | instant] struct {
	V   T
	N   *yaml.Node
	bad string // why the scalar is not a T
	not bool   // the value is not a scalar at all
}

// UnmarshalYAML implements yaml.Unmarshaler; it never fails.
func (l *leaf[T]) UnmarshalYAML(n *yaml.Node) error {
	l.N = n
	v, ok := scalar(n)
	if !ok {
		l.not = true
		return nil
	}
	l.bad = read(&l.V, v)
	return nil
}

// ok reports whether the key is present and its value a T.
func (l *leaf[T]) ok() bool { return l.N != nil && !l.not && l.bad == "" }

// report reports a value that is not a T; want overrides what the message
// says a T is.
func (l *leaf[T]) report(p *parser, want string) {
	switch {
	case l.N == nil:
	case l.not:
		if want == "" {
			want = wantOf(&l.V)
		}
		p.fail(l.N, "want %s, found %s", want, describe(l.N))
	case l.bad != "":
		p.fail(l.N, "%s", l.bad)
	}
}

// wantOf names what a value of v's type is, for messages.
func wantOf(v any) string {
	switch v.(type) {
	case *name:
		return "a name"
	case *whole:
		return "a whole number"
	case *number:
		return "a number"
	case *onOff:
		return "on or off"
	case *duration, *offset:
		return "a duration such as 150ms"
	case *instant:
		return "an RFC 3339 time such as 2026-06-30T23:59:30Z"
	}
	return "a string"
}

// read parses s into *v and returns why it cannot ("" when it can).
func read(v any, s string) string {
	switch v := v.(type) {
	case *text:
		*v = text(s)
	case *name:
		if !validName(s) {
			return fmt.Sprintf("%q is not a valid name: use letters, digits, '-', '_' and '.', starting with a letter or digit", s)
		}
		*v = name(s)
	case *whole:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return fmt.Sprintf("want a whole number, found %q", s)
		}
		*v = whole(n)
	case *number:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("want a number, found %q", s)
		}
		*v = number(f)
	case *onOff:
		switch strings.ToLower(s) {
		case "true", "on", "yes":
			*v = true
		case "false", "off", "no":
			*v = false
		default:
			return fmt.Sprintf("want on or off (true or false), found %q", s)
		}
	case *duration, *offset:
		d, err := time.ParseDuration(s)
		_, signed := v.(*offset)
		switch {
		case err != nil:
			return fmt.Sprintf("want a duration such as 150ms or 24h, found %q", s)
		case d < 0 && !signed:
			return "must not be negative, found " + s
		case d > maxDuration || d < -maxDuration:
			return s + " is longer than a year"
		}
		if signed {
			*v.(*offset) = offset(d)
		} else {
			*v.(*duration) = duration(d)
		}
	case *instant:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Sprintf("want an RFC 3339 time such as 2026-06-30T23:59:30Z, found %q", s)
		}
		if t.Year() < 1971 || t.Year() > 2200 {
			return s + " is outside the years 1971 to 2200"
		}
		*v = instant(t.UTC())
	}
	return ""
}

// validName reports whether s is a name: up to 64 letters, digits, '-',
// '_' and '.', starting with a letter or digit.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// object is a mapping decoded into struct T by T's yaml tags. A key T does
// not name (nor extraKeys, when T has them), a key that is not a plain
// name and a key given twice are kept aside, with a value that is not a
// mapping, for report.
type object[T any] struct {
	V        T
	N        *yaml.Node
	wrong    bool         // not a mapping
	unknown  []*yaml.Node // keys T does not take
	repeated []*yaml.Node // keys given before
	err      error        // the library's own failure (aliasing beyond its bounds)
}

// extraKeys is implemented by a struct that takes keys besides its tags,
// into an inline map (a fault's parameters).
type extraKeys interface{ extraKeys() []string }

// UnmarshalYAML implements yaml.Unmarshaler; it never fails.
func (o *object[T]) UnmarshalYAML(n *yaml.Node) error {
	o.N = n
	if n.Kind != yaml.MappingNode {
		o.wrong = true
		return nil
	}
	keys := keysOf(&o.V)
	kept := *n
	kept.Content = nil
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		switch {
		case k.Kind != yaml.ScalarNode || !slices.Contains(keys, k.Value):
			o.unknown = append(o.unknown, k)
		case seen[k.Value]:
			o.repeated = append(o.repeated, k)
		default:
			seen[k.Value] = true
			kept.Content = append(kept.Content, k, n.Content[i+1])
		}
	}
	o.err = kept.Decode(&o.V)
	return nil
}

// present reports whether the key is present with a mapping.
func (o *object[T]) present() bool { return o.N != nil && !o.wrong }

// report reports what o kept aside, then every value of o.V.
func (o *object[T]) report(p *parser, _ string) {
	if o.N == nil {
		return
	}
	keys := keysOf(&o.V)
	if o.wrong {
		p.fail(o.N, "want a mapping with keys %s, found %s", strings.Join(keys, ", "), describe(o.N))
		return
	}
	if o.err != nil {
		p.fail(o.N, "cannot parse: %v", o.err)
	}
	for _, k := range o.unknown {
		if k.Kind != yaml.ScalarNode {
			p.fail(o.N, "keys must be plain names")
			continue
		}
		p.fail(k, "unknown key %q%s (known: %s)", k.Value, suggest(k.Value, keys), strings.Join(keys, ", "))
	}
	for _, k := range o.repeated {
		p.fail(k, "key %q repeated", k.Value)
	}
	reportFields(p, reflect.ValueOf(&o.V).Elem())
}

// keysOf returns the keys of the struct *v points to: its yaml tags, the
// inline structs' included, in order, then its extraKeys.
func keysOf(v any) []string {
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case opts == "inline" && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case tag != "" && tag != "-":
				keys = append(keys, tag)
			}
		}
	}
	walk(reflect.TypeOf(v).Elem())
	if x, ok := v.(extraKeys); ok {
		keys = append(keys, x.extraKeys()...)
	}
	return keys
}

// reported is a decoded value that reports its own problems.
type reported interface{ report(p *parser, want string) }

// reportFields reports every field of struct v that reports itself, with
// its `want` tag, inline structs included.
func reportFields(p *parser, v reflect.Value) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if r, ok := f.Addr().Interface().(reported); ok {
			r.report(p, sf.Tag.Get("want"))
		} else if f.Kind() == reflect.Struct {
			reportFields(p, f)
		}
	}
}

// list is a sequence of T.
type list[T any] struct {
	V     []T
	N     *yaml.Node
	wrong bool  // not a sequence
	err   error // the library's own failure
}

// UnmarshalYAML implements yaml.Unmarshaler; it never fails.
func (l *list[T]) UnmarshalYAML(n *yaml.Node) error {
	l.N = n
	if n.Kind != yaml.SequenceNode {
		l.wrong = true
		return nil
	}
	l.err = n.Decode(&l.V)
	return nil
}

// present reports whether the key is present with a list.
func (l *list[T]) present() bool { return l.N != nil && !l.wrong }

// report reports a value that is not a list, then every item, with want.
func (l *list[T]) report(p *parser, want string) {
	switch {
	case l.N == nil:
	case l.wrong:
		p.fail(l.N, "want a list, found %s", describe(l.N))
	case l.err != nil:
		p.fail(l.N, "cannot parse: %v", l.err)
	default:
		for i := range l.V {
			if r, ok := any(&l.V[i]).(reported); ok {
				r.report(p, want)
			}
		}
	}
}

// raw is a value the conversion reads from its node itself (a fault's
// nodes, an expect block, a worker range, an exec block).
type raw struct{ N *yaml.Node }

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *raw) UnmarshalYAML(n *yaml.Node) error {
	r.N = n
	return nil
}

// nothing tags a scalar that holds nothing ("key:", ~, null). The YAML
// library decodes a null as the zero value without calling the value's
// unmarshaler; under this tag the wrappers see it, and say "found
// nothing".
const nothing = "!nothing"

// paths maps every node of a document to the key path of the value it
// is or holds the key of ("nodes[0].name"), and every mapping value to
// its key; a value reached through an alias has the path of its anchor.
// It tags every null scalar nothing.
func paths(root *yaml.Node) (map[*yaml.Node]string, map[*yaml.Node]*yaml.Node) {
	out, keys := map[*yaml.Node]string{}, map[*yaml.Node]*yaml.Node{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if _, seen := out[n]; seen {
			return
		}
		out[n] = path
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			n.Tag = nothing
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				kp := join(path, n.Content[i].Value)
				out[n.Content[i]] = kp
				keys[n.Content[i+1]] = n.Content[i]
				walk(n.Content[i+1], kp)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root, "")
	return out, keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// describe says what a node holds, for messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == nothing {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// scalar returns n's value when it is a scalar that holds something.
func scalar(n *yaml.Node) (string, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == nothing {
		return "", false
	}
	return n.Value, true
}
