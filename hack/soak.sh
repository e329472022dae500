#!/usr/bin/env bash
# `make soak`: the platform at a steady click and conversion rate for SOAK_DURATION (default
# 10m); fails when a component's memory or goroutines grow or ingest falls behind (see
# TestSoak in test/journey and docs/reliability.md). The samples are written to
# .local/soak/TestSoak/soak.csv beside the process logs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export SOAK_DURATION=${SOAK_DURATION:-10m}
# The logs of the previous run are replaced; a directory given by the caller is left alone.
if [ -z "${JOURNEY_LOG_DIR:-}" ]; then
  export JOURNEY_LOG_DIR=$LOCAL/soak
  rm -rf "$JOURNEY_LOG_DIR"
fi
# The go test timeout: the soak plus 15 minutes for building, setting up and verifying.
secs=0
rest=$SOAK_DURATION
while [[ $rest =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
  case ${BASH_REMATCH[2]} in h) secs=$((secs + BASH_REMATCH[1] * 3600)) ;; m) secs=$((secs + BASH_REMATCH[1] * 60)) ;; s) secs=$((secs + BASH_REMATCH[1])) ;; esac
  rest=${BASH_REMATCH[3]}
done
if [ -n "$rest" ] || [ $secs -eq 0 ]; then
  echo "soak: SOAK_DURATION=$SOAK_DURATION: use whole hours, minutes and seconds, e.g. 10m or 1h30m" >&2
  exit 2
fi
GO_TEST_FLAGS="-count=1 -v -timeout $((secs + 900))s" exec bash "$(dirname "$0")/test.sh" ./test/journey/ -run '^TestSoak$' "$@"
