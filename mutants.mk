# The mutation gate: every planted bug in mutants/*.yaml, compiled in with
# go build -overlay, must be killed by the built-in suite (exit 1).
.PHONY: mutants
## mutants: build each mutant and run the built-in suite against it; fails if one survives
mutants:
	$(GO) run ./mutants/gate -matrix docs/mutants.md
