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
# The test binary is compiled while the cluster comes up (which mostly waits on its processes),
# into a log of its own: go copies vet's output to its stdout with copy_file_range, which fails
# on a file another process of the run (npm) has put in append mode.
mkdir -p bin
go test -c -tags e2e -o bin/e2e.test ./test/journey/ >"$LOCAL/e2e-compile.log" 2>&1 &
compile=$!
bash hack/cluster.sh up
rc=0
if wait $compile; then
  step "cluster up in $((SECONDS - began))s; running the end-to-end test"
  # From the package's directory, as go test runs it.
  (cd test/journey && ../../bin/e2e.test -test.count=1 -test.timeout=30m -test.run='^TestCluster$' -test.v) || rc=$?
else
  cat "$LOCAL/e2e-compile.log" >&2
  rc=1
fi
step "tearing the cluster down"
bash hack/cluster.sh down || rc=1
step "make e2e: $((SECONDS - began))s in all"
exit $rc
