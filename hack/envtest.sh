#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from source through the Go
# module proxy, because prebuilt assets cannot be downloaded here. `go install` refuses both
# (their go.mod files carry replace directives), so each is built from a scratch module that
# repeats those replaces. Binaries are cached in $PS_CACHE (outside the clone) and copied to
# bin/k8s; a build is skipped when the cached binary already reports the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION=1.37.1
ETCD_VERSION=3.6.16
PS_CACHE=${PS_CACHE:-$HOME/.cache/partnerstream}
OUT=bin/k8s
mkdir -p "$PS_CACHE/k8s" "$OUT"

log() { echo "envtest: $*" >&2; }

# reports_version BIN TEXT: BIN exists and its --version output contains TEXT. The output is
# read whole: `| grep -q` would stop reading at the match, and under pipefail the writer's
# SIGPIPE made a cached binary look stale and rebuilt it on every run.
reports_version() {
  local out
  [ -x "$1" ] && out=$("$1" --version 2>/dev/null) && [[ $out == *"$2"* ]]
}

build_kube_apiserver() {
  local bin=$PS_CACHE/k8s/kube-apiserver
  if reports_version "$bin" "v$KUBE_VERSION"; then
    return
  fi
  log "building kube-apiserver v$KUBE_VERSION from source (about 5 minutes the first time)"
  local mod=$PS_CACHE/build/kube-apiserver
  rm -rf "$mod" && mkdir -p "$mod"
  local gomod
  gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module psbuild/kubeapiserver"
    echo "go 1.25"
    echo "require k8s.io/kubernetes v$KUBE_VERSION"
    grep -E '=> \./staging/src/' "$gomod" | awk -v v="v0.${KUBE_VERSION#1.}" '{print "replace " $1 " => " $1 " " v}'
  } >"$mod/go.mod"
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true)
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_VERSION#1.}" \
    -o "$bin.tmp" .)
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
