package server

import (
	"flag"
	"fmt"
	"github.com/snowchaos/snowchaos/faults"
	"os"
	"reflect"
	"strings"
	"testing"
)

var updateDoc = flag.Bool("update", false, "rewrite the generated sections of docs/http-api.md")

// httpAPIDoc is the document whose fault reference FaultKinds generates.
const httpAPIDoc = "../docs/http-api.md"

// Markers around the generated fault reference in httpAPIDoc.
const (
	docBegin = "<!-- BEGIN fault reference: generated from server.FaultKinds by `go test ./server -run TestHTTPAPIDoc -update`; edit the table in faults/spec.go, not here -->\n"
	docEnd   = "<!-- END fault reference -->\n"
)

// renderFaultKinds renders the fault reference of docs/http-api.md.
func renderFaultKinds(kinds []faults.Spec) string {
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "### `%s`\n\n%s.", k.Kind, upperFirst(k.Effect))
		if len(k.OneOf) > 0 {
			fmt.Fprintf(&b, " Give exactly one of %s.", codeList(k.OneOf))
		}
		if k.Forward {
			b.WriteString(" It can move the wall clock ahead: on a node with a checkpoint the response carries a warning that the mark it leaves persists.")
		}
		b.WriteString("\n\n")
		if len(k.Params) == 0 {
			b.WriteString("No parameters.\n\n")
		} else {
			b.WriteString("| parameter | type | required | bounds | meaning |\n|---|---|---|---|---|\n")
			for _, p := range k.Params {
				req := "no"
				if p.Required {
					req = "yes"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, p.Type, req, p.Bounds(), p.Meaning)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Example: `%s`\n\n", k.Example)
	}
	fmt.Fprintf(&b, "### Limits that depend on the clock's state (409)\n\n"+
		"- A `step`, `smear` or `slew` may not take the clock's offset (`offset` in the response) beyond ±%v.\n"+
		"- At most %d faults may be listed in `active` when a `leap` or `smear` is added (each adds one).\n\n",
		faults.MaxOffset, faults.MaxListed)
	return b.String()
}

// upperFirst capitalises the first letter of s.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// codeList formats names as "`a` and `b`".
func codeList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, " and ")
}

// TestHTTPAPIDoc checks that docs/http-api.md documents exactly the fault
// kinds, parameters and bounds Validate enforces (its reference section is
// generated from FaultKinds; -update rewrites it), and that every example
// there is a body the admin API accepts.
func TestHTTPAPIDoc(t *testing.T) {
	raw, err := os.ReadFile(httpAPIDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated section's markers", httpAPIDoc)
	}
	want := renderFaultKinds(FaultKinds())
	if got := doc[i+len(docBegin) : j]; got != want {
		if !*updateDoc {
			t.Fatalf("%s's fault reference differs from server.FaultKinds; run go test ./server -run TestHTTPAPIDoc -update and review the diff", httpAPIDoc)
		}
		doc = doc[:i+len(docBegin)] + want + doc[j:]
		if err := os.WriteFile(httpAPIDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range FaultKinds() {
		if f, err := ParseFault([]byte(k.Example)); err != nil || f.Kind != k.Kind {
			t.Errorf("%s example %s: %v (kind %q)", k.Kind, k.Example, err, f.Kind)
			continue
		}
		if !strings.Contains(doc, "`"+string(k.Kind)+"`") {
			t.Errorf("%s does not name kind %q", httpAPIDoc, k.Kind)
		}
	}
}

// jsonKeys returns the JSON keys of struct type t and the structs it holds.
func jsonKeys(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Info]().PkgPath() {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
		keys = append(keys, jsonKeys(f.Type)...)
	}
	return keys
}

// TestHTTPAPIDocKeys checks that docs/http-api.md names every JSON key of
// the bodies the node answers with.
func TestHTTPAPIDocKeys(t *testing.T) {
	raw, err := os.ReadFile(httpAPIDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{Info{}, DecodeResponse{}, FaultState{}, ErrorBody{}, Status{}} {
		for _, k := range jsonKeys(reflect.TypeOf(v)) {
			if !strings.Contains(string(raw), `"`+k+`"`) && !strings.Contains(string(raw), "`"+k+"`") {
				t.Errorf("%s does not name %T's key %q", httpAPIDoc, v, k)
			}
		}
	}
}
