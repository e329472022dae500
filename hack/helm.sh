#!/usr/bin/env bash
# The Helm chart's tooling.
#
#   hack/helm.sh install   # bin/helm, the pinned release built from the Go module proxy
#   hack/helm.sh lint      # helm lint --strict of charts/partnerstream
#   hack/helm.sh docs      # regenerate the values tables (chart README, README.md) and the
#                          # chart's copy of the CRDs from config/crd/bases
#
# `install` is idempotent: it skips the build when bin/helm already reports the pinned
# version, and keeps the binary in $PS_CACHE/tools (outside the clone) so a clean clone copies
# it instead of building (about 3 minutes cold). It links the version and the Kubernetes
# version helm assumes offline (`helm template`, `helm lint`) the way Helm's own Makefile
# does; a plain `go install` would report v3.22 and Kubernetes 1.20. Progress goes to stderr.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

HELM_VERSION=v3.22.0
# Helm v3.22 is built against client-go v0.37, i.e. Kubernetes 1.37.
KUBE_MAJOR=1
KUBE_MINOR=37
PS_CACHE=${PS_CACHE:-$HOME/.cache/partnerstream}
BIN=$ROOT/bin
CACHE=$PS_CACHE/tools
CHART=charts/partnerstream

log() { echo "helm: $*" >&2; }

has_version() { [ -x "$1" ] && [[ $("$1" version --short 2>/dev/null) == "$HELM_VERSION"* ]]; }

install() {
  mkdir -p "$BIN" "$CACHE"
  if has_version "$BIN/helm"; then
    log "$HELM_VERSION: up to date"
  elif has_version "$CACHE/helm"; then
    log "$HELM_VERSION: copying from $CACHE"
    cp "$CACHE/helm" "$BIN/helm.tmp.$$" && mv -f "$BIN/helm.tmp.$$" "$BIN/helm"
  else
    log "$HELM_VERSION: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    local pkg=helm.sh/helm/v3
    GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w \
      -X $pkg/internal/version.version=$HELM_VERSION \
      -X $pkg/pkg/chartutil.k8sVersionMajor=$KUBE_MAJOR -X $pkg/pkg/chartutil.k8sVersionMinor=$KUBE_MINOR \
      -X $pkg/pkg/lint/rules.k8sVersionMajor=$KUBE_MAJOR -X $pkg/pkg/lint/rules.k8sVersionMinor=$KUBE_MINOR" \
      "$pkg/cmd/helm@$HELM_VERSION"
    if ! has_version "$BIN/helm"; then
      log "$BIN/helm version --short does not print $HELM_VERSION: $("$BIN/helm" version --short 2>&1 | head -1)"
      return 1
    fi
  fi
  if ! cmp -s "$BIN/helm" "$CACHE/helm"; then
    cp "$BIN/helm" "$CACHE/helm.tmp.$$" && mv -f "$CACHE/helm.tmp.$$" "$CACHE/helm"
  fi
}

case ${1:-install} in
  install) install ;;
  lint)
    install
    "$BIN/helm" lint --strict "$CHART"
    ;;
  docs)
    cp config/crd/bases/*.yaml "$CHART/files/crds/"
    # The generator is the chart test's own table code, so the test and the docs agree.
    go test ./charts/partnerstream/ -count=1 -run '^TestValuesTablesAreCurrent$' -update
    ;;
  *)
    echo "usage: hack/helm.sh [install|lint|docs]" >&2
    exit 2
    ;;
esac
