# The exec target's fault table (issue 16), included from the Makefile:
# real Node.js and Go generators, unmodified, under clock faults.
.PHONY: exec-deps exec-table

## exec-deps: install the pinned Node.js generators (bench/js/package-lock.json)
exec-deps:
	cd bench/js && npm ci --no-audit --no-fund --ignore-scripts

## exec-table: the library x fault table of scenarios/exec (docs/exec-target.md)
exec-table: exec-deps
	$(GO) run ./cmd/exectable scenarios/exec
