#!/usr/bin/env bash
# A producer/consumer job of one's own on ONE GPU, end to end (issue 24): producer processes
# run a forward pass on the GPU and pack its hidden states onto a torch.multiprocessing queue;
# consumer processes train on them once `--min-ready` are waiting. Every process does CUDA work
# on the same GPU (queues, not NCCL: NCCL refuses two ranks on one GPU) and records itself with
# the README's loop (RANK set in each child, a role). Then the README's pipeline:
#   snakemake --profile profiles/local --configfile my.yaml --config incident=pc
# with three producers as the candidate and `trials: {metric: {role: consumer}}`, and an A/A
# when time is left. Without CUDA it runs the same on the CPU, smaller (for a check anywhere).
# Usage (repo root): OUT=/some/dir bash examples/gpu/h200_multiprocess.sh
# Writes exactly one file: $OUT/multi.tar.gz (records, summary.json, logs, a small fixture of
# the recorded incident with provenance.json). Budget: DEADLINE_S (default 330 s) for all of it.
set -euo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
START=$SECONDS
REPO=$PWD
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
PY=${PY:-$(command -v python3)}
WORK=$(mktemp -d /tmp/multi-XXXX)
KEEP=$WORK/keep; mkdir -p "$KEEP"
pack() {  # always leave $OUT/multi.tar.gz, whatever stopped the script
  tar czf "$OUT/multi.tar.gz" -C "$WORK" keep 2>/dev/null || true
  echo "wrote $OUT/multi.tar.gz ($(du -k "$OUT/multi.tar.gz" | cut -f1) KiB) after $((SECONDS - START)) s"
}
trap pack EXIT
HAS_CUDA=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))")
if [ "$HAS_CUDA" = 1 ]; then WIDTH=2048 PACK_MS=6 STEPS=30; else WIDTH=256 PACK_MS=8 STEPS=20; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$KEEP/gpu.txt" 2>/dev/null || echo "no GPU" > "$KEEP/gpu.txt"
PROJ=$WORK/pc-proj
mkdir -p "$PROJ"
cat > "$PROJ/hidden.py" <<PYEOF
"""What a producer makes: the hidden states of a forward pass, packed for the queue."""
import time

import torch

WIDTH = $WIDTH


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def make_encoder():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH)).to(device())


@torch.no_grad()
def forward(encoder, index):
    g = torch.Generator(device="cpu").manual_seed(index)
    x = torch.randn(64, WIDTH, generator=g).to(device())
    return encoder(x)


def pack(h):
    time.sleep($PACK_MS / 1e3)  # quantizing and serializing on the host
    return h.half().cpu()
PYEOF
cat > "$PROJ/workers.py" <<'PYEOF'
"""The two kinds of process; each records itself under one incident id."""
import os
import queue as queue_mod
import time

import torch

from workflow_lib.capture import FlightRecorder

import hidden


def producer(rank, world, q, stop, start):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    q.cancel_join_thread()  # items left on the queue at the end are not waited for
    enc = hidden.make_encoder()
    rec = FlightRecorder(incident_id="pc", role="producer")
    start.wait()  # every process set up: the job starts together
    with rec:
        i = 0
        while not stop.is_set():
            with rec.step(i):
                with rec.span("forward"):
                    h = hidden.forward(enc, rank * 100000 + i)
                with rec.span("pack"):
                    item = hidden.pack(h)
                q.put(item)
            i += 1
        rec.snapshot("workload_boundary")


