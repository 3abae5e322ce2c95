package dashboards

//lint:file-ignore SA1019 dashboard v1 stays: the SDK's dashboardv2 is Grafana's schema v2, experimental in Grafana 12 (compose runs 12.1.0) behind the dynamicDashboards and kubernetesDashboards toggles

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/snowchaos/snowchaos/ntpcheck"
)

// GeneratorUID is the Generator dashboard's UID.
const GeneratorUID = "snowchaos-generator"

// NTPBudget is the NTP offset budget drawn as threshold lines on the NTP
// offset panel, in seconds: ntpcheck's default step threshold (the offset
// beyond which the next correction steps the clock, and its default
// MaxOffset), the same budget the NTP alert rule uses.
var NTPBudget = ntpcheck.DefaultStepThreshold.Seconds()

// NTPMaxDistance is the root distance drawn as a threshold on the root
// distance panel, in seconds (node_exporter's max-distance default).
var NTPMaxDistance = ntpcheck.DefaultMaxDistance.Seconds()

// LeadBound is the logical-lead threshold line, in seconds: the
// generator's default MaxLead (1 s).
const LeadBound = 1.0

// Rewind outcome colours, shared by the rewind panels and annotation.
var outcomeColors = map[string]string{"waited": "yellow", "logical": "blue", "refused": "red"}

// Generator returns the dashboard of the generator nodes (the snowflake_*
// series).
func Generator() (dashboard.Dashboard, error) {
	b := base(GeneratorUID, "snowchaos / generator",
		"Snowflake ID generator nodes under clock faults: throughput, clock rewinds and what the rewind policy did, waits, sequence exhaustion, logical-clock lead, refusals, checkpoint, worker-ID leases and NTP offsets. Timestamps in UTC.",
		"snowflake_ids_issued_total").
		Annotation(annotation("Rewinds", "red",
			`sum by (instance, node, outcome) (increase(`+sel("snowflake_clock_rewinds_total")+`[$__rate_interval])) > 0`,
			"clock rewind ({{outcome}})", "{{instance}} {{node}}: the wall clock stood behind the last issued tick; policy outcome {{outcome}}",
			"instance,node,outcome")).
		Annotation(annotation("Faults injected", "orange",
			`sum by (kind) (increase(snowchaos_faults_injected_total[$__rate_interval])) > 0`,
			"fault: {{kind}}", "the harness injected a {{kind}} fault",
			"kind"))

	// Throughput and availability.
	b = b.WithRow(dashboard.NewRowBuilder("Throughput and availability")).
		WithPanel(idsPerSecond()).
		WithPanel(readiness()).
		WithPanel(refusals()).
		WithPanel(workers())

	// Clock rewinds.
	b = b.WithRow(dashboard.NewRowBuilder("Clock rewinds")).
		WithPanel(rewindsByOutcome()).
		WithPanel(rewindSizeHeatmap()).
		WithPanel(rewindSizePercentiles()).
		WithPanel(logicalLead())

	// Waits and sequence exhaustion.
	b = b.WithRow(dashboard.NewRowBuilder("Waits and sequence exhaustion")).
		WithPanel(waitTime()).
		WithPanel(exhaustions())

	// Persistence and leases.
	b = b.WithRow(dashboard.NewRowBuilder("Checkpoint and worker-ID leases")).
		WithPanel(checkpointMark()).
		WithPanel(checkpointWrites()).
		WithPanel(leaseState()).
		WithPanel(leaseExpiry()).
		WithPanel(leaseRenewals())

	// NTP.
	b = b.WithRow(dashboard.NewRowBuilder("NTP")).
		WithPanel(ntpOffset()).
		WithPanel(ntpRTT()).
		WithPanel(ntpRootDistance()).
		WithPanel(ntpStratum()).
		WithPanel(ntpLeap())

	d, err := b.Build()
	if err != nil {
		return d, err
	}
	number(&d)
	return d, nil
}

