#!/usr/bin/env bash
# The H200 runs of issue 33's GPU part, as they were made (docs/benchmarks.md, "GPU evidence by
# default"; tests/fixtures/PROVENANCE.md). Run from the repository root on the GPU machine:
#   bash benchmarks/h200_gpu_evidence.sh env|demo|bench|programs|zerochange  OUT_DIR
# `env` installs the project's dependencies from ./.whl (wheels carried to a machine with no
# registry) into this python and says what the machine has; the others assume it ran.
set -u
what=$1; out=${2:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
case $what in
env)
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0))'
  python3 -m pip show nvidia-cuda-cupti nvidia-ml-py cuda-bindings 2>/dev/null | grep -E '^(Name|Version)'
  for p in snakemake blake3 jsonschema google-re2 cupti-python pyarrow pandas pygments pyyaml; do
    python3 -m pip show "$p" >/dev/null 2>&1 && echo "present: $p" || echo "missing: $p"; done
  # cupti-python must match the CUPTI library torch's wheel brought (nvidia-cuda-cupti ~= X.Y).
  cu=$(python3 -m pip show nvidia-cuda-cupti 2>/dev/null | awk '/^Version/{print $2}')
  case $cu in 13.0.*) cp .whl/alt/cupti_python-13.0*.whl .whl/ && rm -f .whl/cupti_python-13.4*.whl;; programs)
  # Programs written as users write them (no stallcase import), recorded unchanged:
  # stallcase record -- python3 PROG, then diagnosed; the incidents come back as fixtures.
  W=/tmp/unchanged; rm -rf $W; mkdir -p $W/diag
  run() {  # name, program args...
    local name=$1; shift
    local t=$(date +%s)
    timeout 200 python3 -m workflow_lib.cli record --incident "$name" --incidents-dir $W/incidents -- \
      python3 examples/gpu/unchanged/$name.py "$@" > $W/$name.log 2>&1; echo "$name: record rc=$? $(( $(date +%s) - t )) s"
    tail -4 $W/$name.log
    python3 -m workflow_lib.cli diagnose $W/incidents/$name -o $W/diag/$name.json > $W/diag/$name.txt 2>&1; echo "diagnose rc=$?"
    python3 examples/gpu/unchanged/summarize.py $W/incidents/$name $W/diag/$name.json > $W/diag/$name.summary.json 2>&1 \
      || tail -3 $W/diag/$name.summary.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps({k: s[k] for k in ('steps','steps_from','cupti','summary_by_check')})[:900]); [print(' slow', x) for x in s['slowest'][:3]]; [print(' typ', x) for x in s['typical_with_gpu'][:2]]" $W/diag/$name.summary.json 2>&1 | cut -c1-900
  }
  for name in ${PROGRAMS:-item_per_step dataloader_starved gc_heavy checkpoint_every_n compile_recompile}; do
    case $name in
      item_per_step) run $name --steps 300;;
      dataloader_starved) run $name --steps 150;;
      gc_heavy) run $name --steps 240;;
      checkpoint_every_n) run $name --steps 160 --save-every 40;;
      compile_recompile) run $name --steps 90;;
    esac
  done
  du -sh $W/incidents/*
  (cd $W && tar czf "$out/unchanged.tgz" incidents diag *.log)
  ls -la "$out"
  ;;
zerochange)
  python3 benchmarks/overhead_zero_change.py --pairs "${PAIRS:-6}" --json "$out/zero_change.json" -- \
    python3 examples/gpu/unchanged/steady_train.py --steps 400
  ;;
esac
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -3
  python3 -c 'from cupti import cupti; print("cupti-python ok", cupti.get_version() if hasattr(cupti, "get_version") else "")'
  python3 setup.py -q build_ext --inplace >/dev/null 2>&1 && echo "_spanext built" || echo "_spanext not built (pure-Python spans)"
  # The trials rerun the demo from a rebuilt copy of its program: the recorder it imports is the
  # installed stallcase (here: this checkout on the interpreter's path, as `pip install -e .` would).
  echo "$PWD" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/stallcase_dev.pth"
  python3 -c 'from workflow_lib.capture import gpu_arming as g; print("gpu_present:", g.gpu_present())'
  ;;
demo)
  # README line 1's pipeline, unchanged: capture -> ... -> report, on the GPU.
  rm -rf incidents results .snakemake
  time python3 -m snakemake --cores 8 --profile profiles/local --config incident=demo > "$out/demo_snakemake.log" 2>&1
  echo "snakemake rc=$?"; tail -5 "$out/demo_snakemake.log"
  python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
m = json.loads(Path("incidents/demo/manifest.json").read_text())
cu = m["sources"]["cupti"]
print("demo cupti:", cu["status"], cu["reason"], "steps:", json.dumps(cu.get("detail", {}).get("steps")))
print("gpu_evidence:", json.dumps(m["recorder"].get("gpu_evidence")))
PY
  find results -maxdepth 4 -name '*.html' | head; find incidents -maxdepth 1 | head
  tar czf "$out/demo.tgz" incidents results 2>/dev/null; ls -la "$out"
  ;;
bench)
  # The default (GPU evidence on) against off, the A/A, and torch.profiler, one run.
  python3 benchmarks/overhead_inprocess.py --modes "${MODES:-aa,default,torch_profiler}" --pairs 4000 \
    --budget-s "${BUDGET_S:-100}" --mode-budget "torch_profiler=${PROFILER_S:-40}" --mode-timeout-s 260 --startup-pairs 0 \
    --json "$out/overhead.json" --raw "$out/overhead_raw.json"
  ;;
programs)
  # Programs written as users write them (no stallcase import), recorded unchanged:
  # stallcase record -- python3 PROG, then diagnosed; the incidents come back as fixtures.
  W=/tmp/unchanged; rm -rf $W; mkdir -p $W/diag
  run() {  # name, program args...
    local name=$1; shift
    local t=$(date +%s)
    timeout 200 python3 -m workflow_lib.cli record --incident "$name" --incidents-dir $W/incidents -- \
      python3 examples/gpu/unchanged/$name.py "$@" > $W/$name.log 2>&1; echo "$name: record rc=$? $(( $(date +%s) - t )) s"
    tail -4 $W/$name.log
    python3 -m workflow_lib.cli diagnose $W/incidents/$name -o $W/diag/$name.json > $W/diag/$name.txt 2>&1; echo "diagnose rc=$?"
    python3 examples/gpu/unchanged/summarize.py $W/incidents/$name $W/diag/$name.json > $W/diag/$name.summary.json 2>&1 \
      || tail -3 $W/diag/$name.summary.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps({k: s[k] for k in ('steps','steps_from','cupti','summary_by_check')})[:900]); [print(' slow', x) for x in s['slowest'][:3]]; [print(' typ', x) for x in s['typical_with_gpu'][:2]]" $W/diag/$name.summary.json 2>&1 | cut -c1-900
  }
  for name in ${PROGRAMS:-item_per_step dataloader_starved gc_heavy checkpoint_every_n compile_recompile}; do
    case $name in
      item_per_step) run $name --steps 300;;
      dataloader_starved) run $name --steps 150;;
      gc_heavy) run $name --steps 240;;
      checkpoint_every_n) run $name --steps 160 --save-every 40;;
      compile_recompile) run $name --steps 90;;
    esac
  done
  du -sh $W/incidents/*
  (cd $W && tar czf "$out/unchanged.tgz" incidents diag *.log)
  ls -la "$out"
  ;;
zerochange)
  python3 benchmarks/overhead_zero_change.py --pairs "${PAIRS:-6}" --json "$out/zero_change.json" -- \
    python3 examples/gpu/unchanged/steady_train.py --steps 400
  ;;
esac