def consumer(rank, world, q, steps, min_ready, done, start):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    dev = hidden.device()
    head = torch.nn.Linear(hidden.WIDTH, 1).to(dev)
    opt = torch.optim.SGD(head.parameters(), lr=1e-3)
    rec = FlightRecorder(incident_id="pc", role="consumer")
    ready, times = [], []
    start.wait()
    with rec:
        for i in range(steps):
            t0 = time.perf_counter()
            with rec.step(i):
                with rec.span("queue_get"):
                    while len(ready) < min_ready:
                        ready.append(q.get())
                    while True:
                        try:
                            ready.append(q.get_nowait())
                        except queue_mod.Empty:
                            break
                with rec.span("train"):
                    h = ready.pop(0).to(dev).float()
                    loss = head(h).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    loss.item()
            times.append(time.perf_counter() - t0)
        later = sorted(times[len(times) // 4:])
        print(f"consumer {rank}: median step {later[len(later) // 2] * 1e3:.3f} ms on {dev}", flush=True)
        done.set()
        rec.snapshot("workload_boundary")
PYEOF
cat > "$PROJ/pipeline.py" <<'PYEOF'
"""Start the producers and consumers (spawn: CUDA in every child) and wait for the consumers."""
import argparse

import torch.multiprocessing as mp

import workers


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--producers", type=int, default=1)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--min-ready", type=int, default=1)
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    q, stop = ctx.Queue(), ctx.Event()
    world = args.consumers + args.producers
    dones = [ctx.Event() for _ in range(args.consumers)]
    start = ctx.Barrier(world)
    procs = [ctx.Process(target=workers.consumer, args=(r, world, q, args.steps, args.min_ready, dones[r], start))
             for r in range(args.consumers)]
    procs += [ctx.Process(target=workers.producer, args=(args.consumers + k, world, q, stop, start))
              for k in range(args.producers)]
    for proc in procs:
        proc.start()
    for d in dones:
        d.wait()
    stop.set()
    for proc in procs:
        proc.join()
    raise SystemExit(max(proc.exitcode for proc in procs))


if __name__ == "__main__":
    main()
PYEOF
printf 'incidents/\n' > "$PROJ/.gitignore"
( cd "$PROJ" && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm "producer/consumer job" )
# Expected size: the program's own clock, one producer vs three (recorder off).
for p in 1 3; do (cd "$PROJ" && STALLCASE_RECORDER=off "$PY" pipeline.py --producers $p --steps $STEPS) | tee -a "$KEEP/expected.txt"; done
# 1. Record it (the README's loop in every process).
(cd "$PROJ" && "$PY" pipeline.py --producers 1 --steps $STEPS) > "$KEEP/record.txt" 2>&1
echo "recorded at $((SECONDS - START)) s"
# 2. Diagnose it (the pipeline does too; this prints it here).
"$PY" -m workflow_lib.cli diagnose "$PROJ/incidents/pc" -o "$WORK/diagnosis.json" > "$KEEP/diagnose.txt" 2>&1 || true
head -5 "$KEEP/diagnose.txt"
cat > "$WORK/my.yaml" <<YEOF
incidents_dir: $PROJ/incidents
allow_roots: [$PROJ]
results_dir: $WORK/results
candidate:
  set_args: {"--producers": "3"}
trials:
  blocks: 6
  runs_per_arm: 1
  control_runs: 1
  warmup_runs: 0
  seed: 20261201
  max_retries: 1
  max_failed_fraction: 0.34
  confidence: 0.95
  run_timeout_s: 90
  record_runs: false   # within the 6 minutes: the runs are timed, the recorded incident is diagnosed
  metric: {name: consumer_step, source: auto, per: step, statistic: median, skip_steps: 5, unit: ns, role: consumer}
YEOF
# METRIC=default: no metric line, so the plan picks the job's metric from its shape (issue 35:
# a queue-shaped job is compared by its consumers' throughput); the 2026-12-01 run named one.
if [ "${METRIC:-named}" = default ]; then sed -i '/^  metric:/d' "$WORK/my.yaml"; fi
cp "$WORK/my.yaml" "$KEEP/"
budgeted() {  # Snakemake, stopped (SIGINT) before DEADLINE_S so that finished blocks are kept
  local log=$1; shift
  local left=$(( ${DEADLINE_S:-330} - 25 - (SECONDS - START) ))
  [ "$left" -gt 15 ] || { echo "no time left for $log"; return 1; }
  timeout -s INT -k 15 "$left" "$PY" -m snakemake --cores 4 --profile profiles/local --configfile "$@" > "$log" 2>&1
}
keep() {  # records only (per-run captures stay behind: files back are capped)
  mkdir -p "$KEEP/$1"
  for f in plan.json comparison.json snapshot.json diagnosis.json execution; do
    cp -rL "$WORK/results/pc/$f" "$KEEP/$1/" 2>/dev/null || true
  done
  local run; run=$(ls -td "$WORK"/results/pc/runs/"$2"-* 2>/dev/null | head -1)
  if [ -n "$run" ] && [ ! -f "$KEEP/$1/comparison.json" ]; then cp -r "$run/plan.json" "$run/execution" "$KEEP/$1/" 2>/dev/null || true; fi
}
budgeted "$KEEP/snakemake-ab.log" "$WORK/my.yaml" --config incident=pc || echo "A/B snakemake exit $?"
tail -3 "$KEEP/snakemake-ab.log" || true
keep ab ab
echo "A/B done at $((SECONDS - START)) s"
if [ $((SECONDS - START)) -lt ${AA_DEADLINE_S:-200} ]; then
  budgeted "$KEEP/snakemake-aa.log" "$WORK/my.yaml" --config incident=pc candidate=baseline || echo "A/A snakemake exit $?"
  keep aa aa
  echo "A/A done at $((SECONDS - START)) s"
else
  echo "A/A skipped: $((SECONDS - START)) s already spent"
fi
# The fixture: the recorded incident (manifest and tables) and where it was measured.
mkdir -p "$KEEP/fixture"
cp -r "$PROJ/incidents/pc" "$KEEP/fixture/incident"
cp "$PROJ/hidden.py" "$PROJ/workers.py" "$PROJ/pipeline.py" "$KEEP/fixture/"
"$PY" - "$KEEP" "$HAS_CUDA" <<'PYEOF'
import glob, json, re, sys, time
keep, cuda = sys.argv[1], sys.argv[2] == "1"
import torch
gpu = open(f"{keep}/gpu.txt").read().strip()
prov = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu if cuda else "none (CPU run)",
        "driver": gpu.split(",")[-1].strip() if cuda and "," in gpu else None, "torch": torch.__version__,
        "command": "bash examples/gpu/h200_multiprocess.sh (pipeline.py --producers 1 recorded; candidate --producers 3)"}
