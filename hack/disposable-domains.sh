#!/usr/bin/env bash
# Refreshes internal/fraud/disposable_domains.json, the list of disposable e-mail domains the
# fraud rule disposable_email embeds, from the npm package pinned in hack/disposable (bump its
# version in package.json and package-lock.json, then run `make disposable-domains`). The list
# is committed so that `go build` needs no npm.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bash "$ROOT/hack/npm-tools.sh" disposable
cp "$ROOT/bin/disposable/node_modules/disposable-email-domains-js/dist/dict/disposable_email_blocklist.json" \
  "$ROOT/internal/fraud/disposable_domains.json"
