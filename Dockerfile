# syntax=docker/dockerfile:1
#
# The snowchaos image: one static binary (snowchaos serve, snowchaos run,
# ...) plus the health-check probe, on a distroless base, running as a
# non-root user. Everything is built from this repository's source.
#
#   docker build -t snowchaos:local .
#   docker run --rm -p 127.0.0.1:8080:8080 snowchaos:local serve
#
# docker-compose.yml builds it for the three nodes and the chaos service.
#
# The check stage is snowchaos check (docs/check.md) with libfaketime and the
# runtimes your generator needs (EXTRA_PACKAGES, Debian package names), run
# on your command mounted at /work:
#
#   docker build --target check -t snowchaos-check .
#   docker run --rm -v "$PWD":/work snowchaos-check -- node wrapper.js

ARG GO_VERSION=1.26

# ---- build: static binaries, no cgo ----
FROM golang:${GO_VERSION}-bookworm AS build
# VERSION names the build in snowchaos version (docker build --build-arg
# VERSION=$(git describe --always --dirty)): the context has no .git.
ARG VERSION=dev
WORKDIR /src
ENV CGO_ENABLED=0 GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/snowchaos ./cmd/snowchaos && \
    go build -trimpath -ldflags="-s -w" -o /out/probe ./deploy/compose/probe && \
    mkdir -p /out/var/lib/snowchaos

# ---- check: snowchaos check on a mounted command, libfaketime installed ----
FROM debian:bookworm-slim AS check
ARG EXTRA_PACKAGES="nodejs python3"
RUN apt-get update && \
    apt-get install -y --no-install-recommends faketime libfaketime perl ca-certificates ${EXTRA_PACKAGES} && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /out/snowchaos /usr/local/bin/snowchaos
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/snowchaos", "check"]

# ---- final: distroless static, non-root ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/snowchaos /usr/local/bin/snowchaos
COPY --from=build /out/probe /usr/local/bin/probe
# The checkpoint directory (a volume in docker-compose), owned by nonroot.
COPY --from=build --chown=65532:65532 /out/var/lib/snowchaos /var/lib/snowchaos
USER 65532:65532
WORKDIR /var/lib/snowchaos
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=5 \
    CMD ["/usr/local/bin/probe", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/snowchaos"]
CMD ["serve"]
