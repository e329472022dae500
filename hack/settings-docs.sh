#!/usr/bin/env bash
# Replaces the settings table in README.md (between the settings markers) with the one the
# binary prints, so the documentation cannot drift from the flags.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
table=$(bin/partnerstream settings)
awk -v table="$table" '
  /<!-- settings:begin -->/ { print; print table; skip=1; next }
  /<!-- settings:end -->/ { skip=0 }
  !skip { print }
' README.md >README.md.tmp && mv README.md.tmp README.md
