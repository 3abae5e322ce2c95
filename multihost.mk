# Several hosts on one machine, included from the Makefile: the
# lease scenarios with every node, the lease store and each load client in
# a network namespace of its own, the kernel cutting the store off
# (docs/multihost.md). Needs root, iproute2, nftables, the PostgreSQL
# server binaries, and a Postgres for the oracle ($SNOWCHAOS_PG_DSN or
# 127.0.0.1:5432).
.PHONY: multihost multihost-bins multihost-test

MULTIHOST_BIN := bin/multihost

## multihost-bins: snowchaos built with the negative controls (fence: off) and the etcd server helper
multihost-bins:
	$(GO) build -tags negativecontrols -o $(MULTIHOST_BIN)/snowchaos ./cmd/snowchaos
	$(GO) build -o $(MULTIHOST_BIN)/netns-etcd ./internal/testenv/etcdtest/etcdserver

## multihost: scenarios/multihost through the CLI (the matrix; each store fault says which kernel path it took)
multihost: multihost-bins
	SNOWCHAOS_BIN=$(MULTIHOST_BIN)/snowchaos SNOWCHAOS_ETCD_BIN=$(MULTIHOST_BIN)/netns-etcd \
		$(MULTIHOST_BIN)/snowchaos run scenarios/multihost

## multihost-test: the netns package's tests and the multihost scenarios in go test (CI=true: a missing prerequisite fails)
multihost-test:
	$(GO) test -race -count=1 ./harness/netns/...
	$(GO) test -race -count=1 -run 'Netns|HostKey|Placement' ./harness/target/remote/
