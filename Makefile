# snowchaos: two commands do everything on a fresh machine:
#   make run   runs the built-in scenario suite in process (simulated time)
#   make test  runs every test with the race detector
GO        ?= go
PKGS      ?= ./...
TESTFLAGS ?= -race -count=1 -timeout 25m
BIN       := bin/snowchaos

.PHONY: all run run-http test test-short deps docs samples bench bench-peers lint build fmt vet clean dashboards up down chaos

all: lint test

## run: the main job: the scenario suite in simulated mode, printing the matrix
run:
	$(GO) run ./cmd/snowchaos run

## run-http: the real-mode HTTP scenarios: snowchaos serve child processes on loopback, kill -9 restarts, clones
#   (with a ZooKeeper on 127.0.0.1:2181 for the zk:// lease scenario: the one answering there, else Debian's, started for the run)
run-http:
	$(GO) run ./internal/testenv/zktest/withzk -addr 127.0.0.1:2181 -- $(GO) run ./cmd/snowchaos run scenarios/http

## test: every test, race detector on (CI=true turns missing services into failures);
## ends with how many tests skipped, why, and the command that installs what is missing
test: SHELL := /bin/bash
test: .SHELLFLAGS := -o pipefail -c
test:
	$(GO) vet $(PKGS)
	$(GO) build -o bin/testsummary ./internal/testsummary
	$(GO) test -json $(TESTFLAGS) $(PKGS) | bin/testsummary -missing "$$(.ci/run missing)" -install "make deps"

## deps: install the Debian packages the integration tests use (prometheus, chrony, chromium, ...), only those missing
deps:
	.ci/run deps

## docs: regenerate docs/metrics.md from what the commands serve, and the samples (make test fails when either is stale)
docs: samples
	$(GO) test -count=1 -run '^TestMetricsReference$$' ./cmd/snowchaos -update-docs

## samples: rerun the command of every <!-- sample: snowchaos ... --> region in the markdown files and rewrite its output
samples:
	$(GO) run ./internal/samples

## test-short: unit tests only
test-short:
	$(GO) test -short -count=1 $(PKGS)

## bench: benchmarks against their same-run references (bare mutex generator, the 244 ns/ID ceiling of 41/10/12), then the ratios alone
BENCH_COUNT ?= 1
bench:
	@mkdir -p out
	@echo "load average at the start: $$(cut -d' ' -f1-3 /proc/loadavg)"
	@{ $(GO) test -run '^$$' -bench . -benchmem -benchtime 1s -count $(BENCH_COUNT) -cpu 1,2 ./generator/ ./verify/ ./telemetry/ ./harness/loadgen/ ./verify/pgoracle/ ./verify/sink/; echo $$? > out/bench.rc; } | tee out/bench.txt
	@echo "load average at the end: $$(cut -d' ' -f1-3 /proc/loadavg)"
	@echo; echo "ratios (x-*: subject/reference in the same run; x-ceiling 1.00 = 4,096 IDs/ms):"
	@awk '/^Benchmark/ { r = ""; for (i = 3; i < NF; i++) if ($$(i+1) ~ /^x-/) r = r "  " $$(i+1) " " $$i; if (r != "") printf "  %-44s%s\n", $$1, r }' out/bench.txt
	@exit $$(cat out/bench.rc)

## lint: gofmt, go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## build: the static CLI binary
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(BIN) ./cmd/snowchaos

fmt:
	gofmt -w .

include dashboards.mk
include bench.mk
include sink.mk
include mutants.mk
include explore.mk
include exec.mk
include kube.mk
include loadbench.mk
include multihost.mk
include staticcheck.mk
include loaded.mk
include soak.mk

clean:
	rm -rf bin out

## actionlint: lint the GitHub workflows with a pinned actionlint, installed into a cache directory
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := $(HOME)/.cache/snowchaos/actionlint-$(ACTIONLINT_VERSION)/actionlint
.PHONY: actionlint
actionlint: $(ACTIONLINT)
	$(ACTIONLINT) .github/workflows/*.yml
$(ACTIONLINT):
	GOBIN=$(dir $(ACTIONLINT)) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
