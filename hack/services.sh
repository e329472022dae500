#!/usr/bin/env bash
# Provisions and starts the services that `make run` and `make test` need: the Debian
# packages, Postgres and ClickHouse on loopback, and the envtest binaries. Prints the
# environment as KEY=VALUE lines on stdout (progress goes to stderr).
#   hack/services.sh start | stop
set -euo pipefail
source "$(dirname "$0")/lib.sh"

case "${1:-}" in
  start)
    bash "$ROOT/hack/deps.sh" >&2
    bash "$ROOT/hack/envtest.sh" >&2
    bash "$ROOT/hack/postgres.sh" start
    bash "$ROOT/hack/clickhouse.sh" start
    echo "KUBEBUILDER_ASSETS=$ROOT/bin/k8s"
    ;;
  stop)
    bash "$ROOT/hack/clickhouse.sh" stop
    bash "$ROOT/hack/postgres.sh" stop
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
