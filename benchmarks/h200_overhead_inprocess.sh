#!/usr/bin/env bash
# Issue 28 on the H200, one device call, within 8 minutes: the in-process paired overhead design
# (benchmarks/overhead_inprocess.py) on the transformer loop for every mode plus the A/A, the span
# cost (C and pure-Python paths, benchmarks/span_cost.py) and the CUPTI parse cost
# (benchmarks/cupti_parse_cost.py), and the raw-parser parity test on the GPU
# (tests/test_capture_cupti_raw_gpu.py). Run from the repository root after the integrator's
#   source examples/gpu/device_env.sh
# (carried wheels in /tmp/site, PYTHONPATH, the C span built in place). Without CUDA it runs the
# same design on the CPU loop, smaller (the check done on the development machine).
# Writes exactly one file: $OUT/overhead.tar.gz (summary.json with every interval, the raw
# window times, the logs); prints the table at the end.
set -o pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output folder}"
T0=$(date +%s)
W=$(mktemp -d /tmp/overhead.XXXXXX)
PY=${PYTHON:-python3}
log() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

# The C span path: build it in place if it does not load (device_env.sh normally has).
$PY -c "import workflow_lib.capture._spanext" 2>/dev/null || $PY setup.py -q build_ext --inplace >"$W/build_ext.log" 2>&1
$PY - <<'EOF' | tee "$W/env.txt"
import platform
from workflow_lib.capture.sources import host, cupti
try:
    import torch
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA"
    tv = torch.__version__
except ImportError:
    dev, tv = "no torch", None
print(f"python {platform.python_version()} torch {tv} device {dev} span path {host.SPAN_PATH} "
      f"cupti binding {cupti.cupti is not None}")
EOF
if $PY -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    LOOP=transformer PAIRS=${PAIRS:-50} K=${K:-10} BUDGET=${BUDGET_S:-18} SPAN_ROUNDS=61 STARTUP=8
else
    LOOP=cpu PAIRS=${PAIRS:-16} K=${K:-6} BUDGET=${BUDGET_S:-8} SPAN_ROUNDS=15 STARTUP=6
fi
log "loop $LOOP, $PAIRS pairs x $K steps per window, pairs stop after ${BUDGET}s per mode"

log "span cost"
timeout 100 $PY benchmarks/span_cost.py --rounds $SPAN_ROUNDS --n 5000 \
    --only with_floor bare_pair_perf_counter shipped_with shipped_with_python \
    --json "$W/span_cost.json" >"$W/span_cost.log" 2>&1
SPAN_RC=$?
STALLCASE_SPAN_PATH=python timeout 60 $PY benchmarks/span_cost.py --rounds $SPAN_ROUNDS --n 5000 --only shipped_with \
    --json "$W/span_cost_python_env.json" >"$W/span_cost_python_env.log" 2>&1
tail -6 "$W/span_cost.log"

log "in-process overhead, every mode"
timeout 380 $PY benchmarks/overhead_inprocess.py --loop $LOOP --pairs $PAIRS --k $K --budget-s $BUDGET --mode-timeout-s 75 \
    --startup-pairs $STARTUP \
    --json "$W/inprocess.json" --raw "$W/raw_windows.json" --work "$W/incidents" 2>&1 | tee "$W/inprocess.log"
IN_RC=$?

log "raw parser against cupti-python's objects on the GPU (tests/test_capture_cupti_raw_gpu.py)"
if $PY -c "import pytest" 2>/dev/null; then
    timeout 90 $PY -m pytest -q -rs -p no:cacheprovider tests/test_capture_cupti_raw_gpu.py >"$W/raw_parity.log" 2>&1
    echo "raw parity rc=$?: $(tail -1 "$W/raw_parity.log")"
else
    echo "pytest absent: raw parity test not run" | tee "$W/raw_parity.log"
fi

log "CUPTI parse cost"
timeout 45 $PY benchmarks/cupti_parse_cost.py --rounds 5 --json "$W/cupti_parse_cost.json" >"$W/cupti_parse_cost.log" 2>&1
PARSE_RC=$?
cat "$W/cupti_parse_cost.log"

$PY - "$W" "$SPAN_RC" "$IN_RC" "$PARSE_RC" "$(( $(date +%s) - T0 ))" <<'EOF'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
def load(name):
    p = w / name
    return json.loads(p.read_text()) if p.exists() else None
summary = {"env": (w / "env.txt").read_text().strip() if (w / "env.txt").exists() else None,
           "inprocess": load("inprocess.json"), "span_cost": load("span_cost.json"),
           "span_cost_python_env": load("span_cost_python_env.json"), "cupti_parse_cost": load("cupti_parse_cost.json"),
           "rc": {"span_cost": int(sys.argv[2]), "inprocess": int(sys.argv[3]), "cupti_parse_cost": int(sys.argv[4])},
           "elapsed_s": int(sys.argv[5])}
(w / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
EOF
rm -rf "$W/incidents"
tar czf "$OUT/overhead.tar.gz" -C "$W" .
log "wrote $OUT/overhead.tar.gz ($(du -k "$OUT/overhead.tar.gz" | cut -f1) KiB)"
grep -A30 '^| mode' "$W/inprocess.log"
exit $IN_RC
