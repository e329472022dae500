# Shared helpers for the hack/ scripts (sourced, not run).
# Project-local state lives in .local/ (git-ignored): data dirs, logs, chosen ports.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCAL=${PARTNERSTREAM_LOCAL_DIR:-$ROOT/.local}
mkdir -p "$LOCAL"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port PREFERRED: the preferred port when it is free, otherwise a free one above 20000.
free_port() {
  local p=$1
  if ! port_in_use "$p"; then echo "$p"; return; fi
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! port_in_use "$p"; then echo "$p"; return; fi
  done
  echo "no free loopback port found" >&2
  return 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "$what did not become ready in ${secs}s" >&2; return 1; fi
    sleep 0.1
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pidfile FILE: SIGTERM to the process FILE names, SIGKILL after 10 s, then FILE goes.
stop_pidfile() {
  if pid_alive "$1"; then
    kill "$(cat "$1")" || true
    for _ in $(seq 1 100); do pid_alive "$1" || break; sleep 0.1; done
    pid_alive "$1" && kill -9 "$(cat "$1")" || true
  fi
  rm -f "$1"
}

# bench_postgres: for benchmarks that need only Postgres (ClickHouse and a control plane idling
# on the same cores would only add noise). Installs the packages, starts Postgres, exports an
# admin URL (each benchmark creates and drops a scratch database) and stops Postgres on exit
# if it was not running before.
bench_postgres() {
  bash "$ROOT/hack/deps.sh" >&2
  if [ ! -f "$LOCAL/postgres/data/postmaster.pid" ]; then
    trap 'bash "$ROOT/hack/postgres.sh" stop || true' EXIT
  fi
  local line url
  line=$(bash "$ROOT/hack/postgres.sh" start)
  url=${line#PARTNERSTREAM_POSTGRES_URL=}
  export PARTNERSTREAM_TEST_POSTGRES_URL=${url%/*}/postgres?sslmode=disable
}

# start_test_services: starts Postgres and ClickHouse (and provisions envtest) as `make test`
# needs them, exports the tests' variables, and stops on exit the servers it started (ones
# already running, a `make run` in another terminal, are left alone).
start_test_services() {
  _started_services=()
  pid_alive "$LOCAL/clickhouse/server.pid" || _started_services+=(clickhouse)
  [ -f "$LOCAL/postgres/data/postmaster.pid" ] || _started_services+=(postgres)
  trap 'for s in "${_started_services[@]}"; do bash "$ROOT/hack/$s.sh" stop || true; done' EXIT
  local env_lines k v
  env_lines=$(bash "$ROOT/hack/services.sh" start)
  while IFS='=' read -r k v; do export "$k=$v"; done <<<"$env_lines"
  # Tests get an admin URL: each test creates and drops its own database.
  export PARTNERSTREAM_TEST_POSTGRES_URL=${PARTNERSTREAM_POSTGRES_URL%/*}/postgres?sslmode=disable
  export PARTNERSTREAM_TEST_CLICKHOUSE_ADDR=$PARTNERSTREAM_CLICKHOUSE_ADDR
  # The replicated ClickHouse test starts its own ZooKeeper from Debian's package (hack/deps.sh)
  # and two servers beside the one above.
  if [ -f /usr/share/java/zookeeper.jar ]; then
    export PARTNERSTREAM_TEST_ZOOKEEPER_CLASSPATH=/usr/share/java/zookeeper.jar
  fi
  unset PARTNERSTREAM_POSTGRES_URL PARTNERSTREAM_CLICKHOUSE_ADDR
}
