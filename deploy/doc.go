// Package deploy holds the Prometheus configuration and alert rules for a
// snowchaos stack: prometheus.yml (three generator nodes, node1..node3:8080,
// for docker-compose), alerts.yml and its promtool unit tests
// alerts_test.yml. The files are embedded so the CLI can write them out.
//
// `go test ./deploy/` validates them with promtool (check config, check
// rules, test rules) and checks that every alert is tested and every
// metric an alert reads is one snowchaos exports.
package deploy

import _ "embed"

// PrometheusConfig is prometheus.yml; it loads alerts.yml from its own
// directory.
//
//go:embed prometheus.yml
var PrometheusConfig []byte

// Alerts is alerts.yml, the alert rules.
//
//go:embed alerts.yml
var Alerts []byte

// AlertTests is alerts_test.yml, the promtool unit tests of Alerts.
//
//go:embed alerts_test.yml
var AlertTests []byte
