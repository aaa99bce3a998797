"""Time to a verdict on the demo: the sequential design (`stop: early`) against the fixed one.

    .venv/bin/python benchmarks/early_stop_demo.py [--pairs 3] [--blocks 12] [--steps 30]
    .venv/bin/python benchmarks/early_stop_demo.py --smoke   # CI: one pair of 6 blocks, 12 steps a run

Runs the README's first line on the built-in demo (real Snakemake, the local profile), with the
same trial design except `stop`, in interleaved pairs (fixed, early, early, fixed, ...), each in
a fresh results directory; the demo incident is recorded once and shared. Prints each run's
wall time (plan to comparison, the whole workflow) with its verdict and blocks used, the
medians, and the ratio early / fixed. Both designs hold the error at 1 - confidence; the fixed
one always runs `--blocks` blocks, the early one at most that many.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def _config(dest: Path, incidents: Path, blocks: int, stop: str, steps: int) -> Path:
    p = dest / f"{stop}.yaml"
    p.write_text(f"results_dir: {dest / 'results'}\nincidents_dir: {incidents}\ntrials:\n  blocks: {blocks}\n"
                 f"  runs_per_arm: 1\n  control_runs: 1\n  warmup_runs: 0\n  stop: {stop}\n  record_runs: false\n"
                 f'demo:\n  args: ["--steps", "{steps}", "--min-ready", "4", "--sync-every", "1"]\n')
    return p


def _one(work: Path, incidents: Path, blocks: int, stop: str, steps: int) -> dict:
    dest = Path(tempfile.mkdtemp(prefix=f"{stop}-", dir=work))
    cfg = _config(dest, incidents, blocks, stop, steps)
    t0 = time.perf_counter()
    proc = subprocess.run([str(SNAKEMAKE), "--cores", "2", "--profile", "profiles/local", "--configfile", str(cfg),
                           "--config", "incident=demo"], cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed ({stop}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    comp = json.loads((dest / "results" / "demo" / "comparison.json").read_text())
    shutil.rmtree(dest / "results" / "cas", ignore_errors=True)
    seq = comp.get("sequential") or {}
    blocks = seq.get("blocks_run") or comp["counts"]["planned_blocks"]  # the early design: the blocks it ran
    return {"stop": stop, "wall_s": wall, "verdict": comp["verdict"], "blocks": blocks,
            "change_pct": comp["estimate"]["change_pct"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--steps", type=int, default=30, help="the demo's steps a run")
    ap.add_argument("--smoke", action="store_true", help="one pair of 6 blocks, 12 steps a run: that it runs, not a number")
    args = ap.parse_args(argv)
    if args.smoke:
        args.pairs, args.blocks, args.steps = 1, 6, 12
    with tempfile.TemporaryDirectory(prefix="early-stop-") as tmp:
        work = Path(tmp)
        incidents = work / "incidents"
        # Record the demo once (the capture rule), so every timed run starts from the same incident.
        if not args.smoke:  # the smoke run's numbers mean nothing: its first timed run records the demo
            warm = _one(work, incidents, args.blocks, "early", args.steps)
            print(f"(recording run, not counted: {warm['wall_s']:.1f} s)")
        got: dict[str, list[dict]] = {"fixed": [], "early": []}
        for k in range(args.pairs):
            for stop in (("fixed", "early") if k % 2 == 0 else ("early", "fixed")):
                r = _one(work, incidents, args.blocks, stop, args.steps)
                got[stop].append(r)
                print(f"{stop:>5}: {r['wall_s']:7.1f} s  {r['verdict']} {r['change_pct']:+.1f}%  {r['blocks']} blocks", flush=True)
    med = {s: statistics.median(r["wall_s"] for r in rs) for s, rs in got.items()}
    blocks = {s: statistics.median(r["blocks"] for r in rs) for s, rs in got.items()}
    print(f"median time to a verdict: fixed {med['fixed']:.1f} s ({blocks['fixed']:g} blocks), "
          f"early {med['early']:.1f} s ({blocks['early']:g} blocks)")
    print(f"ratio early / fixed: {med['early'] / med['fixed']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