func idsPerSecond() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("IDs issued per second").
		Description("IDs issued per second by each node (snowflake_ids_issued_total, read from the generator's own counter at scrape time).").
		Span(12).Height(8).
		Unit("suffix: IDs/s").Min(0).Decimals(0).
		FillOpacity(10).LineWidth(1).
		Legend(legendTable("mean", "max", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (instance, node) (`+rateOf("snowflake_ids_issued_total")+`)`, nodeLegend))
}

func readiness() *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title("Readiness").
		Description("snowflake_ready: green when a call now would issue an ID; red while the node refuses (after a rewind under the refuse policy, start fence, lease fence closed, closed).").
		Span(6).Height(8).
		Mappings(valueMap([3]string{"1", "ready", "green"}, [3]string{"0", "not ready", "red"})).
		Thresholds(thresholds("red", 1, "green")).
		ShowValue(common.VisibilityModeNever).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `max by (instance, node) (`+sel("snowflake_ready")+`)`, nodeLegend))
}

func refusals() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Refusals per second by reason").
		Description("Calls that returned an error instead of an ID (snowflake_refusals_total), by reason. Any refusal is an availability cost; the critical alert fires on it.").
		Span(6).Height(8).
		Unit("reqps").Min(0).
		DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdPaletteClassic)).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (instance, node, reason) (`+rateOf("snowflake_refusals_total")+`) > 0`, "{{instance}} {{node}} {{reason}}"))
}

func workers() *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title("Nodes").
		Description("snowflake_worker_info: each node's worker and datacenter IDs, layout and rewind policy.").
		Span(24).Height(6).
		WithTarget(instant("A", sel("snowflake_worker_info"), "").Format("table")).
		WithTransformation(dashboard.DataTransformerConfig{
			Id: "organize",
			Options: map[string]any{
				"excludeByName": map[string]any{"Time": true, "Value": true, "__name__": true},
				"indexByName":   map[string]any{"instance": 0, "node": 1, "worker_id": 2, "datacenter_id": 3, "layout": 4, "policy": 5, "job": 6},
			},
		})
}

func rewindsByOutcome() *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title("Clock rewinds by outcome").
		Description("Calls that found the wall clock behind the last issued tick (snowflake_clock_rewinds_total), per scrape interval, by what the rewind policy did: waited, ran a logical clock, or refused. Each rewind is also an annotation.").
		Span(12).Height(8).
		Unit("short").Min(0).Decimals(0).
		DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		Legend(legendTable("sum", "max")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (outcome) (increase(`+sel("snowflake_clock_rewinds_total")+`[$__rate_interval]))`, "{{outcome}}"))
	for outcome, color := range orderedColors() {
		p = p.OverrideByName(outcome, []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": color}}})
	}
	return p
}

// orderedColors yields outcomeColors in a fixed order (map order would
// make the JSON unstable).
func orderedColors() func(yield func(string, string) bool) {
	return func(yield func(string, string) bool) {
		for _, o := range []string{"waited", "logical", "refused"} {
			if !yield(o, outcomeColors[o]) {
				return
			}
		}
	}
}

func rewindSizeHeatmap() *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title("Rewind size").
		Description("How far the wall clock stood behind at each detected rewind (snowflake_clock_rewind_size_seconds buckets). Exemplars carry the trace ID of the rewind's span: click one to open the trace in Jaeger.").
		Span(6).Height(8).
		Calculate(false).
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Oranges").Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Fill("dark-orange").Steps(64)).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s").AxisPlacement(common.AxisPlacementLeft)).
		CellValues(heatmap.NewCellValuesBuilder().Unit("short")).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
		ShowValue(common.VisibilityModeNever).
		ExemplarsColor("rgba(255,0,255,0.7)").
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		ShowLegend().
		WithTarget(query("A", `sum by (le) (increase(`+sel("snowflake_clock_rewind_size_seconds_bucket")+`[$__rate_interval]))`, "{{le}}").
			Format("heatmap").Exemplar(true))
}

func rewindSizePercentiles() *timeseries.PanelBuilder {
	h := "snowflake_clock_rewind_size_seconds_bucket"
	return timeseries.NewPanelBuilder().
		Title("Rewind size p50 / p99 and last").
		Description("Percentiles of the rewind size over the rate window (empty while no rewind happens), and the size of each node's last rewind (snowflake_last_rewind_size_seconds). Exemplars link to traces.").
		Span(6).Height(8).
		Unit("s").Min(0).
		ShowPoints(common.VisibilityModeAuto).PointSize(5).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `histogram_quantile(0.5, sum by (le) (rate(`+sel(h)+`[$__rate_interval])))`, "p50").Exemplar(true)).
		WithTarget(query("B", `histogram_quantile(0.99, sum by (le) (rate(`+sel(h)+`[$__rate_interval])))`, "p99").Exemplar(true)).
		WithTarget(query("C", `max by (instance, node) (`+sel("snowflake_last_rewind_size_seconds")+`)`, "last "+nodeLegend))
}

func logicalLead() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Logical-clock lead").
		Description("How far each node's logical clock runs ahead of the wall clock (snowflake_logical_lead_seconds) and the largest lead seen (snowflake_logical_lead_max_seconds). The line marks the default MaxLead bound (1 s) past which the logical policy refuses.").
		Span(12).Height(8).
		Unit("s").Min(0).
		Thresholds(thresholds("green", 0.5*LeadBound, "orange", LeadBound, "red")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)).
		Legend(legendTable("max", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `max by (instance, node) (`+sel("snowflake_logical_lead_seconds")+`)`, "lead "+nodeLegend)).
		WithTarget(query("B", `max by (instance, node) (`+sel("snowflake_logical_lead_max_seconds")+`)`, "max "+nodeLegend))
}

func waitTime() *timeseries.PanelBuilder {
	h := "snowflake_wait_seconds_bucket"
	return timeseries.NewPanelBuilder().
		Title("Wait time by reason, p50 / p99").
		Description("Time calls slept on the monotonic clock (snowflake_wait_seconds), by reason: rewind (the wait policy waiting out a backwards step) or sequence_exhausted (waiting for the next tick). Exemplars link to the clock.wait span.").
		Span(12).Height(8).
		Unit("s").Min(0).
		ScaleDistribution(common.NewScaleDistributionConfigBuilder().Type(common.ScaleDistributionLog).Log(10)).
		ShowPoints(common.VisibilityModeAuto).PointSize(5).
		Legend(legendTable("mean", "max")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `histogram_quantile(0.5, sum by (le, reason) (rate(`+sel(h)+`[$__rate_interval])))`, "p50 {{reason}}").Exemplar(true)).
		WithTarget(query("B", `histogram_quantile(0.99, sum by (le, reason) (rate(`+sel(h)+`[$__rate_interval])))`, "p99 {{reason}}").Exemplar(true))
}

func exhaustions() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Sequence exhaustions per second").
		Description("Ticks whose sequence ran out (snowflake_sequence_exhaustions_total), so that a call waited for, or under the logical policy borrowed, the next tick. Sustained exhaustion means the node runs at its layout's ceiling.").
		Span(12).Height(8).
		Unit("suffix: /s").Min(0).
		FillOpacity(10).
		Legend(legendTable("mean", "max")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (instance, node) (`+rateOf("snowflake_sequence_exhaustions_total")+`)`, nodeLegend))
}