json.dump(prov, open(f"{keep}/fixture/provenance.json", "w"), indent=1)
exp = [float(v) for v in re.findall(r"median step ([\d.]+) ms", open(f"{keep}/expected.txt").read())]
summary = {"provenance": prov, "program_consumer_median_ms": exp,
           "expected_ratio": (max(exp[2:4]) / max(exp[0:2])) if len(exp) == 4 else None}
try:
    d = json.load(open(glob.glob(f"{keep}/ab/diagnosis.json")[0]))
    summary["diagnosis"] = {"job": d["summary"].get("job"), "next": [(e["check"], e["candidate_change"]) for e in d["next_experiments"][:2]]}
except (IndexError, OSError, KeyError):
    summary["diagnosis"] = None
for name in ("ab", "aa"):
    runs = [r for p in sorted(glob.glob(f"{keep}/{name}/execution/*.json")) for r in json.load(open(p))["runs"]]
    try:
        c = json.load(open(f"{keep}/{name}/comparison.json"))
    except OSError:
        summary[name] = {"partial": True, "runs": len(runs), "failed_runs": sum(r["status"] != "ok" for r in runs)} if runs else None
        continue
    summary[name] = {"verdict": c["verdict"], "metric": c.get("metric"), "ratio": c["estimate"]["ratio"], "low": c["estimate"]["ratio_low"],
                     "high": c["estimate"]["ratio_high"], "floor_pct": c["noise_floor"]["pct"], "runs": len(runs),
                     "failed_runs": sum(r["status"] != "ok" for r in runs), "sentence": c.get("sentence"),
                     "reasons": c["reasons"][:3]}
json.dump(summary, open(f"{keep}/summary.json", "w"), indent=1)
print(json.dumps({k: summary[k] for k in ("expected_ratio", "ab", "aa")}, indent=1))
PYEOF
echo "total $((SECONDS - START)) s"
