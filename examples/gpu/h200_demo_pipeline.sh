#!/usr/bin/env bash
# Run the demo pipeline with real Snakemake on a GPU machine (the device tool's H200).
# Usage (repo root, wheels carried in .whl/): bash examples/gpu/h200_demo_pipeline.sh MODE
#   MODE=ab : capture the demo on the GPU, diagnose, plan, preflight, 6 blocks of A/B/A', compare
#   MODE=aa : the same plan inputs with candidate=baseline (A/A), into results-aa/
# Everything worth keeping is packed into $OUT.
set -euo pipefail
MODE=${1:-ab}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee $OUT/nvidia-smi-$MODE.csv
python3 -m workflow_lib.core.environment > $OUT/environment-$MODE.json
# Each plan keeps its own results/demo/runs/<run>/ (A/B and A/A never overwrite each other);
# results/demo/comparison.json etc. link the latest run.
if [ "$MODE" = ab ]; then
  rm -rf results incidents
  CAND=()
else
  CAND=(candidate=baseline)
fi
python3 -m snakemake --cores 8 --configfile examples/demo/h200.yaml --config incident=demo "${CAND[@]}" 2>&1 | tail -40 | tee $OUT/snakemake-$MODE.log || true
tar czf $OUT/h200-demo-$MODE.tgz --exclude='*/work' --exclude='*/captures' results/demo/runs results/demo/*.json results/demo/logs incidents/demo 2>/dev/null || true
python3 -m workflow_lib.compare.by_component results/demo/comparison.json | tee $OUT/why-changed-$MODE.txt
