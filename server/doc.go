// Package server is the snowchaos HTTP node: a node.Node (generator, clock
// chain, checkpoints, lease) served over HTTP with health, readiness,
// Prometheus metrics, OpenTelemetry request spans and an optional,
// token-guarded admin API that injects clock faults into the node's fault
// clock. Every ID request is the node's Issue, the call the harness drives,
// so it follows the node onto a new generator when the node rebinds to a
// new lease. server/service composes the node snowchaos serve runs.
//
// Endpoints:
//
//	GET    /v1/id              one ID: text/plain decimal, or {"id":"..."} with Accept: application/json
//	GET    /v1/ids?count=N     N IDs (1..MaxBatch, default MaxBatch), strictly increasing:
//	                           newline-separated text, or a JSON array of strings
//	GET    /v1/decode/{id}     the ID's time, node, datacenter, worker and sequence under the node's layout
//	GET    /healthz            200 while the process serves
//	GET    /readyz             200 when an ID call would issue now, 503 (Retry-After) otherwise
//	                           (also while the fault clock is frozen or paused beyond the wait bound)
//	GET    /metrics            Prometheus exposition of the node's registry
//	POST   /admin/v1/faults    inject a clock fault (JSON: faults.Fault)
//	GET    /admin/v1/faults    active faults and the clock's offsets (FaultState)
//	DELETE /admin/v1/faults    revert every fault
//
// Every route that answers GET answers HEAD (same status and headers, no
// body).
//
// Every error is JSON {"error": "...", "detail": "..."} with its status:
// 400 for a bad query, ID or fault (the detail names the value and its
// bound) or a request framed against RFC 9112, 401/403 for the admin API
// without or with a wrong token, 404, 405 with Allow, 409 for a fault the
// clock's state refuses, 413 for an oversized body, 501 for a transfer
// coding other than chunked, 505 for an HTTP version other than 1.x, 503
// with Retry-After while the node refuses. IDs are
// always decimal strings in JSON, never numbers. docs/http-api.md is the
// full reference; its fault section is generated from FaultKinds.
//
// Serve speaks HTTP/1.1 with keep-alive through fasthttp (no allocation,
// no per-request goroutine or context timer, and two monotonic clock
// reads per request for the connection's timeouts: a single ID costs
// about 1.04x the CPU of a bare fasthttp server answering a constant, see
// docs/benchmarks.md) and, to clients that know it in advance,
// unencrypted HTTP/2 (h2c) through net/http, the first bytes of a
// connection deciding. It has read, write and idle timeouts, a
// per-request deadline passed to the generator (capped at its MaxWait +
// 250 ms) and a connection limit that closes the longest-idle connection
// to make room, so a probe is always served (Config.MaxConns). Requests
// the HTTP layer refuses (malformed or ambiguously framed, headers beyond
// 16 KiB, a body beyond MaxBodyBytes, too slow) are answered with the same
// JSON errors, and a framing error closes its connection. Handler
// is the same node for net/http (embedding, httptest); the admin API and
// /metrics are net/http handlers on both.
//
// Tracing: with Config.TracerProvider, each request gets a server span
// named "METHOD /route", a child of the caller's span when the request
// carries a W3C traceparent; the generator's observers see it in their
// context, so a rewind lands on the request's trace.
//
// Metrics: /metrics exposes Config.Registry, to which New adds
// snowflake_http_requests_total{route,code} and
// snowflake_http_request_duration_seconds{route}. A node that checks NTP
// also registers NTPBudget: snowflake_ntp_offset_budget_seconds, a gauge
// of the offset budget its readiness is held to (snowchaos serve
// --ntp-max-offset), beside ntpcheck's snowflake_ntp_* series, so a
// dashboard's threshold follows the configuration.
//
// The admin API exists only when Config.AdminToken is set (without it,
// /admin/... answers 404 saying how to enable it); it then needs a node
// with a fault clock (node.Config.FaultClock) and, unless
// Config.AdminAllowRemote, a loopback listener, so a production node never
// exposes it by accident. Every fault parameter is
// bounded (FaultKinds).
package server
