#!/usr/bin/env bash
# A user's own two-file PyTorch training script through the README's "Your own workload"
# commands on one GPU (the device tool's H200): model in a sibling module, its own git repo,
# a DataLoader whose samples take ~1 ms of CPU each. Recorded with the README's loop, then
#   snakemake --profile profiles/local --configfile my.yaml --config incident=tx
# with four DataLoader workers as the candidate (A/B), and the same with
# candidate=baseline (A/A). The program's own printed loop time (1 vs 4 workers) gives the
# expected size. Usage (repo root, wheels in .whl/): bash examples/gpu/h200_own_workload.sh
# Everything worth keeping is packed into $OUT (or ./out when OUT is unset).
set -euo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
START=$SECONDS
REPO=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$REPO PATH=/tmp/site/bin:$PATH
else  # already installed (e.g. the device command did it): keep what is on PYTHONPATH
  export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
PY=${PY:-$(command -v python3)}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>/dev/null || echo "no GPU" > "$OUT/gpu.txt"
PROJ=$(mktemp -d /tmp/own-XXXX)/tx-proj
mkdir -p "$PROJ"
cat > "$PROJ/model.py" <<'PYEOF'
"""The model: a small MLP classifier."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=2048, classes=10):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                    nn.Linear(width, classes))

    def forward(self, x):
        return self.layers(x)
PYEOF
cat > "$PROJ/train.py" <<'PYEOF'
"""Train the model on samples that take a while to decode."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

from model import Net
from workflow_lib.capture import FlightRecorder


