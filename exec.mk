# The exec target's fault table, included from the Makefile: real Node.js
# and Go generators, unmodified, under clock faults.
.PHONY: exec-deps exec-table exec-table-stable exec-detection

## exec-deps: install the pinned Node.js generators (bench/js/package-lock.json)
exec-deps: bench/js/node_modules/.package-lock.json

# npm ci writes node_modules/.package-lock.json: install again only when
# the lock file changed.
bench/js/node_modules/.package-lock.json: bench/js/package-lock.json
	cd bench/js && npm ci --no-audit --no-fund --ignore-scripts

## exec-table: the library x fault table of scenarios/exec, written into docs/exec-target.md
exec-table: exec-deps
	$(GO) run ./cmd/exectable -doc docs/exec-target.md scenarios/exec

## exec-table-stable: the same table run three times over; lists the cells whose verdict words differed
exec-table-stable: exec-deps
	$(GO) run ./cmd/exectable -doc docs/exec-target.md -repeat 3 scenarios/exec

# The generators without a regression check that the detection figures
# are measured on.
EXEC_NOCHECK ?= broken,nodejs-snowflake,snowflake-id
EXEC_REPEAT  ?= 20

## exec-detection: 20 runs each of the frozen clock, one 5 ms step and five 5 ms steps against the generators without a regression check (and the MVP)
exec-detection: exec-deps
	@echo "load average at the start: $$(cut -d' ' -f1-3 /proc/loadavg)"
	-$(GO) run ./cmd/snowchaos run --repeat $(EXEC_REPEAT) --target $(EXEC_NOCHECK),mvp scenarios/exec/05-frozen-clock.yaml
	-$(GO) run ./cmd/snowchaos run --repeat $(EXEC_REPEAT) --target $(EXEC_NOCHECK),mvp scenarios/detection/step-back-5ms-once.yaml
	-$(GO) run ./cmd/snowchaos run --repeat $(EXEC_REPEAT) --target $(EXEC_NOCHECK),mvp scenarios/exec/10-step-back-5ms.yaml
	@echo "load average at the end: $$(cut -d' ' -f1-3 /proc/loadavg)"
