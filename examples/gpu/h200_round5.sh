#!/usr/bin/env bash
# The H200 runs of rounds 5 and 6 (issue 33's overheads and demo, issue 34's cause captures), as made.
# From the device copy's root (this tree copied to .dev/gpu with the wheels in .dev/gpu/.whl):
#   bash examples/gpu/h200_round5.sh PHASE[,PHASE...] OUT_DIR
# Phases: setup (install the wheels into the image's python, build the C span, put this checkout
# on the interpreter's path), zc (the zero-change capture against the bare program; ZC_ARMS adds
# arms that take its cost apart, ZC_ARMS= none), bench (the default's in-process overhead beside
# the A/A and torch.profiler), causes (issue 34's programs, recorder and Kineto forms:
# examples/gpu/causes/), contended (issue 34's contended-GPU program again, the trainer waiting on
# the GPU each step: examples/gpu/causes/capture_contended.sh), demo (README line 1 on the GPU,
# trials included, --cores as README's line: DEMO_CORES, 2).
set -u
phases=$1; out=${2:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for phase in ${phases//,/ }; do
  echo "=== $phase $(date -u +%H:%M:%S)"
  case $phase in
  setup)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
    # Once per machine (a warm machine keeps the image's site-packages between calls).
    python3 -c 'import snakemake, cupti, blake3, re2, jsonschema' 2>/dev/null && echo "wheels already installed" ||
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | grep -v "^WARNING" | tail -3
    python3 setup.py -q build_ext --inplace >/tmp/build_ext.log 2>&1 && echo "_spanext built" || echo "_spanext NOT built"
    echo "$PWD" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/stallcase_dev.pth"
    python3 -c 'import sys, torch, snakemake, cupti; from workflow_lib.capture import gpu_arming as g
print("python", sys.version.split()[0], "torch", torch.__version__, "gpu_present", g.gpu_present())'
    ;;
  zc)  # ZC_ARMS: the arms (call 1 of round 5 ran no_gpu, no_hooks, no_compile_hooks, recorder_off; ZC_ARMS= none)
    rm -rf /tmp/zc; python3 benchmarks/overhead_zero_change.py --pairs "${ZC_PAIRS:-2}" --json "$out/zero_change.json" \
      --work /tmp/zc ${ZC_ARMS---arm no_gpu:STALLCASE_GPU_EVIDENCE=off --arm cupti_attached:STALLCASE_CUPTI_DETACH=off} \
      -- python3 examples/gpu/unchanged/steady_train.py --steps "${ZC_STEPS:-300}"
    python3 - /tmp/zc <<'PY'
import json, sys
from pathlib import Path
for d in sorted(Path(sys.argv[1]).iterdir()):
    m = d / "manifest.json"
    if m.exists():
        cu = json.loads(m.read_text())["sources"].get("cupti", {})
        det = cu.get("detail", {})
        print(d.name, cu.get("status"), "windows", det.get("windows"), "detached", det.get("detached_between_windows"))
PY
    tar czf "$out/zc_incidents.tgz" -C /tmp zc
    ;;
  bench)
    timeout "${BENCH_TIMEOUT_S:-420}" python3 benchmarks/overhead_inprocess.py --modes "${MODES:-aa,default,torch_profiler}" --pairs 4000 \
      --budget-s "${BUDGET_S:-110}" --mode-budget "torch_profiler=${PROFILER_S:-20}" --mode-timeout-s "${MODE_TIMEOUT_S:-200}" \
      --startup-pairs 0 --json "$out/overhead.json" --raw "$out/overhead_raw.json"
    ;;
  causes)
    bash examples/gpu/causes/capture_all.sh "$out"
    ;;
  contended)
    bash examples/gpu/causes/capture_contended.sh "$out"
    ;;
  demo)
    rm -rf incidents results .snakemake
    timeout ${DEMO_S:-540} python3 -m snakemake --cores ${DEMO_CORES:-2} --profile profiles/local --config incident=demo > "$out/demo_snakemake.log" 2>&1
    echo "snakemake rc=$?"; tail -4 "$out/demo_snakemake.log"
    python3 - <<'PY'
import json
from pathlib import Path
m = json.loads(Path("incidents/demo/manifest.json").read_text())
cu = m["sources"]["cupti"]
print("demo cupti:", cu["status"], cu.get("reason"), "steps:", json.dumps(cu.get("detail", {}).get("steps"))[:300])
p = Path("results/demo/comparison.json")
if p.exists():
    c = json.loads(p.read_text()); print("comparison:", c.get("verdict"), "|", str(c.get("sentence"))[:400])
PY
    python3 examples/gpu/report_rows.py results/demo/report.html
    tar czf "$out/demo.tgz" --exclude='*/work' --exclude='*/captures' incidents/demo results 2>/dev/null; ls -la "$out"
    ;;
  esac
done
echo "=== end $(date -u +%H:%M:%S)"