class Samples(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:  # decoding one sample (CPU-bound)
            pass
        g = torch.Generator().manual_seed(i)
        return torch.randn(1024, generator=g), torch.randint(0, 10, (), generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = Net().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = DataLoader(Samples(args.steps * args.batch_size), batch_size=args.batch_size, num_workers=args.workers,
                        pin_memory=dev == "cuda")
    rec = FlightRecorder(incident_id="tx")
    stamps = []
    with rec:
        for i, batch in enumerate(loader):
            with rec.step(i):
                stamps.append(time.perf_counter())  # the program's own clock, one stamp per iteration
                with rec.span("forward"):
                    x, y = batch[0].to(dev, non_blocking=True), batch[1].to(dev, non_blocking=True)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                with rec.span("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                loss.item()
        its = sorted(b - a for a, b in zip(stamps[5:], stamps[6:]))
        print(f"median iteration {its[len(its) // 2] * 1e3:.3f} ms over {len(its)} on {dev}")
        rec.snapshot("workload_boundary")


if __name__ == "__main__":
    main()
PYEOF
( cd "$PROJ" && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm "toy trainer" )
# Expected size: the program's own clock, one worker vs four (outside stallcase).
for w in 1 4; do (cd "$PROJ" && STALLCASE_RECORDER=off "$PY" train.py --steps 60 --workers $w) | tee -a "$OUT/expected.txt"; done
# 1. Record it, as the README shows (from the project directory).
(cd "$PROJ" && "$PY" train.py --workers 1) | tee "$OUT/record.txt"
# 2. my.yaml as the README writes it, plus a small design (6 blocks of A, B, A').
cat > my.yaml <<YEOF
incidents_dir: $PROJ/incidents
allow_roots: [$PROJ]
candidate:
  set_args: {"--workers": "4"}
trials:
  blocks: 6
  runs_per_arm: 1
  control_runs: 1
  warmup_runs: 0
  seed: 20261201
  max_retries: 1
  max_failed_fraction: 0.34
  confidence: 0.95
  run_timeout_s: 120
  metric: {name: iteration_time, source: auto, per: step, statistic: median, skip_steps: 5, unit: ns}
YEOF
rm -rf results
# budgeted LOG ARGS...: Snakemake, stopped (SIGINT: it finishes nothing new and exits) before
# DEADLINE_S seconds of this script, so that a device call that is running out still keeps
# the blocks that finished. On 2026-12-01 an A/A ran 3 of 6 blocks and the device limit
# killed everything before they were copied to $OUT.
budgeted() {
  local log=$1; shift
  local left=$(( ${DEADLINE_S:-270} - (SECONDS - START) ))
  [ "$left" -gt 10 ] || { echo "no time left for $log"; return 1; }
  timeout -s INT -k 20 "$left" "$PY" -m snakemake --profile profiles/local --configfile my.yaml "$@" > "$log" 2>&1
}
if [ -z "${ONLY_AA:-}" ]; then  # ONLY_AA=1: the deliberate A/A alone (when the A/B was run before)
budgeted "$OUT/snakemake-ab.log" --config incident=tx || echo "A/B snakemake exit $?"
fi
summarize() {
"$PY" - "$OUT" <<'PYEOF'
import glob, json, re, statistics, sys
out = sys.argv[1]
exp = [float(m) for m in re.findall(r"median iteration ([\d.]+) ms", open(f"{out}/expected.txt").read())]
summary = {"expected_ratio": exp[1] / exp[0] if len(exp) == 2 else None, "program_median_iteration_ms": exp}
for name in ("ab", "aa"):
    blocks = sorted(glob.glob(f"kept/{name}/execution/*.json"))
    runs = [r for p in blocks for r in json.load(open(p))["runs"]]
    med = lambda arm: statistics.median([r["metric_ns"] for r in runs if r["arm"] == arm and r["status"] == "ok"] or [0]) / 1e6
    try:
        c = json.load(open(f"kept/{name}/comparison.json"))
    except OSError:  # not run, or stopped at the deadline: say how far it got, no verdict
        summary[name] = {"partial": True, "blocks_finished": len(blocks), "runs": len(runs),
                         "failed_runs": sum(r["status"] != "ok" for r in runs),
                         "median_ms": {a: med(a) for a in ("A", "B", "A'")}} if runs else None
        continue
    summary[name] = {"verdict": c["verdict"], "ratio": c["estimate"]["ratio"], "low": c["estimate"]["ratio_low"],
                     "high": c["estimate"]["ratio_high"], "floor_pct": c["noise_floor"]["pct"], "mde_pct": c["mde"]["pct"],
                     "failed_runs": sum(r["status"] != "ok" for r in runs), "runs": len(runs),
                     "sources": sorted({str(r.get("metric_source")) for r in runs}),
                     "median_ms": {a: med(a) for a in ("A", "B", "A'")}, "reasons": c["reasons"]}
    try:
        plan = json.load(open(f"kept/{name}/plan.json"))
        summary[name]["pinned"] = sorted(s["relpath"] for s in plan["arms"]["baseline"]["sources"])
    except (OSError, KeyError):
        pass
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
PYEOF
  tar czf "$OUT/h200-own-workload.tgz" kept my.yaml -C "$(dirname "$PROJ")" tx-proj/model.py tx-proj/train.py 2>/dev/null || true
}
keep() {  # the latest run's records (results/tx/ links them)
  mkdir -p "kept/$1"
  for f in plan.json comparison.json snapshot.json diagnosis.json execution preflight; do
    cp -rL "results/tx/$f" "kept/$1/" 2>/dev/null || true
  done
  cp -rL results/tx/latest/logs "kept/$1/run-logs" 2>/dev/null || true
  # A run that did not finish has no latest link yet: keep its finished blocks from its run dir.
  local run
  run=$(ls -td results/tx/runs/"$2"-* 2>/dev/null | head -1)
  if [ -n "$run" ] && [ ! -f "kept/$1/comparison.json" ]; then
    cp -r "$run/plan.json" "$run/execution" "$run/preflight" "kept/$1/" 2>/dev/null || true
  fi
}
keep ab ab
echo "A/B done at $((SECONDS - START)) s"
summarize
if [ $((SECONDS - START)) -lt ${AA_DEADLINE_S:-150} ]; then
  budgeted "$OUT/snakemake-aa.log" --config incident=tx candidate=baseline || echo "A/A snakemake exit $?"
  keep aa aa
  echo "A/A done at $((SECONDS - START)) s"
  summarize
else
  echo "A/A skipped: $((SECONDS - START)) s already spent"
fi
echo "total $((SECONDS - START)) s"
