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
if [ $# -gt 0 ]; then
  # shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
  go test ${GO_TEST_FLAGS:--race -count=1 -timeout 20m} "$@"
else
  # go test starts the packages in the order it is given them, -p (the cores) at a time: the
  # slowest go first, so that the run does not end with one of them alone on the machine
  # (docs/testing.md). A package not listed runs in its alphabetical place.
  slowest=(internal/dashboard test/journey internal/httpapi internal/ingest charts/partnerstream sdk/go
    internal/stats internal/delivery internal/conversions internal/programs)
  slowest=("${slowest[@]/#/$(go list -m)/}")
  mapfile -t packages < <(printf '%s\n' "${slowest[@]}"; go list ./... | grep -vxF -f <(printf '%s\n' "${slowest[@]}"))
  # shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
  go test ${GO_TEST_FLAGS:--race -count=1 -timeout 20m} "${packages[@]}"
fi

# The whole suite (`make test`, CI) also runs every linter, with the services still up, and
# proves the platform where users run it: a local cluster that runs its pods, installed with
# the chart (docs/helm.md). A run of chosen packages skips both.
# The two run side by side: the linters mostly compute while the end-to-end run mostly waits
# for its cluster's processes and pods. The linters' output follows the end-to-end run's.
if [ $# -eq 0 ]; then
  # Through a pipe: go vet copies its output with copy_file_range, which fails on a log file
  # that npm has put in append mode.
  (bash hack/lint.sh 2>&1 | cat >"$LOCAL/lint.log") &
  lint=$!
  rc=0
  bash hack/e2e.sh || rc=$?
  wait $lint || rc=1
  cat "$LOCAL/lint.log" >&2
  exit $rc
fi
