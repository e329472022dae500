#!/usr/bin/env bash
# `make run`: the whole platform on this machine, from nothing. Installs and starts Postgres,
# ClickHouse and a local Kubernetes control plane, builds the binary, runs `partnerstream dev`
# (every component plus an embedded Kafka broker) with demo data, and prints how to use it.
# Ctrl-C (or `make stop` from another terminal) stops everything it started.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

HTTP_ADDR=${PARTNERSTREAM_HTTP_ADDR:-127.0.0.1:8080}
METRICS_ADDR=${PARTNERSTREAM_METRICS_ADDR:-127.0.0.1:9090}
BASE_URL=${PARTNERSTREAM_BASE_URL:-http://$HTTP_ADDR}
RUN_PIDS=$LOCAL/run.pids

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

for addr in "$HTTP_ADDR" "$METRICS_ADDR" "127.0.0.1:9092"; do
  if port_in_use "${addr##*:}"; then
    echo "make run: port ${addr##*:} is in use (is another 'make run' running? try 'make stop')" >&2
    exit 1
  fi
done

cleanup() {
  trap - EXIT INT TERM
  step "stopping"
  bash hack/stop.sh
}
trap cleanup EXIT INT TERM

step "installing and starting services (first run: packages and a Kubernetes build, ~10 min)"
# Servers already running (a `make test` in another terminal) are left running by the stop.
mkdir -p "$LOCAL"
{ pid_alive "$LOCAL/clickhouse/server.pid" || echo clickhouse
  [ -f "$LOCAL/postgres/data/postmaster.pid" ] || echo postgres; } >"$LOCAL/run.services"
env_lines=$(bash hack/services.sh start)
while IFS='=' read -r k v; do export "$k=$v"; done <<<"$env_lines"

step "building"
make --no-print-directory build controlplane >&2

step "starting the local Kubernetes control plane"
: >"$RUN_PIDS"
rm -f "$LOCAL/kubeconfig"
bin/controlplane --assets bin/k8s --dir "$LOCAL/kube" --kubeconfig "$LOCAL/kubeconfig" --crds config/crd/bases \
  >"$LOCAL/controlplane.log" 2>&1 &
echo $! >>"$RUN_PIDS"
if ! wait_for 120 "the control plane" grep -q "ready" "$LOCAL/controlplane.log"; then
  tail -20 "$LOCAL/controlplane.log" >&2
  exit 1
fi

step "starting partnerstream dev"
# The image's IP-to-country and ASN databases, from npm (cached in ~/.cache/partnerstream).
GEOIP_DB=${PARTNERSTREAM_GEOIP_DB:-$(bash hack/npm-tools.sh geoip)}
ASN_DB=${PARTNERSTREAM_ASN_DB:-$(bash hack/npm-tools.sh asn)}
PARTNERSTREAM_GEOIP_DB=$GEOIP_DB PARTNERSTREAM_ASN_DB=$ASN_DB \
PARTNERSTREAM_HTTP_ADDR=$HTTP_ADDR PARTNERSTREAM_METRICS_ADDR=$METRICS_ADDR PARTNERSTREAM_BASE_URL=$BASE_URL \
PARTNERSTREAM_KUBECONFIG=$LOCAL/kubeconfig PARTNERSTREAM_DEV_KAFKA_DATA_DIR=$LOCAL/kafka \
PARTNERSTREAM_DEV_DEMO_FILE=$LOCAL/demo.json PARTNERSTREAM_CLICK_SPOOL_DIR=$LOCAL/spool \
  bin/partnerstream dev 2> >(tee -a "$LOCAL/partnerstream.log" >&2) &
DEV_PID=$!
echo $DEV_PID >>"$RUN_PIDS"
if ! wait_for 120 "partnerstream" curl -fsS "http://$METRICS_ADDR/readyz"; then
  exit 1
fi

demo=$LOCAL/demo.json
field() { sed -n "/\"$1\"/,/}/s/.*\"$2\": \"\(.*\)\".*/\1/p" "$demo" | head -1; }
top() { sed -n "s/^  \"$1\": \"\(.*\)\".*/\1/p" "$demo" | head -1; }
cat >&2 <<MSG

$(printf '\033[1m')PartnerStream is running.$(printf '\033[0m')

  API and dashboard   $BASE_URL
  Health              $BASE_URL/readyz
  Metrics             http://$METRICS_ADDR/metrics
  Kafka (embedded)    127.0.0.1:9092   (kcat -b 127.0.0.1:9092 -L)
  Kubernetes          kubectl --kubeconfig $LOCAL/kubeconfig get ns
  Postgres            $PARTNERSTREAM_POSTGRES_URL
  ClickHouse          clickhouse-client --port ${PARTNERSTREAM_CLICKHOUSE_ADDR##*:}

  Demo advertiser     $(field advertiser email)
                      company $(field advertiser company_id)
                      API key $(field advertiser api_key)
  Demo affiliate      $(field affiliate email)
                      company $(field affiliate company_id)
                      API key $(field affiliate api_key)

  Demo program        $(top program_id)  (public, 10 % of each sale, EUR)
  Tracking link       $(top tracking_url)   (try it: curl -i <link>)

  Dashboard           $BASE_URL/login   (English or Spanish)
  Sign in with a demo e-mail: the 6-digit code is printed in the log (no SMTP server in
  dev: grep "mail not sent" $LOCAL/partnerstream.log). Scripts can use session_token from the file.
  Webhooks to receivers on 127.0.0.1 work out of the box (--egress-allow-cidrs).
  Everything above is also in $demo (for scripts).
  Logs: $LOCAL/partnerstream.log. Stop with Ctrl-C or 'make stop'.

MSG
wait "$DEV_PID"
