#!/usr/bin/env bash
# `make e2e`: a fresh local cluster (hack/cluster.sh up), the end-to-end test through it
# (test/journey, build tag e2e: helm install --wait, the journey through the api Service,
# pods force-deleted under traffic, a rolling upgrade under traffic, /metrics of every pod,
# the leader Lease, helm uninstall), then the cluster is torn down and the machine checked.
# Every request goes through HAProxy (Debian's package) in front of the api Service, first
# adding X-Forwarded-For, then sending the PROXY protocol (test/journey/frontdoor_test.go).
#
#   E2E_TRUSTED_PROXIES=off   install without api.trustedProxies: the run must fail on the
#                             visitors' addresses (the proof that the setting is what works)
#   E2E_PENDING=unique,limits skip the unique-click or the limit assertions (while the work
#                             they check is not merged); a full run sets neither
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
began=$SECONDS
# A run that was interrupted may have left a cluster: start from nothing.
bash hack/cluster.sh down >&2
bash hack/cluster.sh up
step "cluster up in $((SECONDS - began))s; running the end-to-end test"
rc=0
go test -tags e2e -count=1 -timeout 30m -run '^TestCluster$' -v ./test/journey/ || rc=$?
step "tearing the cluster down"
bash hack/cluster.sh down || rc=1
step "make e2e: $((SECONDS - began))s in all"
exit $rc
