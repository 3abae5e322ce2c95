// Package composetest validates the docker-compose stack without a Docker
// engine (this project's machines have none): its tests load
// docker-compose.yml with compose-go as `docker compose` would, check the
// services, ports, volumes, dependencies and health checks, that every
// bind-mounted file exists, that the Dockerfile builds a static non-root
// image from the repository's own source, that deploy/prometheus.yml passes
// `promtool check config` with the files mounted beside it, that
// deploy/otel-collector.yaml is a consistent collector configuration, and
// that the commands and scenarios the stack runs are ones the snowchaos
// binary accepts.
//
// Besides its tests the package holds PromConfig, the part of
// prometheus.yml they check, which deploy's tests share. Run them with
//
//	go test -race ./deploy/composetest/
package composetest
