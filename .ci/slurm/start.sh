#!/usr/bin/env bash
# Install (Debian packages), configure and start a single-node SLURM for CI:
# munged, slurmctld, slurmd. Safe to run twice: a daemon already running is left alone.
# Writes the daemons it started to $STATE (name pid per line); stop.sh stops only those.
# On success prints `STALLCASE_SLURM=up` as its last line.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${STALLCASE_SLURM_STATE:-/run/stallcase-slurm/started}
install -d -m 0755 "$(dirname "$STATE")"
touch "$STATE"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || ! command -v sinfo >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    munge slurmctld slurmd slurm-client >/dev/null
fi

bash "$HERE/setup.sh"

# alive NAME PIDFILE: the pid in PIDFILE is a running process named NAME.
alive() {
  local pid
  [ -s "$2" ] || return 1
  pid=$(cat "$2")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$1" ]
}

# wait_for SECONDS COMMAND...: retry every 0.2 s until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# start NAME PIDFILE COMMAND...: start a daemon unless it runs; record it if we started it.
start() {
  local name=$1 pidfile=$2; shift 2
  if alive "$name" "$pidfile"; then
    echo "start.sh: $name already running (pid $(cat "$pidfile")), left alone"
    return 0
  fi
  rm -f "$pidfile"
  "$@"
  if ! wait_for 20 test -s "$pidfile"; then
    echo "start.sh: $name did not write $pidfile" >&2
    return 1
  fi
  echo "$name $(cat "$pidfile")" >> "$STATE"
}

fail() {
  echo "start.sh: $1" >&2
  tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log 2>/dev/null >&2 || true
  exit 1
}

start munged /run/munge/munged.pid runuser -u munge -- /usr/sbin/munged
wait_for 10 munge -n || fail "munged does not answer"
start slurmctld /run/slurm/slurmctld.pid slurmctld
ctld_up() { scontrol ping | grep -q UP; }
wait_for 30 ctld_up || fail "slurmctld does not answer scontrol ping"
start slurmd /run/slurm/slurmd.pid slurmd
node_idle() { sinfo -h -o %T | grep -qE '^(idle|mixed|allocated)'; }
wait_for 60 node_idle || fail "the node did not come up (sinfo: $(sinfo -h -o '%T %E' 2>&1))"
sinfo
echo "STALLCASE_SLURM=up"
