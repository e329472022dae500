#!/usr/bin/env bash
# Builds what a local single-node cluster needs beside the envtest binaries (hack/envtest.sh):
# kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kubectl of the same
# Kubernetes version, and CoreDNS, all from the Go module proxy (no prebuilt binary can be
# downloaded here). The Kubernetes commands are `package main` inside k8s.io/kubernetes, so
# they build straight from the scratch module that envtest.sh prepares (same replace lines).
# Binaries are cached in $PS_CACHE/k8s and copied to bin/k8s; a build is skipped when the
# cached binary reports the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/kube-lib.sh

COREDNS_VERSION=1.14.7
mkdir -p "$PS_CACHE/k8s" "$OUT"

log() { echo "kube-node: $*" >&2; }

missing=()
for b in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl; do
  flag=--version
  [ "$b" = kubectl ] && flag="version --client"
  # shellcheck disable=SC2086 # flag is two words for kubectl
  reports_version "$PS_CACHE/k8s/$b" "v$KUBE_VERSION" $flag || missing+=("$b")
done

build_coredns() {
  local bin=$PS_CACHE/k8s/coredns
  reports_version "$bin" "CoreDNS-$COREDNS_VERSION" -version && return
  log "building CoreDNS v$COREDNS_VERSION (about 4 minutes the first time)"
  GOBIN=$PS_CACHE/build/coredns-bin CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@v$COREDNS_VERSION"
  mv "$PS_CACHE/build/coredns-bin/coredns" "$bin"
}

if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} v$KUBE_VERSION from source (3 minutes with a warm build cache, about 10 cold)"
  mod=$(kube_scratch_module)
  for b in "${missing[@]}"; do
    (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $(kube_version_ldflags)" \
      -o "$PS_CACHE/k8s/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$PS_CACHE/k8s/$b.tmp" "$PS_CACHE/k8s/$b"
  done
fi
build_coredns
for b in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl coredns; do
  if ! cmp -s "$PS_CACHE/k8s/$b" "$OUT/$b" 2>/dev/null; then cp "$PS_CACHE/k8s/$b" "$OUT/$b"; fi
done
log "ready in $OUT"
