#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from source through the Go
# module proxy, because prebuilt assets cannot be downloaded here. `go install` refuses both
# (their go.mod files carry replace directives), so each is built from a scratch module that
# repeats those replaces. Binaries are cached in $PS_CACHE (outside the clone) and copied to
# bin/k8s; a build is skipped when the cached binary already reports the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."

source hack/kube-lib.sh
ETCD_VERSION=3.6.16
mkdir -p "$PS_CACHE/k8s" "$OUT"

log() { echo "envtest: $*" >&2; }

build_kube_apiserver() {
  local bin=$PS_CACHE/k8s/kube-apiserver
  if reports_version "$bin" "v$KUBE_VERSION"; then
    return
  fi
  log "building kube-apiserver v$KUBE_VERSION from source (about 5 minutes the first time)"
  local mod
  mod=$(kube_scratch_module)
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $(kube_version_ldflags)" \
    -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$bin.tmp" "$bin"
}

build_etcd() {
  local bin=$PS_CACHE/k8s/etcd
  if reports_version "$bin" "etcd Version: $ETCD_VERSION"; then
    return
  fi
  log "building etcd v$ETCD_VERSION from source (about 1 minute the first time)"
  local mod=$PS_CACHE/build/etcd
  rm -rf "$mod" && mkdir -p "$mod"
  cat >"$mod/go.mod" <<MOD
module psbuild/etcd
go 1.25
require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v$ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v$ETCD_VERSION
)
MOD
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true)
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
}

# Built side by side: on a fresh machine much of the time is module downloads, which overlap.
build_etcd &
etcd_pid=$!
build_kube_apiserver
wait "$etcd_pid"
for b in kube-apiserver etcd; do
  if ! cmp -s "$PS_CACHE/k8s/$b" "$OUT/$b" 2>/dev/null; then cp "$PS_CACHE/k8s/$b" "$OUT/$b"; fi
done
log "ready in $OUT (kube-apiserver v$KUBE_VERSION, etcd v$ETCD_VERSION)"
