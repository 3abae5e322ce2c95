# The exec target's fault table (issue 16), included from the Makefile:
# real Node.js and Go generators, unmodified, under clock faults.
.PHONY: exec-deps exec-table

## exec-deps: install the pinned Node.js generators (bench/js/package-lock.json)
exec-deps: bench/js/node_modules/.package-lock.json

# npm ci writes node_modules/.package-lock.json: install again only when
# the lock file changed.
bench/js/node_modules/.package-lock.json: bench/js/package-lock.json
	cd bench/js && npm ci --no-audit --no-fund --ignore-scripts

## exec-table: the library x fault table of scenarios/exec, written into docs/exec-target.md
exec-table: exec-deps
	$(GO) run ./cmd/exectable -doc docs/exec-target.md scenarios/exec
