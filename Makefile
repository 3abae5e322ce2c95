# snowchaos: two commands do everything on a fresh machine:
#   make run   runs the built-in scenario suite in process (simulated time)
#   make test  runs every test with the race detector
GO        ?= go
PKGS      ?= ./...
TESTFLAGS ?= -race -count=1 -timeout 25m
BIN       := bin/snowchaos

.PHONY: all run run-http test test-short bench bench-peers lint build fmt vet clean dashboards up down chaos

all: lint test

## run: the main job: the scenario suite in simulated mode, printing the matrix
run:
	$(GO) run ./cmd/snowchaos run

## run-http: the real-mode HTTP scenarios: snowchaos serve child processes on loopback, kill -9 restarts, clones
run-http:
	$(GO) run ./cmd/snowchaos run scenarios/http

## test: every test, race detector on (CI=true turns missing services into failures)
test:
	$(GO) vet $(PKGS)
	$(GO) test $(TESTFLAGS) $(PKGS)

## test-short: unit tests only
test-short:
	$(GO) test -short -count=1 $(PKGS)

## bench: benchmarks against their same-run references (bare mutex generator, the 244 ns/ID ceiling of 41/10/12), then the ratios alone
BENCH_COUNT ?= 1
bench:
	@mkdir -p out
	@{ $(GO) test -run '^$$' -bench . -benchmem -benchtime 1s -count $(BENCH_COUNT) -cpu 1,2 ./generator/ ./verify/ ./telemetry/ ./loadgen/ ./verify/pgoracle/; echo $$? > out/bench.rc; } | tee out/bench.txt
	@echo; echo "ratios (x-*: subject/reference in the same run; x-ceiling 1.00 = 4,096 IDs/ms):"
	@awk '/^Benchmark/ { r = ""; for (i = 3; i < NF; i++) if ($$(i+1) ~ /^x-/) r = r "  " $$(i+1) " " $$i; if (r != "") printf "  %-44s%s\n", $$1, r }' out/bench.txt
	@exit $$(cat out/bench.rc)

## lint: gofmt, go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## build: the static CLI binary
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/snowchaos

fmt:
	gofmt -w .

include dashboards.mk
include bench.mk

clean:
	rm -rf bin out
