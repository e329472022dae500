# PartnerStream. The two commands that matter: `make run` and `make test`.
SHELL := /usr/bin/env bash
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/partnerstream/partnerstream/internal/version.Version=$(VERSION) \
            -X github.com/partnerstream/partnerstream/internal/version.Revision=$(REVISION)
BIN := $(CURDIR)/bin

.PHONY: sdk image cluster cluster-down e2e run stop test bench-auth bench-conversions bench-redirect bench-ingest bench-stats bench-backtest bench-export bench-deliver disposable-domains build controlplane tools manifests generate lint bench fuzz docs tidy clean docker-build helm-lint helm-docs journey soak screenshots

run: ## Start the whole platform with demo data on http://127.0.0.1:8080
	@bash hack/run.sh

stop: ## Stop what `make run` started
	@bash hack/stop.sh

test: ## Provision the services, run every test with the race detector, then `make lint`
	@bash hack/test.sh

journey: ## The journey test and every fault run: the real binaries as processes, driven through the API (FAULTS=0: fast ones only)
	@bash hack/journey.sh

soak: ## Steady load for SOAK_DURATION (default 10m): memory and goroutines of every component stay flat, ingest keeps up
	@bash hack/soak.sh

screenshots: ## A PNG of every dashboard page in both languages into docs/screenshots/ (the browser tests)
	@PARTNERSTREAM_SCREENSHOTS=$(CURDIR)/docs/screenshots GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/dashboard/ -run '^TestBrowser'

build: ## Build bin/partnerstream
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/partnerstream ./cmd/partnerstream

IMG ?= ghcr.io/partnerstream/partnerstream:$(VERSION)
image: ## The image of every component as an OCI tarball (bin/image.tar, IMG=...), without a container engine
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/image/partnerstream ./cmd/partnerstream
	@# The IP-to-country database (hack/geoip) and the ASN one (hack/asn, hack/asndb), with their
	@# licences, where --geoip-db and --asn-db look by default.
	db=$$(bash hack/npm-tools.sh geoip) && asn=$$(bash hack/npm-tools.sh asn) && csv=$$(dirname $$asn)/node_modules/@ip-location-db/asn && \
	go run ./hack/image --binary $(BIN)/image/partnerstream --name $(IMG) --out $(BIN)/image.tar \
		--version $(VERSION) --revision $(REVISION) --created $(shell git log -1 --format=%ct 2>/dev/null || echo 0) \
		--add $$db=/usr/share/partnerstream/geoip/country.mmdb \
		--add $$(dirname $$db)/NRO_LICENSE=/usr/share/partnerstream/geoip/NRO_LICENSE \
		--add $$(dirname $$db)/README.md=/usr/share/partnerstream/geoip/README.md \
		--add $$asn=/usr/share/partnerstream/geoip/asn.mmdb \
		--add $$csv/ROUTEVIEWS-LICENSE=/usr/share/partnerstream/geoip/asn/ROUTEVIEWS-LICENSE \
		--add $$csv/DBIP-LICENSE=/usr/share/partnerstream/geoip/asn/DBIP-LICENSE \
		--add $$csv/NRO_LICENSE=/usr/share/partnerstream/geoip/asn/NRO_LICENSE \
		--add $$csv/README.md=/usr/share/partnerstream/geoip/asn/README.md

cluster: ## A local single-node Kubernetes that runs pods, with the platform installed by its chart (.local/cluster)
	@bash hack/cluster.sh cluster

cluster-down: ## Stop the local cluster; the machine is left as `make cluster` found it
	@bash hack/cluster.sh down

e2e: ## A fresh local cluster, helm install, the journey through the api Service, pod kills, upgrade, uninstall
	@bash hack/e2e.sh

docker-build: ## Build the image of every component (IMG=...), version stamped as in `make build`
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

controlplane: ## Build the local Kubernetes control plane used by `make run`
	go build -o $(BIN)/controlplane ./hack/controlplane

tools:
	@bash hack/tools.sh

sdk: ## Regenerate the Go and TypeScript SDKs (sdk/go, sdk/typescript) from the OpenAPI document (docs/sdk.md)
	@bash hack/sdk.sh generate

generate: tools ## Generate deepcopy code for the CRD types
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

manifests: tools ## Generate CRD and RBAC manifests into config/
	$(BIN)/controller-gen crd rbac:roleName=partnerstream-controller paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

helm-lint: ## helm lint --strict of charts/partnerstream (builds bin/helm)
	@bash hack/helm.sh lint

