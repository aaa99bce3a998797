#!/usr/bin/env bash
# Stop the daemons start.sh started (and only those), newest first, by their recorded pid.
# A pid whose process has another name now (reused) is left alone. Safe to run twice.
set -uo pipefail
STATE=${STALLCASE_SLURM_STATE:-/run/stallcase-slurm/started}
[ -s "$STATE" ] || { echo "stop.sh: nothing recorded in $STATE; nothing to stop"; exit 0; }

tac "$STATE" | while read -r name pid; do
  if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do [ -e "/proc/$pid" ] || break; sleep 0.2; done
    if [ -e "/proc/$pid" ]; then echo "stop.sh: $name (pid $pid) still running after 10 s" >&2; else echo "stop.sh: stopped $name (pid $pid)"; fi
  else
    echo "stop.sh: $name (pid $pid) no longer running"
  fi
done
rm -f "$STATE"
