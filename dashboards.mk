# Dashboards and the docker-compose stack (included by the Makefile).
#
#   make dashboards               regenerate dashboards/json from dashboards/*.go
#   make up [LEASES=etcd|zookeeper] build the image, start the stack, wait until healthy
#   make chaos SCENARIO=ntp-step  run deploy/compose/scenarios/$(SCENARIO).yaml against it
#   make down                     stop the stack (volumes kept)
#   make down-volumes             stop it and delete its volumes
#   make compose-config           print the resolved compose file (needs docker compose)

GO               ?= go
COMPOSE          ?= docker compose
SCENARIO         ?= ntp-step
LEASES           ?= postgres
ADMIN_TOKEN_FILE ?= out/admin-token

# The admin token the nodes require and the chaos service presents: taken
# from the environment, else generated once into $(ADMIN_TOKEN_FILE).
# LEASES picks the worker-ID lease store: postgres (default), etcd or zookeeper.
LEASE_URL_postgres = postgres://snowchaos:snowchaos@postgres:5432/snowchaos?sslmode=disable
LEASE_URL_etcd     = etcd://etcd:2379
LEASE_URL_zookeeper = zk://zookeeper:2181/snowchaos/leases
COMPOSE_ENV = SNOWCHAOS_ADMIN_TOKEN="$${SNOWCHAOS_ADMIN_TOKEN:-$$(cat $(ADMIN_TOKEN_FILE))}" SNOWCHAOS_LEASE='$(LEASE_URL_$(LEASES))' SCENARIO=$(SCENARIO)
COMPOSE_PROFILES_FLAGS = $(if $(filter etcd zookeeper,$(LEASES)),--profile $(LEASES))

.PHONY: dashboards up down down-volumes chaos compose-config

## dashboards: regenerate the committed Grafana dashboards (dashboards/json)
dashboards:
	$(GO) generate ./dashboards

$(ADMIN_TOKEN_FILE):
	@mkdir -p $(dir $@)
	@umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > $@
	@echo "generated the nodes' admin token in $@"

## up: build the image and start the stack; Grafana on http://127.0.0.1:3000
up: $(ADMIN_TOKEN_FILE)
	@test -n '$(LEASE_URL_$(LEASES))' || { echo "LEASES=$(LEASES): want postgres, etcd or zookeeper"; exit 2; }
	$(COMPOSE_ENV) $(COMPOSE) $(COMPOSE_PROFILES_FLAGS) up --build --detach --wait
	@echo "Grafana    http://127.0.0.1:3000  (dashboards: snowchaos / generator, snowchaos / harness)"
	@echo "Prometheus http://127.0.0.1:9090"
	@echo "Jaeger     http://127.0.0.1:16686"
	@echo "nodes      http://127.0.0.1:8081  http://127.0.0.1:8082  http://127.0.0.1:8083"

## chaos: run a real-mode scenario (SCENARIO=name, a file in deploy/compose/scenarios) against the stack
chaos: $(ADMIN_TOKEN_FILE)
	@test -f deploy/compose/scenarios/$(SCENARIO).yaml || { echo "no scenario deploy/compose/scenarios/$(SCENARIO).yaml; have:"; ls deploy/compose/scenarios; exit 2; }
	$(COMPOSE_ENV) $(COMPOSE) $(COMPOSE_PROFILES_FLAGS) --profile chaos run --rm --use-aliases chaos

## down: stop the stack, keeping its volumes
down: $(ADMIN_TOKEN_FILE)
	$(COMPOSE_ENV) $(COMPOSE) --profile chaos --profile etcd --profile zookeeper down --remove-orphans

## down-volumes: stop the stack and delete its volumes (Prometheus data, leases, checkpoints)
down-volumes: $(ADMIN_TOKEN_FILE)
	$(COMPOSE_ENV) $(COMPOSE) --profile chaos --profile etcd --profile zookeeper down --remove-orphans --volumes

compose-config: $(ADMIN_TOKEN_FILE)
	$(COMPOSE_ENV) $(COMPOSE) $(COMPOSE_PROFILES_FLAGS) --profile chaos config
