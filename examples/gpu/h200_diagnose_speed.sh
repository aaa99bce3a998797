#!/usr/bin/env bash
# Issue 37's "no slower" on the H200 machine's host (16 quiet cores): the 1M-step diagnosis against
# 3ae5cf8 (the two-engine code), and the 1M-event Kineto trace, this tree then 3ae5cf8's own script.
# Needs BASE, a folder holding `git archive 3ae5cf8 workflow_lib schemas benchmarks
# tests/fixtures/kineto/generate.py` (that script's trace generator lived in tests then), inside
# the tree sent to the device (e.g. .dev/gpu/bases/full_3ae5cf8), and the wheels of h200_round5.sh.
#   cd .dev/gpu && OUT=$OUT BASE=bases/full_3ae5cf8 bash examples/gpu/h200_diagnose_speed.sh
set -u
out=${OUT:?} base=${BASE:?}
bash examples/gpu/h200_round5.sh setup "$out" 2>&1 | tail -3
python3 -c 'from workflow_lib.diagnose import fast; print("diagnosis C paths:", fast._fastext)'
uptime
python3 benchmarks/diagnose_engine_ratio.py --base "$base" --steps 1000000 --pairs "${PAIRS:-3}" --kinds host kernels 2>&1 | tee "$out/ratio_1m_steps.txt"
python3 benchmarks/diagnose_speed.py --events 1000000 --steps 0 --repeats 3 --hta-repeats 0 --workdir /tmp/ds_new 2>&1 | grep -v "^ " | tee "$out/events_new.txt"
(cd "$base" && PYTHONPATH=$PWD python3 benchmarks/diagnose_speed.py --events 1000000 --steps 0 --repeats 3 --hta-repeats 0 --workdir /tmp/ds_old 2>&1 | grep -v "^ " | tee "$out/events_old.txt")
uptime
