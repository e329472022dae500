#!/usr/bin/env bash
# The SDKs generated from the OpenAPI document the api serves (docs/sdk.md):
#
#   hack/sdk.sh generate [ROOT]   `make sdk`: sdk/go/partnerstream.gen.go (oapi-codegen, pinned in
#                                 hack/tools.sh) and sdk/typescript/src/schema.gen.ts
#                                 (openapi-typescript, pinned in sdk/typescript/package-lock.json)
#                                 under ROOT (default: this checkout; the freshness test of
#                                 sdk/go generates into a temporary ROOT and compares)
#   hack/sdk.sh build             compiles the TypeScript SDK and its examples with tsc into
#                                 bin/sdk-typescript/dist (the journey of test/journey runs
#                                 dist/examples/journey.js under Node); prints that directory
#
# The generators are installed on first use and cached (hack/tools.sh, hack/npm-tools.sh).
# Progress goes to stderr; only build prints on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

TS=$ROOT/bin/sdk-typescript
log() { echo "sdk: $*" >&2; }

generate() {
  local out=${1:-$ROOT}
  bash hack/tools.sh oapi-codegen
  bash hack/npm-tools.sh sdk
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$out/sdk/go" "$out/sdk/typescript/src"
  go run ./hack/openapi >"$tmp/openapi.json"
  log "Go: oapi-codegen -> $out/sdk/go/partnerstream.gen.go"
  bin/oapi-codegen -config sdk/go/oapi-codegen.yaml -o "$out/sdk/go/partnerstream.gen.go" "$tmp/openapi.json"
  log "TypeScript: openapi-typescript -> $out/sdk/typescript/src/schema.gen.ts"
  # A property with a default may be left out of a request: without the flag it is required.
  "$TS/node_modules/.bin/openapi-typescript" "$tmp/openapi.json" --default-non-nullable false --output "$out/sdk/typescript/src/schema.gen.ts" >"$tmp/log" 2>&1 || {
    cat "$tmp/log" >&2
    exit 1
  }
}

build() {
  bash hack/npm-tools.sh sdk
  # The sources are compiled beside the installed node_modules, where tsc and Node resolve
  # openapi-fetch; the checkout keeps no node_modules of its own.
  rm -rf "$TS/src" "$TS/examples" "$TS/dist"
  cp -r sdk/typescript/src sdk/typescript/examples sdk/typescript/tsconfig.json "$TS/"
  log "TypeScript: tsc in $TS"
  (cd "$TS" && node_modules/.bin/tsc -p tsconfig.json)
  echo "$TS/dist"
}

case "${1:-generate}" in
  generate) generate "${2:-}" ;;
  build) build ;;
  *) echo "usage: $0 [generate [ROOT]|build]" >&2; exit 2 ;;
esac
