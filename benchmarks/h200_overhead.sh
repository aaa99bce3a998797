#!/usr/bin/env bash
# One device-tool call for issue 19 (docs/benchmarks.md, "recorder_overhead"): run from the
# repository root of the device copy, with this tree copied to .dev/overhead and .whl carried:
#   bash .dev/overhead/benchmarks/h200_overhead.sh
# Writes $OUT/log, $OUT/recorder_overhead.json, $OUT/recorder_overhead_rows.md,
# $OUT/span_cost.json and $OUT/trials.tgz (comparisons, executions, plans, captured manifests, logs).
set -o pipefail
ROOT=$PWD
cd .dev/overhead || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# The C span path was built on the development machine (stable ABI, x86-64); build it here if it does not load.
python3 -c "import workflow_lib.capture._spanext" 2>/dev/null || python3 setup.py -q build_ext --inplace 2>&1 | tail -3
python3 -c "from workflow_lib.capture.sources import host, cupti; print('span path', host.SPAN_PATH, '| cupti binding', cupti.cupti is not None)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
date -u
python3 benchmarks/span_cost.py --rounds 101 --n 5000 --only with_floor bare_pair_perf_counter shipped_with shipped_with_python --json "$OUT/span_cost.json"
python3 benchmarks/recorder_overhead.py --parts span,matrix,trials --span-rounds 15 --matrix-rounds 6 --matrix-steps 80 \
    --blocks 6 --steps "${STEPS:-150}" --skip-steps 20 --budget-s "${TRIALS_BUDGET_S:-290}" --work /tmp/ovt
rc=$?
date -u
cd /tmp/ovt && find . \( -name comparison.json -o -name plan.json -o -path '*/execution/*.json' -o -name pipeline.log \
    -o -name '*.yaml' -o -path '*/incidents/*/manifest.json' -o -path '*/logs/*' \) -size -4M -print0 \
    | tar czf "$OUT/trials.tgz" --null -T - 2>/dev/null
exit $rc
