#!/usr/bin/env bash
# The H200 runs of round 5 (issue 33's overheads and demo, issue 34's cause captures), as made.
# From the device copy's root (this tree copied to .dev/gpu with the wheels in .dev/gpu/.whl):
#   bash examples/gpu/h200_round5.sh PHASE[,PHASE...] OUT_DIR
# Phases: setup (install the wheels into the image's python, build the C span, put this checkout
# on the interpreter's path), zc (the zero-change capture against the bare program, with arms that
# take its cost apart), bench (the default's in-process overhead beside the A/A and
# torch.profiler), causes (issue 34's programs, recorder and Kineto forms: examples/gpu/causes/),
# demo (README line 1 on the GPU, trials included).
set -u
phases=$1; out=${2:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for phase in ${phases//,/ }; do
  echo "=== $phase $(date -u +%H:%M:%S)"
  case $phase in
  setup)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | grep -v "^WARNING" | tail -3
    python3 setup.py -q build_ext --inplace >/tmp/build_ext.log 2>&1 && echo "_spanext built" || echo "_spanext NOT built"
    echo "$PWD" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/stallcase_dev.pth"
    python3 -c 'import sys, torch, snakemake, cupti; from workflow_lib.capture import gpu_arming as g
print("python", sys.version.split()[0], "torch", torch.__version__, "gpu_present", g.gpu_present())'
    ;;
  zc)  # ZC_ARMS: the arms (call 1 of round 5 ran no_gpu, no_hooks, no_compile_hooks, recorder_off)
    rm -rf /tmp/zc; python3 benchmarks/overhead_zero_change.py --pairs "${ZC_PAIRS:-2}" --json "$out/zero_change.json" \
      --work /tmp/zc ${ZC_ARMS:---arm no_gpu:STALLCASE_GPU_EVIDENCE=off --arm cupti_attached:STALLCASE_CUPTI_DETACH=off} \
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
    timeout 420 python3 benchmarks/overhead_inprocess.py --modes "${MODES:-aa,default,torch_profiler}" --pairs 4000 \
      --budget-s "${BUDGET_S:-110}" --mode-budget "torch_profiler=${PROFILER_S:-20}" --mode-timeout-s 200 \
      --startup-pairs 0 --json "$out/overhead.json" --raw "$out/overhead_raw.json"
    ;;
  causes)
    bash examples/gpu/causes/capture_all.sh "$out"
    ;;
  demo)
    rm -rf incidents results .snakemake
    timeout ${DEMO_S:-540} python3 -m snakemake --cores 8 --profile profiles/local --config incident=demo > "$out/demo_snakemake.log" 2>&1
    echo "snakemake rc=$?"; tail -4 "$out/demo_snakemake.log"
    python3 - <<'PY'
import json
from pathlib import Path
m = json.loads(Path("incidents/demo/manifest.json").read_text())
cu = m["sources"]["cupti"]
print("demo cupti:", cu["status"], cu.get("reason"), "steps:", json.dumps(cu.get("detail", {}).get("steps"))[:300])
for p in sorted(Path("results").rglob("comparison.json"))[:1]:
    c = json.loads(p.read_text()); print("comparison:", p, json.dumps(c.get("verdict", c.get("summary")))[:400])
PY
    grep -o "kernel sum[^<]\{0,200\}" $(find results -name '*.html' | head -1) 2>/dev/null | head -3
    tar czf "$out/demo.tgz" --exclude='*/work' incidents/demo results 2>/dev/null; ls -la "$out"
    ;;
  esac
done
echo "=== end $(date -u +%H:%M:%S)"
