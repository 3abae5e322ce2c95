// Package ntpcheck checks the host's clock against NTP servers and says what
// each finding means for a Snowflake ID generator: how far the next
// correction may step the clock back, what the configured rewind policy will
// do about it, whether a leap second is coming, and whether the servers can
// be trusted at all.
//
// [Check] queries the servers (github.com/beevik/ntp) and returns a
// [Report]; [Evaluate] is the pure part that turns per-server results into
// findings, so it can be tested on recorded responses. [Collector] exports
// the results as Prometheus metrics with node_exporter's naming, and
// [Monitor] runs the check in the background for a readiness probe.
package ntpcheck
