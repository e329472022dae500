#!/usr/bin/env bash
# `make journey`: the journey test and the fault runs (test/journey): the real binaries as
# separate processes against the local stack, driven through the public API. FAULTS=1 adds
# the long fault runs (ClickHouse away for 30 s, receivers failing until the first retry);
# `make test` runs the journey and the fast fault runs only. Process logs are kept under
# .local/journey/<test>/ (JOURNEY_LOG_DIR). Extra arguments go to `go test`, e.g.
# `bash hack/journey.sh -run TestJourney`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export FAULTS=${FAULTS:-1}
# The logs of the previous run are replaced; a directory given by the caller is left alone.
if [ -z "${JOURNEY_LOG_DIR:-}" ]; then
  export JOURNEY_LOG_DIR=$LOCAL/journey
  rm -rf "$JOURNEY_LOG_DIR"
fi
GO_TEST_FLAGS="-count=1 -v -timeout 15m" exec bash "$(dirname "$0")/test.sh" ./test/journey/ -run '^(TestJourney.*|TestFault.*)$' "$@"
