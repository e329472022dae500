#!/usr/bin/env bash
# Starts or stops a project-local Postgres 15 on a free loopback port. Postgres refuses to run
# as root, so as root the cluster belongs to the `postgres` system user. POSTGRES_LISTEN
# (default 127.0.0.1) is the address to listen on; POSTGRES_ALLOW_CIDR lets that range in with
# the password (the local cluster's pods).
#   hack/postgres.sh start   -> prints PARTNERSTREAM_POSTGRES_URL=postgres://...
#   hack/postgres.sh stop
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DIR=$LOCAL/postgres
DATA=$DIR/data
BIN=/usr/lib/postgresql/15/bin
DB=partnerstream
LISTEN=${POSTGRES_LISTEN:-127.0.0.1}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() { echo "PARTNERSTREAM_POSTGRES_URL=postgres://partnerstream:partnerstream@$LISTEN:$(cat "$DIR/port")/$DB?sslmode=disable"; }

running() { [ -f "$DATA/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

# allow_hba CIDR METHOD: one pg_hba line for the range, added once.
allow_hba() {
  grep -q "^host all all $1 " "$DATA/pg_hba.conf" || echo "host all all $1 $2" >>"$DATA/pg_hba.conf"
}

start() {
  mkdir -p "$DIR"
  [ "$(id -u)" = 0 ] && chown postgres: "$DIR"
  if running; then url; return; fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log" >&2; exit 1; }
  fi
  # This machine's own connections to a non-loopback address come from that address.
  allow_hba "$LISTEN/32" trust
  [ -z "${POSTGRES_ALLOW_CIDR:-}" ] || allow_hba "$POSTGRES_ALLOW_CIDR" scram-sha-256
  local port; port=$(free_port "${POSTGRES_PORT:-15432}")
  echo "$port" >"$DIR/port"
  # Tuned for tests and a laptop: durability of the dev data matters less than speed, but
  # fsync stays on so crash tests mean something.
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start -o \
    "-c listen_addresses=$LISTEN -p $port -k $DIR -c max_connections=300 -c shared_buffers=256MB -c synchronous_commit=off -c full_page_writes=off" >/dev/null \
    || { tail -20 "$DIR/server.log" >&2; exit 1; }
  psql_admin() { as_owner "$BIN/psql" -h "$LISTEN" -p "$port" -U postgres -d postgres -qtAX "$@"; }
  if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname='partnerstream'")" != 1 ]; then
    psql_admin -c "CREATE ROLE partnerstream LOGIN SUPERUSER PASSWORD 'partnerstream'"
  fi
  if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname='$DB'")" != 1 ]; then
    psql_admin -c "CREATE DATABASE $DB OWNER partnerstream"
  fi
  url
}

stop() {
  if running; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
