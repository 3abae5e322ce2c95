# The verification sink's memory (docs/verify-sink.md), included from the
# Makefile. Both are measurements, too long for every CI run; the CI test
# TestVerifySinkMemoryBounded sends 16 bodies of 8 MB.
SINK_MEMORY_IDS    ?= 1e8,1e9
SINK_MEMORY_SHAPES ?= dense,sparse
SINK_RSS_BODY_MB   ?= 60

.PHONY: sink-rss sink-memory

## sink-rss: 16 clients each POST a 60 MB body to a snowchaos verify child at once: its peak and settled RSS (VmHWM, VmRSS), exact counts
sink-rss:
	@echo "commit $$(git rev-parse --short HEAD)$$(git diff --quiet HEAD || echo ' (modified)'), load average $$(cut -d' ' -f1-3 /proc/loadavg)"
	SNOWCHAOS_SINK_BODY_MB=$(SINK_RSS_BODY_MB) $(GO) test -count=1 -v -run '^TestVerifySinkMemoryBounded$$' ./cmd/snowchaos/

## sink-memory: the sink's memory per verified ID and its rate at 10^8 and 10^9 IDs, dense and sparse, against an in-process Verifier and a map (about an hour; 10^9 sparse needs about 12 GB free)
sink-memory: build
	@echo "commit $$(git rev-parse --short HEAD)$$(git diff --quiet HEAD || echo ' (modified)')"
	$(GO) run ./internal/sinkmemory -bin $(BIN) -ids $(SINK_MEMORY_IDS) -shapes $(SINK_MEMORY_SHAPES)
