# The explore gate: every planted bug in mutants/*.yaml faces snowchaos
# explore (a fixed seed, a per-mutant budget, no built-in scenario), and so
# does every known-bad reference; each shrunk YAML must reproduce with
# snowchaos run. And the safe targets' long search for false alarms.
EXPLORE_SEED ?= 1
.PHONY: explore-gate explore-safe
## explore-gate: explore each mutant and known-bad reference; fails if one survives or a shrunk YAML does not reproduce
explore-gate:
	$(GO) run ./mutants/gate -explore -explore-seed $(EXPLORE_SEED) -matrix docs/mutants.md

## explore-safe: 10,000 schedules against the safe generator (each node's rewind policy, checkpoint and lease drawn): must find nothing
explore-safe:
	$(GO) run ./cmd/snowchaos explore --seed $(EXPLORE_SEED) --schedules 10000 --target inprocess
