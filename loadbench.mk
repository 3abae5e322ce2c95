# HTTP performance against same-run references, included from the
# Makefile. loadbench is a program of the bench module (bench/cmd/loadbench):
# every figure it prints has its ceiling beside it: a bare net/http and a
# bare fasthttp server, in the same process as the node, and the layout's
# 4,096 IDs per ms.
LOADBENCH_ROUNDS   ?= 5
LOADBENCH_DURATION ?= 5s
LOADBENCH_PIN      ?= --pin-server 0 --pin-client 1
LOADBENCH_FLAGS    ?=
LOADBENCH_BIN      := bin/loadbench

.PHONY: loadbench bench-http

## loadbench: node vs bare net/http and fasthttp (single ID, batches) and Postgres, server on CPU 0 and client on CPU 1, 5 interleaved rounds: medians, spread, ratios, load average
loadbench:
	cd bench && $(BENCH_GO) build -trimpath -o ../$(LOADBENCH_BIN) ./cmd/loadbench
	$(LOADBENCH_BIN) --rounds $(LOADBENCH_ROUNDS) --duration $(LOADBENCH_DURATION) $(LOADBENCH_PIN) $(LOADBENCH_FLAGS)

## bench-http: the server's benchmarks, each against its same-run reference (x-*: subject over reference)
bench-http:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1s ./server/
