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

ARG GO_VERSION=1.26

# ---- build: static binaries, no cgo ----
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/snowchaos ./cmd/snowchaos && \
    go build -trimpath -ldflags="-s -w" -o /out/probe ./deploy/compose/probe && \
    mkdir -p /out/var/lib/snowchaos

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
