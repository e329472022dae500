# syntax=docker/dockerfile:1
# The one image of every component: `docker run IMAGE api|ingest|deliver|controller|migrate`.
#   make docker-build IMG=ghcr.io/partnerstream/partnerstream:v0.1.0
# The IP-to-country database that --geoip-db reads by default, pinned by hack/geoip's lock file,
# and the ASN ranges of hack/asn's (docs/tracking.md, "Where clicks come from").
FROM --platform=$BUILDPLATFORM node:22-bookworm-slim AS geoip
WORKDIR /geoip
COPY hack/geoip/package.json hack/geoip/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
# The autonomous-system ranges (CSV) that hack/asndb turns into the file --asn-db reads by default.
WORKDIR /asn
COPY hack/asn/package.json hack/asn/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

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
COPY --from=geoip /asn/node_modules/@ip-location-db/asn /asn
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go run ./hack/asndb --out /out/asn.mmdb /asn/asn-ipv4.csv /asn/asn-ipv6.csv

# No shell, no package manager; user 65532 (nonroot), which the Helm chart runs as too.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/partnerstream /usr/local/bin/partnerstream
COPY --from=geoip /geoip/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb /usr/share/partnerstream/geoip/country.mmdb
COPY --from=geoip /geoip/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/NRO_LICENSE /geoip/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/README.md /usr/share/partnerstream/geoip/
COPY --from=build /out/asn.mmdb /usr/share/partnerstream/geoip/asn.mmdb
COPY --from=geoip /asn/node_modules/@ip-location-db/asn/ROUTEVIEWS-LICENSE /asn/node_modules/@ip-location-db/asn/DBIP-LICENSE /asn/node_modules/@ip-location-db/asn/NRO_LICENSE /asn/node_modules/@ip-location-db/asn/README.md /usr/share/partnerstream/geoip/asn/
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/partnerstream"]
CMD ["--help"]
