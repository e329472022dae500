#!/usr/bin/env bash
# `make test`: provisions the services, then runs every Go test with the race detector, then
# the end-to-end run through a local cluster (hack/e2e.sh).
# Servers this script started are stopped at the end; ones that were already running (a
# `make run` in another terminal) are left alone. Extra arguments go to `go test`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

started=()
pid_alive "$LOCAL/clickhouse/server.pid" || started+=(clickhouse)
[ -f "$LOCAL/postgres/data/postmaster.pid" ] || started+=(postgres)
cleanup() { for s in "${started[@]}"; do bash "hack/$s.sh" stop || true; done; }
trap cleanup EXIT

env_lines=$(bash hack/services.sh start)
while IFS='=' read -r k v; do export "$k=$v"; done <<<"$env_lines"
# Tests get an admin URL: each test creates and drops its own database.
export PARTNERSTREAM_TEST_POSTGRES_URL=${PARTNERSTREAM_POSTGRES_URL%/*}/postgres?sslmode=disable
export PARTNERSTREAM_TEST_CLICKHOUSE_ADDR=$PARTNERSTREAM_CLICKHOUSE_ADDR
unset PARTNERSTREAM_POSTGRES_URL PARTNERSTREAM_CLICKHOUSE_ADDR

# The chart tests render charts/partnerstream with the pinned helm CLI.
bash hack/helm.sh install

echo "test: postgres $PARTNERSTREAM_TEST_POSTGRES_URL, clickhouse $PARTNERSTREAM_TEST_CLICKHOUSE_ADDR, envtest $KUBEBUILDER_ASSETS" >&2
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test ${GO_TEST_FLAGS:--race -count=1 -timeout 20m} "${@:-./...}"

# The whole suite also proves the platform where users run it: a local cluster that runs its
# pods, installed with the chart (docs/helm.md). A run of chosen packages skips it.
if [ $# -eq 0 ]; then
  bash hack/e2e.sh
fi