func checkpointMark() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Checkpoint mark ahead of the wall clock").
		Description("The reserved high-water mark (snowflake_checkpoint_mark_timestamp_seconds) minus the wall clock: how far ahead the persisted mark reaches. Negative means IDs are about to wait for the next checkpoint write; nodes without a checkpoint are not shown.").
		Span(8).Height(8).
		Unit("s").
		Thresholds(thresholds("red", 0, "green")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)).
		Legend(legendTable("min", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `max by (instance, node) (`+sel("snowflake_checkpoint_mark_timestamp_seconds")+` > 0) - time()`, nodeLegend))
}

func checkpointWrites() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Checkpoint writes per second").
		Description("Writes of the reserved mark (snowflake_checkpoint_writes_total) by result. Errors make the generator refuse.").
		Span(4).Height(8).
		Unit("wps").Min(0).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (result) (`+rateOf("snowflake_checkpoint_writes_total")+`)`, "{{result}}")).
		OverrideByName("error", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}})
}

func leaseState() *statetimeline.PanelBuilder {
	// snowflake_lease_state is one-hot over four states; weighting them
	// 1..4 gives one series per holder whose value names its state.
	st := func(s string, w int) string {
		return sel("snowflake_lease_state", `state="`+s+`"`) + " * " + itoa(w)
	}
	expr := `sum by (instance, node) (` + st("held", 1) + ` or ` + st("renewing", 2) + ` or ` + st("lost", 3) + ` or ` + st("released", 4) + `)`
	return statetimeline.NewPanelBuilder().
		Title("Lease state").
		Description("Each node's worker-ID lease (snowflake_lease_state): held, renewing, lost (the generator is fenced) or released.").
		Span(12).Height(8).
		Mappings(valueMap(
			[3]string{"0", "none", "transparent"},
			[3]string{"1", "held", "green"},
			[3]string{"2", "renewing", "yellow"},
			[3]string{"3", "lost", "red"},
			[3]string{"4", "released", "blue"})).
		Thresholds(thresholds("transparent")).
		ShowValue(common.VisibilityModeAuto).
		MergeValues(true).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", expr, nodeLegend))
}

func leaseExpiry() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Lease time to expiry").
		Description("Time left before each held lease expires unless renewed (snowflake_lease_expiry_timestamp_seconds minus now). A healthy holder renews well before zero; at zero the lease is lost.").
		Span(6).Height(8).
		Unit("s").
		Thresholds(thresholds("red", 0, "orange", 2, "green")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)).
		Legend(legendTable("min", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `max by (instance, node) (`+sel("snowflake_lease_expiry_timestamp_seconds")+` > 0) - time()`, nodeLegend))
}

func leaseRenewals() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("Lease renewals per second").
		Description("Lease renewal attempts (snowflake_lease_renewals_total) by result: ok, error (the store did not answer; the lease may still be held) and lost.").
		Span(6).Height(8).
		Unit("suffix: /s").Min(0).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", `sum by (result) (`+rateOf("snowflake_lease_renewals_total")+`)`, "{{result}}")).
		OverrideByName("error", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "orange"}}}).
		OverrideByName("lost", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}})
}

func ntpOffset() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("NTP offset").
		Description("Offset of each NTP server's clock from the node's at the last check (snowflake_ntp_offset_seconds; positive: the node is behind). The dashed lines mark the offset budget (±128 ms, the step threshold): beyond it the next correction steps the clock and a generator sees a rewind.").
		Span(12).Height(8).
		Unit("s").
		Thresholds(thresholds("red", -NTPBudget, "green", NTPBudget, "red")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashedAndArea)).
		AxisSoftMin(-NTPBudget * 1.25).AxisSoftMax(NTPBudget * 1.25).
		Legend(legendTable("min", "max", "lastNotNull")).
		Tooltip(tooltipAll()).
		WithTarget(query("A", sel("snowflake_ntp_offset_seconds"), "{{instance}} {{server}}"))
}

func ntpRTT() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("NTP round-trip time").
		Description("Round-trip time of the kept NTP query at the last check (snowflake_ntp_rtt_seconds). The offset's error is at most half of it.").
		Span(6).Height(8).
		Unit("s").Min(0).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", sel("snowflake_ntp_rtt_seconds"), "{{instance}} {{server}}"))
}

func ntpRootDistance() *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title("NTP root distance").
		Description("Estimated root distance of each server (snowflake_ntp_root_distance_seconds): the bound on its error against the reference clocks. The line marks node_exporter's max distance (3.466 s) beyond which an answer is not sane.").
		Span(6).Height(8).
		Unit("s").Min(0).
		Thresholds(thresholds("green", NTPMaxDistance, "red")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)).
		Legend(legendList()).
		Tooltip(tooltipAll()).
		WithTarget(query("A", sel("snowflake_ntp_root_distance_seconds"), "{{instance}} {{server}}"))
}

func ntpStratum() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("NTP stratum").
		Description("Stratum each server reported at the last check (snowflake_ntp_stratum); 0 is a kiss-of-death or an unsynchronised server, 16 unsynchronised.").
		Span(12).Height(5).
		Unit("none").Decimals(0).
		Thresholds(thresholds("red", 1, "green", 5, "yellow", 16, "red")).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		WithTarget(query("A", sel("snowflake_ntp_stratum"), "{{instance}} {{server}}"))
}

func ntpLeap() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("NTP leap indicator").
		Description("Leap indicator each server reported at the last check (snowflake_ntp_leap): a pending leap second (insert or delete at the end of the month) or an unsynchronised server.").
		Span(12).Height(5).
		Mappings(valueMap(
			[3]string{"0", "no leap", "green"},
			[3]string{"1", "+1 s leap pending", "orange"},
			[3]string{"2", "-1 s leap pending", "orange"},
			[3]string{"3", "unsynchronised", "red"})).
		Thresholds(thresholds("green", 1, "orange", 3, "red")).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		WithTarget(query("A", sel("snowflake_ntp_leap"), "{{instance}} {{server}}"))
}
