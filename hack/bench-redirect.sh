#!/usr/bin/env bash
# `make bench-redirect`: throughput and latency of the click redirect, async and ack modes,
# beside a bare Fiber handler answering the same 302, under wrk on loopback (see
# hack/bench-redirect/main.go and docs/tracking.md). Extra arguments go to the Go program,
# e.g. `bash hack/bench-redirect.sh -duration 20s -connections 64,256,512`.
#
# It provisions only what the redirect needs (wrk, Postgres; see bench_postgres in lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bench_postgres

# No race detector: it would measure itself.
go build -o "$ROOT/bin/bench-redirect" ./hack/bench-redirect
"$ROOT/bin/bench-redirect" "$@"