disposable-domains: ## Refresh internal/fraud/disposable_domains.json from the npm package pinned in hack/disposable (docs/fraud.md)
	@bash hack/disposable-domains.sh

helm-docs: ## Regenerate the chart's values tables (chart README, README.md) and its CRD copy
	@bash hack/helm.sh docs

lint: ## go vet, staticcheck, Redocly and a generated TypeScript client on the OpenAPI document, promtool on each component's /metrics and the alert rules, kube-score on the chart (also run by `make test`)
	@bash hack/lint.sh

bench: ## Every Go benchmark, with memory statistics
	go test -run '^$$' -bench . -benchmem ./...

bench-auth: ## API-key authentication overhead per request (p99) beside an unauthenticated baseline, and the shared rate limit's ns per request beside the per-replica one it replaced
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/httpapi/ -run '^$$' -bench 'APIKeyAuthOverhead|KeyAuthenticate' -benchtime 20000x
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/ratelimit/ -run '^$$' -bench LimiterTake -benchtime 5000000x

bench-conversions: ## Conversions/s end to end (HTTP -> attribution -> Postgres rows + outbox) beside repeats of the same requests (answered without a write), and CPU µs per conversion
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/httpapi/ -run '^$$' -bench RegisterConversion

bench-redirect: ## Click redirects per second and p50/p99 in async and ack modes beside a bare Fiber 302 (wrk, 64 and 256 connections)
	@bash hack/bench-redirect.sh

bench-ingest: ## Ingest events/s (topic to queryable rows, clicks enriched) beside a raw ClickHouse batch insert of the same rows, ingest CPU µs/event (backlog and 3,000/s live), its peak RSS and heap with enrichment and without, enrichment's CPU ns/click, and click-to-visible latency
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/ingest/ -run '^$$' -bench 'IngestThroughput|IngestMemory|IngestSteady|ClickToVisible|EnrichClick' -benchtime 1x -timeout 25m

bench-stats: ## p50/p95 of 30-day stats queries over 10 million clicks, per grouping, in UTC and in Asia/Kathmandu
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/stats/ -run '^$$' -bench 'Stats30Days' -benchtime 200x -timeout 30m

bench-backtest: ## Seconds per fraud-rule backtest over 30 days of 10 million clicks and 200,000 conversions, and conversions evaluated per second
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/fraudreview/ -run '^$$' -bench 'Backtest30Days' -benchtime 5x -timeout 30m

bench-export: ## Streamed CSV export of 10k, 100k and 1M conversions over HTTP: rows/s, CPU µs/row, peak heap and RSS (flat), against a cursor-only read
	@GO_TEST_FLAGS=-count=1 bash hack/test.sh ./internal/httpapi/ -run '^$$' -bench 'ExportMemory' -benchtime 1x -timeout 30m

bench-deliver: ## Signed deliveries/s end to end (Kafka -> Postgres -> signed POST -> recorded) beside a plain POST loop, event-to-delivery p50/p95 at 1,000 events/s, and healthy deliveries/s beside a receiver that never answers
	@bash hack/bench-deliver.sh

FUZZTIME ?= 20s
fuzz: ## Short fuzz runs of the parsers (FUZZTIME each)
	go test -run '^$$' -fuzz FuzzParseKey -fuzztime $(FUZZTIME) ./internal/auth/
	@bash hack/test.sh ./internal/session/ -run '^$$' -fuzz FuzzVerify -fuzztime $(FUZZTIME)
	@bash hack/test.sh ./internal/magiccode/ -run '^$$' -fuzz FuzzNormalizeEmail -fuzztime $(FUZZTIME)
	@for t in money:FuzzParse page:FuzzParse httpapi:FuzzDecodeJSON httpapi:FuzzQuery conversions:FuzzValidate \
		conversions:FuzzCommissionAmount ingest:FuzzClickParser tracking:FuzzReadSegment tracking:FuzzEncodeClick tracking:FuzzBotMatcher \
		webhooks/signing:FuzzKey webhooks/signing:FuzzSignHeaders egress:FuzzCheckAddr clickid:FuzzVerify; do \
		bash hack/test.sh ./internal/$${t%%:*}/ -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) || exit 1; done

docs: build ## Regenerate the settings table in README.md
	@bash hack/settings-docs.sh

tidy: ## go mod tidy (-e: a test-only dependency of golang-migrate is not served by the module proxy)
	go mod tidy -e

clean:
	rm -rf $(BIN)/partnerstream $(BIN)/controlplane
