#!/usr/bin/env bash
# `make bench-deliver`: the delivery engine end to end (events produced to Kafka -> deliveries
# recorded in Postgres -> signed POSTs to a receiver on 127.0.0.1 answering 204 -> attempts
# recorded as succeeded), beside a plain Go loop that POSTs the same bodies unsigned with no
# bookkeeping, in the same run; then event-to-delivery latency at a steady 1,000 events/s
# (internal/delivery/bench_test.go, docs/webhooks.md "Delivery"). Extra arguments go to
# `go test`.
#
# It provisions only Postgres (Kafka is the embedded broker of the tests): ClickHouse and a
# Kubernetes control plane idling on the same cores would only add noise. A Postgres this
# script started is stopped at the end; one that was already running is left alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bash hack/deps.sh >&2
started=0
[ -f "$LOCAL/postgres/data/postmaster.pid" ] || started=1
cleanup() { if [ $started = 1 ]; then bash hack/postgres.sh stop || true; fi; }
trap cleanup EXIT

line=$(bash hack/postgres.sh start)
url=${line#PARTNERSTREAM_POSTGRES_URL=}
# An admin URL: each benchmark creates and drops a scratch database.
export PARTNERSTREAM_TEST_POSTGRES_URL=${url%/*}/postgres?sslmode=disable
# No control plane: the benchmark's subscriptions are in memory (the informer cache answers
# from memory too, see BenchmarkTargets in internal/webhooks).
unset KUBEBUILDER_ASSETS

# No race detector: it would measure itself.
go test -count=1 -run '^$' -bench 'DeliverThroughput|DeliverLatency' -benchtime 1x -timeout 20m "$@" ./internal/delivery/
