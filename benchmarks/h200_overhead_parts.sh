#!/usr/bin/env bash
# Issue 28 follow-up on the H200, one device call, within 8 minutes: where the default
# recorder's per-step cost goes. benchmarks/overhead_inprocess.py `--modes parts` on the
# transformer loop (aa, default, host_only, host_sched, host_nvml; ~260 pairs each in the
# default 75 s a mode: the A/A half-width at 390 pairs was 0.61%), each mode with the
# training thread's CPU time beside the wall clock (work the recorder does on that thread
# against time the thread waits), then benchmarks/step_path_cost.py (the step path and the periodic sched
# sample, thread CPU). Run from the repository root after `source examples/gpu/device_env.sh`.
# Without CUDA it runs the same on the CPU loop, smaller. Writes exactly one file:
# $OUT/overhead_parts.tar.gz (summary.json, the raw windows, the logs); prints the tables.
set -o pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output folder}"
T0=$(date +%s)
W=$(mktemp -d /tmp/overhead_parts.XXXXXX)
PY=${PYTHON:-python3}
log() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

$PY -c "import workflow_lib.capture._spanext" 2>/dev/null || $PY setup.py -q build_ext --inplace >"$W/build_ext.log" 2>&1
if $PY -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    LOOP=transformer PAIRS=${PAIRS:-500} K=${K:-10} BUDGET=${BUDGET_S:-75} MODE_TIMEOUT=100 BLOCKS=41
else
    LOOP=cpu PAIRS=${PAIRS:-16} K=${K:-6} BUDGET=${BUDGET_S:-8} MODE_TIMEOUT=40 BLOCKS=11
fi
log "loop $LOOP, up to $PAIRS pairs x $K steps per window, pairs stop after ${BUDGET}s per mode"
timeout 500 $PY benchmarks/overhead_inprocess.py --loop $LOOP --modes parts --pairs $PAIRS --k $K \
    --budget-s $BUDGET --mode-timeout-s $MODE_TIMEOUT --startup-pairs 0 \
    --json "$W/parts.json" --raw "$W/parts_raw.json" --work "$W/incidents" 2>&1 | tee "$W/parts.log"
IN_RC=$?
log "step path and periodic sample (thread CPU)"
timeout 40 $PY benchmarks/step_path_cost.py --blocks $BLOCKS --n 1000 --json "$W/step_path_cost.json" 2>&1 \
    | grep -v -i warn | tee "$W/step_path_cost.log"
STEP_RC=$?
$PY - "$W" "$IN_RC" "$STEP_RC" "$(( $(date +%s) - T0 ))" <<'PYEOF'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
def load(name):
    p = w / name
    return json.loads(p.read_text()) if p.exists() else None
summary = {"parts": load("parts.json"), "step_path_cost": load("step_path_cost.json"),
           "rc": {"parts": int(sys.argv[2]), "step_path_cost": int(sys.argv[3])}, "elapsed_s": int(sys.argv[4])}
(w / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
PYEOF
rm -rf "$W/incidents"
tar czf "$OUT/overhead_parts.tar.gz" -C "$W" .
log "wrote $OUT/overhead_parts.tar.gz ($(du -k "$OUT/overhead_parts.tar.gz" | cut -f1) KiB)"
grep -A12 '^| mode' "$W/parts.log"
exit $IN_RC
