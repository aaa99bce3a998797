#!/usr/bin/env bash
# Issue 34's contended-GPU capture, made again (tests/fixtures/h200_causes/PROVENANCE.md): the
# trainer logs its loss every step (`contended.py --log-loss`: `.item()`, so the host waits for
# each step's GPU work, as most training loops do) and another process (matmul_hog.py) runs bf16
# matmuls on the same GPU from the trainer's step FROM to step UNTIL, started and stopped by this
# launcher from the trainer's own printed steps. The first capture (capture_all.sh's `contend`)
# gave the hog a fixed 0.1 s and the trainer never waited for the GPU: the launch queue absorbed it.
# Recorder form (`stallcase record -- python3 PROG`) and Kineto form (kineto_run.py, ProfilerStep#34
# on). The hog prints its wall-clock start and end (the truth); the trainer its step end times.
# Usage, from the repo root: bash examples/gpu/causes/capture_contended.sh OUT
set -u
out=$1; W=/tmp/contended; rm -rf $W; mkdir -p $W/kineto $W/logs $W/launcher
C=examples/gpu/causes
FROM=${FROM:-40}; UNTIL=${UNTIL:-56}; STEPS=${STEPS:-160}; KWAIT=${KWAIT:-33}; KACTIVE=${KACTIVE:-40}
DIM=${DIM:-2048}; HOG_N=${HOG_N:-8192}  # smaller only to try the script on a CPU

wait_step() {  # log, step: until the trainer printed that step (at most 150 s)
  for _ in $(seq 15000); do grep -q "^step $2 " "$1" 2>/dev/null && return 0; sleep 0.01; done; return 1
}

one() {  # form: rec | kineto
  local form=$1 go=$W/go.$1 stop=$W/stop.$1 log=$W/logs/contended_sync.$1.log t=$(date +%s)
  python3 $C/matmul_hog.py --go $go --stop $stop --seconds 30 --n $HOG_N > $W/launcher/hog_$form.log 2>&1 &
  local hog=$!
  sleep 8  # the hog's CUDA start-up and warm matmul, before the trainer's
  if [ $form = rec ]; then
    timeout 150 python3 -m workflow_lib.cli record --incident contended_sync --incidents-dir $W/incidents -- \
      python3 $C/contended.py --steps $STEPS --dim $DIM --log-loss > $log 2>&1 &
  else
    timeout 150 python3 $C/kineto_run.py --trace $W/kineto/contended_sync.json.gz --wait $KWAIT --active $KACTIVE -- \
      $C/contended.py --steps $STEPS --dim $DIM --log-loss > $log 2>&1 &
  fi
  local trainer=$!
  wait_step $log $((FROM - 1)) && touch $go
  wait_step $log $((UNTIL - 1)); touch $go $stop
  wait $hog; wait $trainer; echo "contended_sync $form: trainer rc=$? $(( $(date +%s) - t )) s"
  cat $W/launcher/hog_$form.log
  # The trainer's own step times (differences of its printed end times), inside the hog's interval or not.
  python3 - $log $W/launcher/hog_$form.log <<'PY'
import re, sys
import numpy as np
ends = {int(m[0]): float(m[1]) for m in re.findall(r"^step (\d+) .*end ([0-9.]+)$", open(sys.argv[1]).read(), re.M)}
h0, h1 = (float(x) for x in re.search(r"start ([0-9.]+) end ([0-9.]+)", open(sys.argv[2]).read()).groups())
dt = {s: ends[s] - ends[s - 1] for s in ends if s - 1 in ends and s >= 10}
hit = sorted(s for s in dt if ends[s] > h0 and ends[s] - dt[s] < h1)
norm = [dt[s] for s in dt if s not in hit]
print(f"  steps under the hog: {hit[:1]}..{hit[-1:]} ({len(hit)}); step ms: normal median {np.median(norm)*1e3:.2f}, "
      f"under the hog median {np.median([dt[s] for s in hit])*1e3:.2f} (max {max(dt[s] for s in hit)*1e3:.2f})" if hit else "  no step under the hog")
PY
}
one rec
one kineto
du -sh $W/incidents/* $W/kineto/* 2>/dev/null
(cd $W && tar czf "$out/contended.tgz" incidents kineto logs launcher)
