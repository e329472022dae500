#!/usr/bin/env bash
# `make bench-deliver`: the delivery engine end to end (events produced to Kafka -> deliveries
# recorded in Postgres -> signed POSTs to a receiver on 127.0.0.1 answering 204 -> attempts
# recorded as succeeded), beside a plain Go loop that POSTs the same bodies unsigned with no
# bookkeeping, in the same run; then event-to-delivery latency at a steady 1,000 events/s
# (internal/delivery/bench_test.go, docs/webhooks.md "Delivery"); then healthy deliveries per
# second to 20 endpoints alone and beside one that never answers (docs/webhooks.md, "Dead
# receivers"). Extra arguments go to `go test`.
#
# It provisions only Postgres (Kafka is the embedded broker of the tests; see bench_postgres
# in lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bench_postgres
# No control plane: the benchmark's subscriptions are in memory (the informer cache answers
# from memory too, see BenchmarkTargets in internal/webhooks).
unset KUBEBUILDER_ASSETS

# No race detector: it would measure itself.
go test -count=1 -run '^$' -bench 'DeliverThroughput|DeliverLatency|DeliverDeadEndpoint' -benchtime 1x -timeout 20m "$@" ./internal/delivery/
