// Package telemetry exports the product's Prometheus metrics (snowflake_*)
// and connects the generator's Observer to metrics and traces. The
// harness's own series (snowchaos_*) are harness/metrics'.
//
// Every component has its own collector and never touches the default
// registry:
//
//   - GeneratorCollector: the snowflake_* generator series. Counters are read
//     from Generator.Stats at scrape time, so an issued ID pays nothing
//     extra; the rare events (rewinds, waits, refusals) arrive through
//     NodeMetrics, the generator.Observer the collector hands out, which
//     also puts them on spans (package tracing).
//   - LeaseCollector: the snowflake_lease_* series, fed by a lease keeper
//     through LeaseMetrics.
//
// NewRegistry returns a registry with the Go and process collectors for a
// served endpoint; Serve and Handler expose it with OpenMetrics (needed for
// exemplars). docs/metrics.md lists every series.
//
// Conventions: base units (seconds), _total on counters, every known label
// value present from the start, and no IDs or unbounded values as labels:
// worker IDs appear only on snowflake_worker_info, and the node label (only
// when several generators share a collector) is bounded by Options.MaxNodes.
package telemetry
