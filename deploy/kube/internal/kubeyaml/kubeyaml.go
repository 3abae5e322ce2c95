// Package kubeyaml writes typed Kubernetes objects as YAML documents and
// reads them back strictly.
//
// Objects are built from their API types (k8s.io/api, the Chaos Mesh and
// Prometheus Operator API modules) and written the way kubectl would send
// them: the status a client never sets and a null creationTimestamp are
// left out, keys are sorted, and documents are separated by "---". Decode
// rejects unknown and duplicate fields, so a committed manifest cannot hold
// a key the API type does not have.
package kubeyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Marshal returns obj as one YAML document (without the "---" separator):
// its JSON form with "status" and a null metadata.creationTimestamp
// removed, keys sorted.
func Marshal(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, fmt.Errorf("kubeyaml: %T is not a JSON object: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		if v, ok := md["creationTimestamp"]; ok && v == nil {
			delete(md, "creationTimestamp")
		}
	}
	j, err = json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// Write writes header (each line prefixed with "# ", may be empty) and then
// every object as a YAML document, each starting with "---".
func Write(w io.Writer, header []string, objs ...any) error {
	var buf bytes.Buffer
	for _, l := range header {
		if l == "" {
			buf.WriteString("#\n")
			continue
		}
		buf.WriteString("# " + l + "\n")
	}
	for _, o := range objs {
		y, err := Marshal(o)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Split returns the YAML documents of data, without comments-only or empty
// documents.
func Split(data []byte) [][]byte {
	var out [][]byte
	for _, doc := range strings.Split("\n"+string(data), "\n---\n") {
		body := false
		for _, l := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				body = true
				break
			}
		}
		if body {
			out = append(out, []byte(strings.TrimPrefix(doc, "\n")))
		}
	}
	return out
}

// TypeMeta is the apiVersion and kind of a document.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Kind returns the apiVersion and kind of one YAML document.
func Kind(doc []byte) (TypeMeta, error) {
	var tm TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return tm, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return tm, errors.New("kubeyaml: document without apiVersion or kind")
	}
	return tm, nil
}

// DecodeStrict decodes one YAML document into obj, failing on a field obj's
// type does not have and on a repeated key.
func DecodeStrict(doc []byte, obj any) error {
	return yaml.UnmarshalStrict(doc, obj)
}
