#!/usr/bin/env bash
# Installs the pinned dev tools into bin/ (GOBIN=bin go install), idempotently.
#
#   hack/tools.sh                    # every tool
#   hack/tools.sh controller-gen     # only the named ones
#
# A tool is skipped when bin/<tool> already reports the pinned version. Built binaries are
# also kept in $PS_CACHE/tools (outside the clone, default ~/.cache/partnerstream/tools) and
# copied back from there, so a clean clone (CI) does not rebuild them. Progress goes to
# stderr; nothing is printed on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PS_CACHE=${PS_CACHE:-$HOME/.cache/partnerstream}
BIN=$ROOT/bin
CACHE=$PS_CACHE/tools

# name | package | pinned version | version flag | what that flag prints for the pinned version
# Tools that only learn their version from release ldflags have no flag: the module version
# in the binary's build information (`go version -m`) is checked instead.
TOOLS=(
  "controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|v0.23.0|--version|Version: v0.23.0"
  # staticcheck 2026.2.2; v0.8.x is the first line whose go.mod says go 1.26.
  "staticcheck|honnef.co/go/tools/cmd/staticcheck|v0.8.2|-version|(0.8.2)"
  # Prometheus 3.x's promtool (module versions v0.3xx.y stand for v3.xx.y); `make lint`.
  "promtool|github.com/prometheus/prometheus/cmd/promtool|v0.316.0||"
  # `make lint` on the rendered chart.
  "kube-score|github.com/zegl/kube-score/cmd/kube-score|v1.20.0||"
  # `make sdk`: the Go SDK (sdk/go) from the OpenAPI document.
  "oapi-codegen|github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen|v2.8.2|-version|v2.8.2"
)

log() { echo "tools: $*" >&2; }

# has_version BINARY FLAG TEXT VERSION: the binary runs and its version output contains
# TEXT; without a FLAG, its build information names the main module at VERSION.
has_version() {
  local out
  if [ -z "$2" ]; then
    [ -x "$1" ] && out=$(go version -m "$1" 2>/dev/null) && grep -qE "^[[:space:]]+mod[[:space:]]+[^[:space:]]+[[:space:]]+$4([[:space:]]|$)" <<<"$out"
    return
  fi
  [ -x "$1" ] && out=$("$1" "$2" 2>/dev/null) && [[ $out == *"$3"* ]]
}

install_tool() {
  local name=$1 pkg=$2 version=$3 flag=$4 reports=$5
  local bin=$BIN/$name cached=$CACHE/$name

  if has_version "$bin" "$flag" "$reports" "$version"; then
    log "$name $version: up to date"
  elif has_version "$cached" "$flag" "$reports" "$version"; then
    log "$name $version: copying from $CACHE"
    cp "$cached" "$bin.tmp.$$" && mv -f "$bin.tmp.$$" "$bin"
  else
    log "$name $version: go install $pkg@$version"
    GOBIN=$BIN go install "$pkg@$version"
    if ! has_version "$bin" "$flag" "$reports" "$version"; then
      log "$name: $bin is not $version"
      return 1
    fi
  fi
  # Keep the cache in step with bin/ (also fills it when bin/ was installed some other way).
  if ! cmp -s "$bin" "$cached"; then
    cp "$bin" "$cached.tmp.$$" && mv -f "$cached.tmp.$$" "$cached"
  fi
}

main() {
  mkdir -p "$BIN" "$CACHE"
  local want spec name pkg version flag reports found
  for want in "${@:-}"; do
    found=
    for spec in "${TOOLS[@]}"; do
      IFS='|' read -r name pkg version flag reports <<<"$spec"
      if [ -z "$want" ] || [ "$want" = "$name" ]; then
        install_tool "$name" "$pkg" "$version" "$flag" "$reports"
        found=1
      fi
    done
    if [ -z "$found" ]; then
      log "unknown tool '$want' (known: ${TOOLS[*]%%|*})"
      return 2
    fi
  done
}

main "$@"
