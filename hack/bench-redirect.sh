#!/usr/bin/env bash
# `make bench-redirect`: throughput and latency of the click redirect, async and ack modes,
# beside a bare Fiber handler answering the same 302, under wrk on loopback (see
# hack/bench-redirect/main.go and docs/tracking.md). Extra arguments go to the Go program,
# e.g. `bash hack/bench-redirect.sh -duration 20s -connections 64,256,512`.
#
# It provisions only what the redirect needs (wrk, Postgres): ClickHouse and a Kubernetes
# control plane idling on the same cores would only add noise. A Postgres this script
# started is stopped at the end; one that was already running is left alone.
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
# An admin URL: the benchmark creates and drops a scratch database.
export PARTNERSTREAM_TEST_POSTGRES_URL=${url%/*}/postgres?sslmode=disable

# No race detector: it would measure itself.
go build -o "$ROOT/bin/bench-redirect" ./hack/bench-redirect
"$ROOT/bin/bench-redirect" "$@"
