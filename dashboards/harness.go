package dashboards

//lint:file-ignore SA1019 dashboard v1 stays: the SDK's dashboardv2 is Grafana's schema v2, experimental in Grafana 12 (compose runs 12.1.0) behind the dynamicDashboards and kubernetesDashboards toggles

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// HarnessUID is the Harness dashboard's UID.
const HarnessUID = "snowchaos-harness"

// Harness returns the dashboard of scenario runs (the snowchaos_* series of
// `snowchaos run --metrics-addr`).
func Harness() (dashboard.Dashboard, error) {
	b := base(HarnessUID, "snowchaos / harness",
		"Scenario runs: IDs the verifier checked, duplicates and order violations found, faults injected (also as annotations), the current scenario and fault window, and each invariant's verdict. Timestamps in UTC.",
		"snowchaos_ids_checked_total").
		Annotation(annotation("Faults injected", "orange",
			`sum by (instance, kind) (increase(`+sel("snowchaos_faults_injected_total")+`[$__rate_interval])) > 0`,
			"fault: {{kind}}", "{{instance}} injected a {{kind}} fault",
			"kind")).
		Annotation(annotation("Fault windows", "purple",
			`max by (instance, window, kind) (`+sel("snowchaos_fault_window")+`) == 1`,
			"window {{window}}", "fault window {{window}} ({{kind}}) active",
			"window,kind"))

	b = b.WithRow(dashboard.NewRowBuilder("Verdict")).
		WithPanel(duplicates()).
		WithPanel(orderViolations()).
		WithPanel(checkedTotal()).
		WithPanel(currentScenario()).
		WithPanel(verdicts())

	b = b.WithRow(dashboard.NewRowBuilder("Live")).
		WithPanel(checkedPerSecond()).
		WithPanel(findings()).
		WithPanel(faultsByKind()).
		WithPanel(faultWindows())

	d, err := b.Build()
	if err != nil {
		return d, err
	}
	number(&d)
	return d, nil
}

// bigCount is a stat that is green at zero and red from one on.
func bigCount(title, description, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Span(4).Height(7).
		Unit("none").Decimals(0).
		Thresholds(thresholds("green", 1, "red")).
		ColorMode(common.BigValueColorModeBackgroundSolid).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValue).
		JustifyMode(common.BigValueJustifyModeCenter).
		ReduceOptions(lastValue()).
		NoValue("0").
		WithTarget(query("A", expr, title))
}

func duplicates() *stat.PanelBuilder {
	return bigCount("Duplicates",
		"IDs the verifier saw issued more than once, across all nodes and restarts (snowchaos_duplicates_total). Anything but 0 is a failed run.",
		`sum(`+sel("snowchaos_duplicates_total")+`)`)
}

func orderViolations() *stat.PanelBuilder {
	return bigCount("Order violations",
		"IDs not greater than their predecessor in a sequential stream, or than every ID before a restart (snowchaos_order_violations_total).",
		`sum(`+sel("snowchaos_order_violations_total")+`)`)
}

func checkedTotal() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("IDs checked").
		Description("IDs the verifier checked (snowchaos_ids_checked_total).").
		Span(4).Height(7).
		Unit("short").
		Thresholds(thresholds("blue")).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeArea).
		TextMode(common.BigValueTextModeValue).
		ReduceOptions(lastValue()).
		WithTarget(query("A", `sum(`+sel("snowchaos_ids_checked_total")+`)`, "IDs checked"))
}

func currentScenario() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("Scenario").
		Description("The scenario running, or last run, and its target (snowchaos_scenario_info), with the fault window active now (snowchaos_fault_window), if any.").
		Span(4).Height(7).
		Thresholds(thresholds("text")).
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeName).
		Orientation(common.VizOrientationHorizontal).
		ReduceOptions(lastValue()).
		WithTarget(query("A", `max by (scenario, target) (`+sel("snowchaos_scenario_info")+`)`, "{{scenario}} → {{target}}")).
		WithTarget(instant("B", `max by (window, kind) (`+sel("snowchaos_fault_window")+`) == 1`, "window: {{window}} ({{kind}})"))
}

func verdicts() *stat.PanelBuilder {
	// Verdicts of earlier scenarios stay exported; joining on the scenario
	// info keeps the current scenario's only.
	expr := `max by (invariant) (` + sel("snowchaos_verdict") + ` * on (instance, job, scenario, target) group_left () ` + sel("snowchaos_scenario_info") + `)`
	return stat.NewPanelBuilder().
		Title("Verdicts").
		Description("The current scenario's verdict per invariant (snowchaos_verdict): pass, fail, or unknown (not decided yet, or a fault that could not be confirmed).").
		Span(8).Height(7).
		Mappings(valueMap(
			[3]string{"1", "PASS", "green"},
			[3]string{"0", "FAIL", "red"},
			[3]string{"-1", "unknown", "gray"})).
		Thresholds(thresholds("gray", 0, "red", 1, "green")).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		WithTarget(query("A", expr, "{{invariant}}"))
}

func checkedPerSecond() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("IDs checked per second").
		Description("IDs the verifier checked per second (snowchaos_ids_checked_total).").
		Span(12).Height(8).
		Unit("suffix: IDs/s").Min(0).
		FillOpacity(10).
		Legend(legendTable("mean", "max", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (instance) (`+rateOf("snowchaos_ids_checked_total")+`)`, "{{instance}}"))
}

func findings() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Duplicates and order violations").
		Description("Duplicates (snowchaos_duplicates_total) and order violations (snowchaos_order_violations_total) found per scrape interval.").
		Span(12).Height(8).
		Unit("none").Min(0).Decimals(0).
		DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).
		Legend(legendTable("sum", "max")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum(increase(`+sel("snowchaos_duplicates_total")+`[$__rate_interval]))`, "duplicates")).
		WithTarget(query("B", `sum(increase(`+sel("snowchaos_order_violations_total")+`[$__rate_interval]))`, "order violations")).
		OverrideByName("duplicates", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}}).
		OverrideByName("order violations", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "orange"}}})
}

func faultsByKind() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Faults injected by kind").
		Description("Faults the harness injected (snowchaos_faults_injected_total) per scrape interval, by kind; each is also an annotation.").
		Span(12).Height(8).
		Unit("none").Min(0).Decimals(0).
		DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		Legend(legendTable("sum")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (kind) (increase(`+sel("snowchaos_faults_injected_total")+`[$__rate_interval]))`, "{{kind}}"))
}

func faultWindows() *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title("Fault windows").
		Description("The current scenario's timed faults (snowchaos_fault_window): orange while a window is active.").
		Span(12).Height(8).
		Mappings(valueMap(
			[3]string{"0", "inactive", "transparent"},
			[3]string{"1", "active", "orange"})).
		Thresholds(thresholds("transparent", 1, "orange")).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `max by (window, kind) (`+sel("snowchaos_fault_window")+`)`, "{{window}} ({{kind}})"))
}
