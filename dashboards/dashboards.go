// Package dashboards builds snowchaos's Grafana dashboards in Go with the
// Apache-2.0 grafana-foundation-sdk and writes them as JSON files that are
// committed under json/ and provisioned into Grafana by docker-compose.
//
// Two dashboards exist: Generator (the snowflake_* series of the nodes: IDs
// per second, rewinds, waits, exhaustion, logical lead, refusals,
// readiness, checkpoint, leases, NTP) and Harness (the snowchaos_* series of
// a scenario run: IDs checked, duplicates, order violations, faults,
// windows, verdicts). Both are in UTC and take the Prometheus data source
// and the scraped instances as template variables.
//
// Regenerate the committed files with `make dashboards` (go generate); a
// test fails when they differ from what this package builds. Queries
// extracts every PromQL expression of a rendered dashboard so that tests can
// parse them and check them against the live registries and a real
// Prometheus.
package dashboards

//lint:file-ignore SA1019 dashboard v1 stays: the SDK's dashboardv2 is Grafana's schema v2, experimental in Grafana 12 (compose runs 12.1.0) behind the dynamicDashboards and kubernetesDashboards toggles

//go:generate go run ./cmd/gendash -out json

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Names of the provisioned data sources (dashboards/provisioning) and of the
// dashboards' template variables.
const (
	// PrometheusUID is the UID of the provisioned Prometheus data source,
	// the datasource variable's default.
	PrometheusUID = "prometheus"
	// TracesUID is the UID of the provisioned Jaeger data source that
	// exemplar trace IDs link to.
	TracesUID = "jaeger"
	// DatasourceVar is the template variable choosing the Prometheus data
	// source.
	DatasourceVar = "datasource"
	// InstanceVar is the template variable choosing the scraped instances.
	InstanceVar = "instance"
	// Tag is set on every snowchaos dashboard; the dashboards link to each
	// other through it.
	Tag = "snowchaos"
)

// File is one generated dashboard: where it is committed and its content.
type File struct {
	// Name is the file name under json/, e.g. "snowchaos-generator.json".
	Name string
	// UID is the dashboard's Grafana UID.
	UID string
	// Title is the dashboard's title.
	Title string
	// JSON is the rendered dashboard (Render's output).
	JSON []byte
}

// builders lists every dashboard, in a fixed order.
var builders = []struct {
	name  string
	build func() (dashboard.Dashboard, error)
}{
	{"snowchaos-generator.json", Generator},
	{"snowchaos-harness.json", Harness},
}

// All builds and renders every dashboard, in a fixed order.
func All() ([]File, error) {
	out := make([]File, 0, len(builders))
	for _, b := range builders {
		d, err := b.build()
		if err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", b.name, err)
		}
		data, err := Render(d)
		if err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", b.name, err)
		}
		f := File{Name: b.name, JSON: data}
		if d.Uid != nil {
			f.UID = *d.Uid
		}
		if d.Title != nil {
			f.Title = *d.Title
		}
		out = append(out, f)
	}
	return out, nil
}

// Render encodes d as the committed JSON: two-space indented, HTML
// characters unescaped (PromQL's < and > stay readable), ending in a
// newline. The output is deterministic.
func Render(d dashboard.Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write renders every dashboard into dir (created if missing) and returns
// the paths written.
func Write(dir string) ([]string, error) {
	files, err := All()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(files))
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.JSON, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ---- building blocks shared by the dashboards ----

// promDS refers to the Prometheus data source chosen by the datasource
// variable.
func promDS() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + DatasourceVar + "}")}
}

// inst is the label matcher selecting the chosen instances.
const inst = `instance=~"$` + InstanceVar + `"`

