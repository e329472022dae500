# syntax=docker/dockerfile:1
# The one image of every component: `docker run IMAGE api|ingest|deliver|controller|migrate`.
#   make docker-build IMG=ghcr.io/partnerstream/partnerstream:v0.1.0
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Dependencies first: this layer is reused while only the code changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/partnerstream/partnerstream/internal/version.Version=${VERSION} -X github.com/partnerstream/partnerstream/internal/version.Revision=${REVISION}" \
      -o /out/partnerstream ./cmd/partnerstream

# No shell, no package manager; user 65532 (nonroot), which the Helm chart runs as too.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/partnerstream /usr/local/bin/partnerstream
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/partnerstream"]
CMD ["--help"]
