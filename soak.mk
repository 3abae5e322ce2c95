# The soak (docs/soak.md), included from the Makefile: snowchaos serve with
# a checkpoint and a Postgres lease (a cluster of the soak's own) for
# SOAK_DURATION under rotating clock faults, kill -9 restarts every minute
# and a crash of the lease store, every ID verified by the verify sink;
# its RSS and goroutines must stay flat. A study in the bench module
# (bench/soak); not run by .ci/run.
#
#   make soak                      10 minutes
#   make soak SOAK_DURATION=3m     shorter (flatness is judged after 2 minutes)
SOAK_DURATION ?= 10m
SOAK_FLAGS    ?=

.PHONY: soak

## soak: serve under rotating faults, kill -9 restarts and a store outage for SOAK_DURATION (10m); 0 duplicates, flat RSS and goroutines
soak: build
	cd bench && $(BENCH_GO) run ./cmd/soak -bin ../$(BIN) -duration $(SOAK_DURATION) $(SOAK_FLAGS)
