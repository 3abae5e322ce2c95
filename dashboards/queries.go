package dashboards

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// QueryKind says where in a dashboard a query sits.
type QueryKind string

// Query kinds.
const (
	// KindPanel: a panel's target.
	KindPanel QueryKind = "panel"
	// KindAnnotation: a Prometheus annotation query.
	KindAnnotation QueryKind = "annotation"
	// KindVariable: a template variable's query (label_values(...), not
	// PromQL).
	KindVariable QueryKind = "variable"
)

// Query is one query of a rendered dashboard.
type Query struct {
	// Dashboard is the dashboard's UID.
	Dashboard string
	// Kind is where the query sits.
	Kind QueryKind
	// Name is the panel title, annotation name or variable name.
	Name string
	// RefID is the target's refId (panels only).
	RefID string
	// Expr is the expression as committed, with template variables.
	Expr string
}

// String names the query for test failures: "snowchaos-generator panel
// "IDs issued per second" A".
func (q Query) String() string {
	s := fmt.Sprintf("%s %s %q", q.Dashboard, q.Kind, q.Name)
	if q.RefID != "" {
		s += " " + q.RefID
	}
	return s
}

// jsonPanel is the part of a rendered panel Queries reads.
type jsonPanel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type string `json:"type"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []jsonPanel `json:"panels"` // a collapsed row's panels
}

// Queries returns every Prometheus query of a rendered dashboard (Render's
// output, or a committed file): panel targets (rows included), annotation
// queries and template-variable queries, in document order. It reads the
// JSON, not the builder, so that it sees exactly what Grafana will load.
func Queries(dashboardJSON []byte) ([]Query, error) {
	var d struct {
		UID         string      `json:"uid"`
		Panels      []jsonPanel `json:"panels"`
		Annotations struct {
			List []struct {
				Name       string `json:"name"`
				Datasource *struct {
					Type string `json:"type"`
				} `json:"datasource"`
				Expr   string `json:"expr"`
				Target *struct {
					Expr string `json:"expr"`
				} `json:"target"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("dashboards: decoding dashboard: %w", err)
	}
	var out []Query
	var walk func(ps []jsonPanel)
	walk = func(ps []jsonPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Dashboard: d.UID, Kind: KindPanel, Name: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		if a.Datasource == nil || a.Datasource.Type != "prometheus" {
			continue
		}
		expr := a.Expr
		if a.Target != nil && a.Target.Expr != "" {
			if expr != "" && expr != a.Target.Expr {
				return nil, fmt.Errorf("dashboards: annotation %q: expr and target.expr differ", a.Name)
			}
			expr = a.Target.Expr
		}
		out = append(out, Query{Dashboard: d.UID, Kind: KindAnnotation, Name: a.Name, Expr: expr})
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var m struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &m); err != nil {
				return nil, fmt.Errorf("dashboards: variable %q: query is neither a string nor an object", v.Name)
			}
			q = m.Query
		}
		out = append(out, Query{Dashboard: d.UID, Kind: KindVariable, Name: v.Name, Expr: q})
	}
	return out, nil
}

// Expand substitutes Grafana's variables in a panel or annotation
// expression the way Grafana would before sending it to Prometheus:
// $__rate_interval, $__interval and $__range become window, and $instance
// (or ${instance}) becomes instanceRegex. The result is plain PromQL.
func Expand(expr string, window time.Duration, instanceRegex string) string {
	w := model.Duration(window).String()
	return strings.NewReplacer(
		"${__rate_interval}", w,
		"$__rate_interval", w,
		"${__interval}", w,
		"$__interval", w,
		"${__range}", w,
		"$__range", w,
		"${"+InstanceVar+"}", instanceRegex,
		"$"+InstanceVar, instanceRegex,
	).Replace(expr)
}

// LabelValues parses a template variable query of the form
// label_values(metric, label) or label_values(label).
func LabelValues(q string) (metric, label string, err error) {
	s := strings.TrimSpace(q)
	if !strings.HasPrefix(s, "label_values(") || !strings.HasSuffix(s, ")") {
		return "", "", fmt.Errorf("dashboards: %q is not label_values(...)", q)
	}
	args := strings.Split(s[len("label_values("):len(s)-1], ",")
	switch len(args) {
	case 1:
		return "", strings.TrimSpace(args[0]), nil
	case 2:
		return strings.TrimSpace(args[0]), strings.TrimSpace(args[1]), nil
	}
	return "", "", fmt.Errorf("dashboards: %q: want 1 or 2 arguments", q)
}
