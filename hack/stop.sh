#!/usr/bin/env bash
# Stops what `make run` started: partnerstream dev, the control plane, and ClickHouse and
# Postgres unless they were already running.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
RUN_PIDS=$LOCAL/run.pids
if [ -f "$RUN_PIDS" ]; then
  # Newest first: partnerstream drains before the control plane it talks to goes away.
  for pid in $(tac "$RUN_PIDS"); do kill -TERM "$pid" 2>/dev/null; done
  for pid in $(tac "$RUN_PIDS"); do
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  rm -f "$RUN_PIDS"
fi
# Only the servers `make run` started itself.
if [ -f "$LOCAL/run.services" ]; then
  for s in $(cat "$LOCAL/run.services"); do bash "$ROOT/hack/$s.sh" stop; done
  rm -f "$LOCAL/run.services"
fi
