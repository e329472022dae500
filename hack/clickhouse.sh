#!/usr/bin/env bash
# Starts or stops a project-local ClickHouse on a free loopback port (native protocol only).
# CLICKHOUSE_LISTEN (default 127.0.0.1) is the address to listen on; CLICKHOUSE_ALLOW_CIDR lets
# that range in too (the local cluster's pods).
#   hack/clickhouse.sh start   -> prints PARTNERSTREAM_CLICKHOUSE_ADDR=$LISTEN:PORT
#   hack/clickhouse.sh stop
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DIR=$LOCAL/clickhouse
PID=$DIR/server.pid
LISTEN=${CLICKHOUSE_LISTEN:-127.0.0.1}

start() {
  if pid_alive "$PID"; then
    echo "PARTNERSTREAM_CLICKHOUSE_ADDR=$LISTEN:$(cat "$DIR/port")"
    return
  fi
  mkdir -p "$DIR"/{data,tmp,user_files,format_schemas,log}
  local port; port=$(free_port "${CLICKHOUSE_PORT:-19000}")
  echo "$port" >"$DIR/port"
  cat >"$DIR/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$DIR/log/server.log</log><errorlog>$DIR/log/error.log</errorlog><size>10M</size><count>2</count></logger>
  <listen_host>$LISTEN</listen_host>
  <tcp_port>$port</tcp_port>
  <path>$DIR/data/</path>
  <tmp_path>$DIR/tmp/</tmp_path>
  <user_files_path>$DIR/user_files/</user_files_path>
  <format_schema_path>$DIR/format_schemas/</format_schema_path>
  <users_config>$DIR/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>536870912</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <timezone>UTC</timezone>
</yandex>
XML
  cat >"$DIR/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default>
    <allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>
    <max_memory_usage>4000000000</max_memory_usage>
  </default></profiles>
  <users><default>
    <password></password>
    <networks><ip>127.0.0.1</ip><ip>::1</ip><ip>$LISTEN</ip>${CLICKHOUSE_ALLOW_CIDR:+<ip>$CLICKHOUSE_ALLOW_CIDR</ip>}</networks>
    <profile>default</profile><quota>default</quota>
  </default></users>
  <quotas><default></default></quotas>
</yandex>
XML
  nohup clickhouse-server --config-file="$DIR/config.xml" >"$DIR/log/stdout.log" 2>&1 &
  echo $! >"$PID"
  if ! wait_for 30 "clickhouse on port $port" clickhouse-client --host "$LISTEN" --port "$port" --query "SELECT 1"; then
    tail -20 "$DIR/log/stdout.log" "$DIR/log/error.log" >&2 || true
    exit 1
  fi
  echo "PARTNERSTREAM_CLICKHOUSE_ADDR=$LISTEN:$port"
}

stop() { stop_pidfile "$PID"; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