// sel returns metric{instance=~"$instance",extra...}.
func sel(metric string, extra ...string) string {
	s := metric + "{" + inst
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// rateOf returns rate(metric{...}[$__rate_interval]).
func rateOf(metric string, extra ...string) string {
	return "rate(" + sel(metric, extra...) + "[$__rate_interval])"
}

// query is a range query with a legend.
func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(promDS()).
		RefId(ref).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// instant is an instant query with a legend.
func instant(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(promDS()).
		RefId(ref).
		Expr(expr).
		LegendFormat(legend).
		Instant()
}

// nodeLegend names a node: its scraped instance, plus the node label when
// several generators share one endpoint (the harness's in-process targets).
const nodeLegend = "{{instance}} {{node}}"

// thresholds returns absolute thresholds: base color, then (value, color)
// steps in increasing order.
func thresholds(base string, steps ...any) *dashboard.ThresholdsConfigBuilder {
	ts := []dashboard.Threshold{{Value: nil, Color: base}}
	for i := 0; i+1 < len(steps); i += 2 {
		v := toFloat(steps[i])
		ts = append(ts, dashboard.Threshold{Value: &v, Color: steps[i+1].(string)})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(ts)
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("dashboards: threshold value %v (%T)", v, v))
}

// valueMap maps exact values to text and color, in the given order.
func valueMap(pairs ...[3]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, p := range pairs {
		opts[p[0]] = dashboard.ValueMappingResult{Text: cog.ToPtr(p[1]), Color: cog.ToPtr(p[2]), Index: cog.ToPtr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// legendTable is a table legend at the bottom with the given calculations.
func legendTable(calcs ...string) *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().
		DisplayMode(common.LegendDisplayModeTable).
		Placement(common.LegendPlacementBottom).
		ShowLegend(true).
		Calcs(calcs)
}

// legendList is a list legend at the bottom.
func legendList() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().
		DisplayMode(common.LegendDisplayModeList).
		Placement(common.LegendPlacementBottom).
		ShowLegend(true)
}

// tooltipAll shows every series in the tooltip, sorted.
func tooltipAll() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}

// lastValue reduces a series to its last non-null value.
func lastValue() *common.ReduceDataOptionsBuilder {
	return common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)
}

// datasourceVar is the Prometheus data source variable.
func datasourceVar() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder(DatasourceVar).
		Label("Data source").
		Type("prometheus").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("Prometheus")},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr(PrometheusUID)},
		})
}

// instanceVar is the multi-valued instance variable over the instances
// exporting metric.
func instanceVar(metric string) *dashboard.QueryVariableBuilder {
	q := "label_values(" + metric + ", instance)"
	return dashboard.NewQueryVariableBuilder(InstanceVar).
		Label("Instance").
		Datasource(promDS()).
		Query(dashboard.StringOrMap{String: &q}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		})
}

// annotation is a Prometheus annotation query: a marker for every step in
// which expr has a value.
func annotation(name, color, expr, title, text, tags string) *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name(name).
		Datasource(promDS()).
		Enable(true).
		Hide(false).
		IconColor(color).
		Expr(expr).
		Step("$__interval").
		TitleFormat(title).
		TextFormat(text).
		TagKeys(tags).
		Target(prometheus.NewDataqueryBuilder().RefId("Anno").Expr(expr).LegendFormat(title).Range())
}

// builtinAnnotation is Grafana's own "Annotations & Alerts" entry, so that
// users can add manual annotations.
func builtinAnnotation() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name("Annotations & Alerts").
		Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
		Enable(true).
		Hide(true).
		IconColor("rgba(0, 211, 255, 1)").
		Type("dashboard").
		BuiltIn(1)
}

// crossLinks links every snowchaos dashboard from the top bar, keeping the
// time range and variables.
func crossLinks() *dashboard.DashboardLinkBuilder {
	return dashboard.NewDashboardLinkBuilder("snowchaos").
		Type(dashboard.DashboardLinkTypeDashboards).
		Tags([]string{Tag}).
		AsDropdown(true).
		KeepTime(true).
		IncludeVars(false)
}

// base returns a dashboard with the settings both share: UTC, dark-mode
// friendly defaults, 10 s refresh, the last 30 minutes, the tag, links and
// template variables.
func base(uid, title, description, instanceMetric string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{Tag}).
		Timezone("utc").
		WeekStart("monday").
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("10s").
		Time("now-30m", "now").
		Link(crossLinks()).
		WithVariable(datasourceVar()).
		WithVariable(instanceVar(instanceMetric)).
		Annotation(builtinAnnotation())
}

// number gives every panel and row of d a unique ID, in layout order, so
// that links to a panel (viewPanel=N) are stable across regenerations.
func number(d *dashboard.Dashboard) {
	id := uint32(1)
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			p.Panel.Id = cog.ToPtr(id)
			id++
		case p.RowPanel != nil:
			p.RowPanel.Id = id
			id++
			for i := range p.RowPanel.Panels {
				p.RowPanel.Panels[i].Id = cog.ToPtr(id)
				id++
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
