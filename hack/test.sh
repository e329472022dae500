#!/usr/bin/env bash
# `make test`: provisions the services, then runs every Go test with the race detector, then
# `make lint` (hack/lint.sh) and the end-to-end run through a local cluster (hack/e2e.sh)
# when no arguments narrow the run.
# Servers this script started are stopped at the end; ones that were already running (a
# `make run` in another terminal) are left alone. Extra arguments go to `go test`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

start_test_services

# The chart tests render charts/partnerstream with the pinned helm CLI.
bash hack/helm.sh install
# The dashboard's browser tests run axe-core in every page (PARTNERSTREAM_AXE is its script).
bash hack/npm-tools.sh axe
export PARTNERSTREAM_AXE=$ROOT/bin/axe/node_modules/axe-core/axe.min.js
# The image's IP-to-country and ASN databases, which internal/enrich's tests look well-known
# addresses up in.
PARTNERSTREAM_TEST_GEOIP_DB=$(bash hack/npm-tools.sh geoip)
PARTNERSTREAM_TEST_ASN_DB=$(bash hack/npm-tools.sh asn)
export PARTNERSTREAM_TEST_GEOIP_DB PARTNERSTREAM_TEST_ASN_DB

echo "test: postgres $PARTNERSTREAM_TEST_POSTGRES_URL, clickhouse $PARTNERSTREAM_TEST_CLICKHOUSE_ADDR, envtest $KUBEBUILDER_ASSETS" >&2
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test ${GO_TEST_FLAGS:--race -count=1 -timeout 20m} "${@:-./...}"

# The whole suite (`make test`, CI) also runs every linter, with the services still up, and
# proves the platform where users run it: a local cluster that runs its pods, installed with
# the chart (docs/helm.md). A run of chosen packages skips both.
if [ $# -eq 0 ]; then
  bash hack/lint.sh
  bash hack/e2e.sh
fi
