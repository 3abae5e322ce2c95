# Tests that hold under load, included from the Makefile: the timing-
# sensitive packages (the leases and their keeper on every backend, the
# node, the HTTP server, the harness's real mode) run while stress-ng keeps
# every core busy. A timing assertion in them is either a margin measured
# under this load and stated in the test, or a benchmark.
#
#   make test-loaded            the packages below, one stress-ng CPU worker per core
#   LOADED_HOGS=4 make test-loaded
#
# The test binaries are built first, without the hog; stress-ng is started
# by this recipe and stopped by its PID when the tests end, fail or are
# interrupted (a trap), and bounded by --timeout besides.
.PHONY: test-loaded

LOADED_PKGS ?= ./lease/... ./node/ ./server/ ./harness/
# The harness's real-mode tests only: its simulated ones do not read a clock.
LOADED_RUN  ?=
LOADED_HARNESS_RUN ?= Real|Calibrat
LOADED_HOGS ?= $(shell nproc)
LOADED_TIMEOUT ?= 20m

## test-loaded: the timing-sensitive tests (leases, keeper, node, server, harness real mode) with every core busy (stress-ng)
test-loaded: SHELL := /bin/bash
test-loaded: .SHELLFLAGS := -euo pipefail -c
test-loaded:
	@command -v stress-ng >/dev/null || { echo "test-loaded needs stress-ng: make deps (Debian package stress-ng)"; exit 2; }
	@echo "building the test binaries (no hog yet)"
	@$(GO) test -race -count=1 -run '^$$' $(LOADED_PKGS) >/dev/null
	@stress-ng --cpu $(LOADED_HOGS) --cpu-method matrixprod --timeout $(LOADED_TIMEOUT) --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null || true; wait $$hog 2>/dev/null || true' EXIT INT TERM; \
	start=$$(date +%s); \
	echo "stress-ng: $(LOADED_HOGS) CPU workers (pid $$hog) on $$(nproc) cores; load average at the start: $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	rc=0; \
	$(GO) test -race -count=1 -timeout $(LOADED_TIMEOUT) $(if $(LOADED_RUN),-run '$(LOADED_RUN)') $(filter-out ./harness/,$(LOADED_PKGS)) || rc=$$?; \
	$(if $(filter ./harness/,$(LOADED_PKGS)),$(GO) test -race -count=1 -timeout $(LOADED_TIMEOUT) -run '$(LOADED_HARNESS_RUN)' ./harness/ || rc=$$?;) \
	echo "load average at the end: $$(cut -d' ' -f1-3 /proc/loadavg); $$(( $$(date +%s) - start ))s under load"; \
	exit $$rc
