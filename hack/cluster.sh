#!/usr/bin/env bash
# A local single-node Kubernetes cluster that runs the platform's pods, installed with the
# project's own chart. See docs/helm.md, "Try it on a local cluster".
#
#   hack/cluster.sh up        # build what is missing, start the cluster and the host services
#   hack/cluster.sh install [helm flags...]   # helm install --wait (release and namespace
#                             # partnerstream), then the demo data in .local/cluster/demo.json
#   hack/cluster.sh down      # stop everything; the machine is left as `up` found it
#
# `make cluster` is up + install; `make e2e` is up, the end-to-end test (which installs,
# upgrades and uninstalls), and down. The chart's external dependencies run on this machine,
# bound to the node's address so pods reach them: Postgres, ClickHouse, the Kafka-protocol
# broker (hack/kafka) and a mail catcher (MailDev, hack/maildev) whose web page shows the
# sign-in codes the api sends. Nothing listens beyond loopback and the cluster's own private
# network.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

DIR=$LOCAL/cluster
HOST=$DIR/host
NODE_IP=10.213.0.1 # hack/cluster/main.go: nodeIP
POD_CIDR=10.214.0.0/24
POD_GATEWAY=10.214.0.1 # the bridge's address: pods see the host's connections come from it
API_NODE_PORT=30080
MAIL_SMTP_PORT=1025 # the node address is the cluster's own: fixed ports cannot collide
MAIL_WEB_PORT=1080
NS=partnerstream
RELEASE=partnerstream
KUBECONFIG_FILE=$DIR/kubeconfig
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
CREATED=$(git log -1 --format=%ct 2>/dev/null || echo 0)
PAUSE_IMAGE=registry.k8s.io/pause:3.10

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
kubectl() { "$ROOT/bin/k8s/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
helm() { "$ROOT/bin/helm" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# build: the Kubernetes binaries, helm, the platform's image and the pause image.
build() {
  bash hack/deps.sh >&2
  bash hack/envtest.sh
  bash hack/kube-node.sh
  bash hack/helm.sh install
  step "building the images"
  # The rest is independent builds, mostly single-threaded links: side by side they keep both
  # cores busy.
  local pids=() pid failed=0
  bash hack/npm-tools.sh maildev &
  pids+=($!)
  make --no-print-directory image VERSION="$VERSION" >&2 &
  pids+=($!)
  {
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/pause ./hack/pause
    go run ./hack/image --binary bin/pause --name "$PAUSE_IMAGE" --out bin/pause.tar --entrypoint /pause --cmd "" \
      --user 65535:65535 --ca-bundle "" --ports "" --version 3.10 --created 0 >&2
  } &
  pids+=($!)
  go build -o bin/cluster ./hack/cluster &
  pids+=($!)
  go build -o bin/kafka ./hack/kafka &
  pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ $failed = 0 ] || { echo "cluster: a build failed (above)" >&2; return 1; }
}

up() {
  build
  step "starting the cluster (node $NODE_IP, pods $POD_CIDR)"
  bin/cluster up --dir "$DIR" --assets bin/k8s --images "bin/image.tar,bin/pause.tar" --pause-image "$PAUSE_IMAGE"

  step "starting Postgres, ClickHouse and Kafka for the cluster on $NODE_IP"
  mkdir -p "$HOST"
  local pg ch
  pg=$(PARTNERSTREAM_LOCAL_DIR=$HOST POSTGRES_LISTEN=$NODE_IP POSTGRES_ALLOW_CIDR=$POD_CIDR bash hack/postgres.sh start)
  ch=$(PARTNERSTREAM_LOCAL_DIR=$HOST CLICKHOUSE_LISTEN=$NODE_IP CLICKHOUSE_ALLOW_CIDR=$POD_CIDR bash hack/clickhouse.sh start)
  local kafka=$NODE_IP:9092
  if ! pid_alive "$HOST/kafka.pid"; then
    setsid bin/kafka --any-host --addr "$kafka" --data-dir "$HOST/kafka" >"$HOST/kafka.log" 2>&1 </dev/null &
    echo $! >"$HOST/kafka.pid"
    wait_for 30 "kafka on $kafka" grep -q "ready" "$HOST/kafka.log"
  fi
  if ! pid_alive "$HOST/maildev.pid"; then
    setsid bin/maildev/node_modules/.bin/maildev --ip "$NODE_IP" --smtp "$MAIL_SMTP_PORT" \
      --web-ip "$NODE_IP" --web "$MAIL_WEB_PORT" --mail-directory "$HOST/mail" >"$HOST/maildev.log" 2>&1 </dev/null &
    echo $! >"$HOST/maildev.pid"
    wait_for 30 "the mail catcher on $NODE_IP:$MAIL_WEB_PORT" curl -fsS "http://$NODE_IP:$MAIL_WEB_PORT/api/healthz"
  fi
  {
    echo "$pg"
    echo "$ch"
    echo "PARTNERSTREAM_KAFKA_BROKERS=$kafka"
    echo "PARTNERSTREAM_NODE_IP=$NODE_IP"
    echo "PARTNERSTREAM_POD_GATEWAY=$POD_GATEWAY"
    echo "PARTNERSTREAM_SMTP_ADDR=$NODE_IP:$MAIL_SMTP_PORT"
    echo "PARTNERSTREAM_MAIL_URL=http://$NODE_IP:$MAIL_WEB_PORT"
    echo "PARTNERSTREAM_BASE_URL=http://$NODE_IP:$API_NODE_PORT"
    echo "PARTNERSTREAM_IMAGE_TAG=$VERSION" # what `up` imported; a later commit must not change it
  } >"$DIR/env"
}

# values: the chart's values for this machine; the Secrets and the receivers' CA go in first.
# Click ids are signed with the key the chart generates, as on an install with default values.
values() {
  # shellcheck disable=SC1090 # written by up
  source <(sed 's/^/export /' "$DIR/env")
  kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  if ! kubectl -n "$NS" get secret partnerstream-local >/dev/null 2>&1; then
    local pgurl=${PARTNERSTREAM_POSTGRES_URL}
    kubectl -n "$NS" create secret generic partnerstream-local \
      --from-literal=postgres-url="$pgurl" \
      --from-literal=session-keys="k1:$(head -c 32 /dev/urandom | base64 -w0)" >/dev/null
  fi
  kubectl -n "$NS" create configmap partnerstream-receiver-ca --from-file=ca.crt="$DIR/pki/receiver-ca.crt" \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  cat >"$DIR/values.yaml" <<YAML
image:
  tag: "$PARTNERSTREAM_IMAGE_TAG"
  pullPolicy: Never
postgres:
  url: {secretName: partnerstream-local, secretKey: postgres-url}
clickhouse:
  addr: {value: "$PARTNERSTREAM_CLICKHOUSE_ADDR"}
kafka:
  brokers: {value: "$PARTNERSTREAM_KAFKA_BROKERS"}
  partitions: 3
  replicationFactor: 1 # hack/kafka is one broker
session:
  keys: {secretName: partnerstream-local, secretKey: session-keys}
smtp:
  host: {value: "${PARTNERSTREAM_SMTP_ADDR%:*}"}
  port: ${PARTNERSTREAM_SMTP_ADDR##*:}
  tls: none
api:
  baseURL: "$PARTNERSTREAM_BASE_URL"
  service: {type: NodePort, nodePort: $API_NODE_PORT}
ingest:
  batchInterval: 200ms
egress:
  allowCIDRs: ["$NODE_IP/32"]
  caBundle: {configMapName: partnerstream-receiver-ca}
YAML
}

install() {
  values
  step "helm install $RELEASE (namespace $NS, image tag $PARTNERSTREAM_IMAGE_TAG)"
  local began=$SECONDS
  helm upgrade --install "$RELEASE" charts/partnerstream -n "$NS" -f "$DIR/values.yaml" --wait --timeout 5m "$@" >&2
  # The first request to a Service right after kube-proxy programs it may get no answer:
  # wait for the api through the node port, not only for the pods.
  wait_for 60 "the api through its Service" curl -fsS "$PARTNERSTREAM_BASE_URL/readyz"
  step "installed in $((SECONDS - began))s"

  local keys
  keys=$(kubectl -n "$NS" get secret partnerstream-local -o jsonpath='{.data.session-keys}' | base64 -d)
  PARTNERSTREAM_SESSION_KEYS=$keys bin/image/partnerstream seed --postgres-url "$PARTNERSTREAM_POSTGRES_URL" \
    --base-url "$PARTNERSTREAM_BASE_URL" --demo-file "$DIR/demo.json" --metrics-addr 127.0.0.1:0 --log-level warn >&2
  # The cluster's extras, for scripts and the end-to-end test.
  local body
  body=$(sed '$d' "$DIR/demo.json")
  printf '%s,\n  "kubeconfig": "%s",\n  "namespace": "%s",\n  "receiver_host": "%s",\n  "receiver_ca_cert": "%s",\n  "receiver_ca_key": "%s"\n}\n' \
    "$body" "$KUBECONFIG_FILE" "$NS" "$NODE_IP" "$DIR/pki/receiver-ca.crt" "$DIR/pki/receiver-ca.key" >"$DIR/demo.json"
}

summary() {
  cat >&2 <<MSG

$(printf '\033[1m')PartnerStream is running in a local Kubernetes cluster.$(printf '\033[0m')

  Pods          bin/k8s/kubectl --kubeconfig $KUBECONFIG_FILE -n $NS get pods
  API           $PARTNERSTREAM_BASE_URL   (the api Service, node port $API_NODE_PORT)
  Health        $PARTNERSTREAM_BASE_URL/readyz
  Demo data     $DIR/demo.json (companies, API keys, session tokens, program, tracking link)
  Receivers     webhooks to https://$NODE_IP:<port>/ with a certificate from
                $DIR/pki/receiver-ca.crt (key beside it) are trusted and allowed
  Dashboard     $PARTNERSTREAM_BASE_URL/login   (sign in with a demo e-mail from the file above)
  Mail          $PARTNERSTREAM_MAIL_URL   (MailDev: every e-mail the api sends, sign-in codes too)
  Postgres      $PARTNERSTREAM_POSTGRES_URL
  Logs          $DIR/logs/ (cluster), bin/k8s/kubectl ... logs deploy/partnerstream-api
  Stop          make cluster-down

MSG
}

down() {
  step "stopping the cluster's host services"
  stop_pidfile "$HOST/kafka.pid"
  stop_pidfile "$HOST/maildev.pid"
  if [ -d "$HOST" ]; then
    PARTNERSTREAM_LOCAL_DIR=$HOST bash hack/clickhouse.sh stop
    PARTNERSTREAM_LOCAL_DIR=$HOST POSTGRES_LISTEN=$NODE_IP bash hack/postgres.sh stop || true
  fi
  step "stopping the cluster"
  if [ -x bin/cluster ]; then bin/cluster down --dir "$DIR" --assets bin/k8s; else go run ./hack/cluster down --dir "$DIR" --assets bin/k8s; fi
}

case "${1:-}" in
  up) up ;;
  install) shift; install "$@" ;;
  cluster) up; install; summary ;;
  down) down ;;
  *) echo "usage: $0 up|install|cluster|down" >&2; exit 2 ;;
esac
