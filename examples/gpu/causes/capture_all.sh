#!/usr/bin/env bash
# Issue 34's H200 captures (tests/fixtures/h200_causes/PROVENANCE.md): each program in recorder
# form (`stallcase record -- python3 PROG`, no edit to it) and Kineto form (kineto_run.py: the same
# program under torch.profiler). Injected steps come from each program's own arguments (below),
# the contended steps from the launcher's own log (matmul_hog.py's start and end against the
# trainer's printed step end times). Usage, from the repo root: bash examples/gpu/causes/capture_all.sh OUT
set -u
out=$1; W=/tmp/causes; rm -rf $W; mkdir -p $W/kineto $W/logs
C=examples/gpu/causes
rec() {  # name, program, args...
  local name=$1; shift
  local t=$(date +%s)
  timeout 150 python3 -m workflow_lib.cli record --incident "$name" --incidents-dir $W/incidents -- python3 "$@" \
    > $W/logs/$name.rec.log 2>&1; echo "$name recorder rc=$? $(( $(date +%s) - t )) s"; tail -2 $W/logs/$name.rec.log
}
kin() {  # name, wait, active, program, args...
  local name=$1 wait=$2 active=$3; shift 3
  local t=$(date +%s)
  timeout 150 python3 $C/kineto_run.py --trace $W/kineto/$name.json.gz --wait $wait --active $active -- "$@" \
    > $W/logs/$name.kineto.log 2>&1; echo "$name kineto rc=$? $(( $(date +%s) - t )) s $(du -h $W/kineto/$name.json.gz 2>/dev/null | cut -f1)"
}
contend() {  # form (rec|kin): the trainer, and another process's matmuls from step 40 on for 0.1 s
  local form=$1 go=$W/go.$1; rm -f $go
  python3 $C/matmul_hog.py --go $go --seconds 0.1 > $W/logs/hog.$form.log 2>&1 &
  local hog=$!
  sleep 8  # the hog's CUDA start-up, before the trainer's
  if [ $form = rec ]; then rec contended $C/contended.py --steps 120 & else kin contended 33 30 $C/contended.py --steps 120 & fi
  local trainer=$!
  local log=$W/logs/contended.$form.log; [ $form = rec ] && log=$W/logs/contended.rec.log || log=$W/logs/contended.kineto.log
  for _ in $(seq 6000); do grep -q "^step 39 " $log 2>/dev/null && break; sleep 0.01; done
  touch $go; wait $hog; wait $trainer
  cat $W/logs/hog.$form.log
}
rec sync_layers $C/sync_layers.py --steps 90 --log-layers-at 40-45
kin sync_layers 33 16 $C/sync_layers.py --steps 60 --log-layers-at 40-45
rec pageable_copy $C/pageable_copy.py --steps 90 --copy-at 40-45 --copy-mb 400
kin pageable_copy 33 16 $C/pageable_copy.py --steps 60 --copy-at 40-45 --copy-mb 400
rec python_loop $C/python_loop.py --steps 90 --loop-at 40-42
kin python_loop 33 14 $C/python_loop.py --steps 60 --loop-at 40-42
contend rec
contend kin
kin gc_heavy 41 18 examples/gpu/unchanged/gc_heavy.py --steps 70 --gc-every 50
kin checkpoint_every_n 31 16 examples/gpu/unchanged/checkpoint_every_n.py --steps 60 --save-every 40
du -sh $W/incidents/* $W/kineto/*
(cd $W && tar czf "$out/causes.tgz" incidents kineto logs)
