# The bench module's targets (peers, their fault survival, its tests),
# included from the Makefile. The peers live in their own module under
# bench/, so the main module never depends on them; loadbench.mk builds
# bench/cmd/loadbench.
BENCH_GO        ?= $(GO)
BENCHTIME       ?= 1s
PEERS_DSN       ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable

.PHONY: bench-peers peers-survival bench-test bench-sync

## bench-peers: throughput of every peer, snowchaos and a Postgres ticket server, 1 and 2 goroutines, as a Markdown table
bench-peers:
	cd bench && $(BENCH_GO) run ./cmd/peertable -benchtime $(BENCHTIME) -dsn '$(PEERS_DSN)'

## peers-survival: the peer scenarios (scenarios/peers) through the harness, as the fault-survival table
peers-survival:
	cd bench && $(BENCH_GO) run ./cmd/peersurvival ../scenarios/peers

## bench-test: vet and test the bench module (race detector on)
bench-test:
	cd bench && $(BENCH_GO) vet ./... && $(BENCH_GO) test -race -count=1 ./...

## bench-sync: copy the main module's requirements and checksums into bench/ (after the main module gains a dependency)
bench-sync:
	cd bench && $(BENCH_GO) mod edit $$(cd .. && $(BENCH_GO) mod graph | awk '$$1 == "github.com/snowchaos/snowchaos" && $$2 !~ /^(go|toolchain)@/ { print "-require=" $$2 }') && sort -u go.sum ../go.sum -o go.sum && $(BENCH_GO) build ./...
