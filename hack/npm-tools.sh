#!/usr/bin/env bash
# Installs a set of npm packages pinned by its package-lock.json, idempotently:
#
#   hack/npm-tools.sh           the tools of `make lint` (hack/lint: Redocly CLI,
#                               openapi-typescript, TypeScript) into bin/npm
#   hack/npm-tools.sh maildev   the local cluster's mail catcher (hack/maildev) into bin/maildev
#   hack/npm-tools.sh axe       axe-core (hack/axe), which the dashboard's browser tests inject
#                               into every page, into bin/axe
#   hack/npm-tools.sh geoip     the IP-to-country database (hack/geoip) that the image ships and
#                               `make run` and the tests use, into $PS_CACHE/geoip (default
#                               ~/.cache/partnerstream, outside the clone: a clean clone reuses
#                               it); prints the database's path on stdout
#   hack/npm-tools.sh asn       the autonomous-system ranges (hack/asn, CSV) into $PS_CACHE/asn,
#                               turned by hack/asndb into asn.mmdb there, the file the image
#                               ships for --asn-db and `make run` and the tests use; prints its path
#   hack/npm-tools.sh sdk       the TypeScript SDK's dependencies and generator (sdk/typescript:
#                               openapi-fetch, openapi-typescript, TypeScript) into
#                               bin/sdk-typescript, where hack/sdk.sh generates and compiles it
#   hack/npm-tools.sh disposable the list of disposable e-mail domains (hack/disposable) into
#                               bin/disposable, which hack/disposable-domains.sh copies into
#                               internal/fraud
#
# Node and npm come from Debian (nodejs, npm) when the machine has none. The install is
# skipped while the directory was installed from the same lock file; npm's own cache (~/.npm)
# makes a clean clone's install quick. Progress goes to stderr; only geoip and asn print on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-lint}" in
  lint) SRC=$ROOT/hack/lint DIR=$ROOT/bin/npm ;;
  maildev) SRC=$ROOT/hack/maildev DIR=$ROOT/bin/maildev ;;
  axe) SRC=$ROOT/hack/axe DIR=$ROOT/bin/axe ;;
  geoip) SRC=$ROOT/hack/geoip DIR=${PS_CACHE:-$HOME/.cache/partnerstream}/geoip ;;
  asn) SRC=$ROOT/hack/asn DIR=${PS_CACHE:-$HOME/.cache/partnerstream}/asn ;;
  disposable) SRC=$ROOT/hack/disposable DIR=$ROOT/bin/disposable ;;
  sdk) SRC=$ROOT/sdk/typescript DIR=$ROOT/bin/sdk-typescript ;;
  *) echo "usage: $0 [lint|maildev|axe|geoip|asn|disposable|sdk]" >&2; exit 2 ;;
esac
# The database of hack/geoip/package.json, and its licence, once installed.
GEOIP_DB=$DIR/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb
ASN_CSV=$DIR/node_modules/@ip-location-db/asn
done_install() {
  case "${1:-lint}" in
    geoip) echo "$GEOIP_DB" ;;
    asn)
      # Built once per lock file; hack/asndb writes it under another name and renames it
      # when whole, so a file that is there is complete.
      if [ ! -s "$DIR/asn.mmdb" ]; then
        log "building $DIR/asn.mmdb from $(basename "$ASN_CSV") (hack/asndb)"
        (cd "$ROOT" && go run ./hack/asndb --out "$DIR/asn.mmdb" "$ASN_CSV/asn-ipv4.csv" "$ASN_CSV/asn-ipv6.csv" >&2)
      fi
      echo "$DIR/asn.mmdb" ;;
  esac
}

log() { echo "npm-tools: $*" >&2; }

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    log "node and npm are missing; run as root or install the Debian packages nodejs and npm"
    exit 1
  fi
  log "installing nodejs and npm (Debian)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# One install of a directory at a time: tests running in parallel (the SDK's freshness test
# and its journey) may both ask for the same one on a fresh clone.
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock 9

# .installed is the lock file of the last complete install: an interrupted one is redone.
if [ -d "$DIR/node_modules" ] && cmp -s "$SRC/package-lock.json" "$DIR/.installed"; then
  log "$(basename "$DIR") up to date"
  done_install "${1:-lint}"
  exit 0
fi
log "npm ci in $DIR"
rm -rf "$DIR"
mkdir -p "$DIR"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DIR/"
(cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
cp "$SRC/package-lock.json" "$DIR/.installed"
done_install "${1:-lint}"
