"""`stallcase record -- CMD` (zero-change, in-process capture) against the bare program.

    python benchmarks/overhead_zero_change.py [--pairs 6] [--seed 33] [--json out.json] -- python prog.py ARGS

Each pair runs the program bare and under `python -m workflow_lib.cli record` in seeded random
order, one process after another. Two measures per run: the whole process's wall time (start-up
of the capture, its hooks, the steps and the incident written at exit: everything a user waits
for) and, where the program prints `steady_ms_per_step X` (its own timing of its steady steps),
that. Each is the Hodges-Lehmann estimate with the signed-rank 95% interval over pairs of
log(recorded / bare), reported as percent (workflow_lib/compare/stats.py, the trials' own
statistics). A process per run spreads more than the in-process design
(benchmarks/overhead_inprocess.py), so this bounds coarser; it is the zero-change path's cost.

`--arm NAME:VAR=VALUE[,VAR=VALUE]` (repeatable) adds recorded runs with extra environment, to
take the cost apart in the same run, each against the same bare runs: e.g.
`--arm no_gpu:STALLCASE_GPU_EVIDENCE=off --arm no_hooks:STALLCASE_INPROCESS_OFF=all
--arm recorder_off:STALLCASE_RECORDER=off`. Each run's automatic snapshots (written by the
recorder while the program runs) are counted from the runner's end-of-run lines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflow_lib.compare import stats  # noqa: E402

STEADY = re.compile(r"steady_ms_per_step\s+([0-9.]+)")


def _run(argv: list[str], env: dict | None = None) -> tuple[float, float | None, int]:
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False,
                       env=None if env is None else {**os.environ, **env})
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{argv[:6]}... exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    m = STEADY.search(p.stdout)
    return wall, float(m.group(1)) if m else None, p.stderr.count("automatic snapshot")


def _arm(spec: str) -> tuple[str, dict]:
    name, _, assigns = spec.partition(":")
    env = {}
    for a in filter(None, assigns.split(",")):
        k, eq, v = a.partition("=")
        if not eq or not k:
            raise SystemExit(f"--arm {spec}: expected NAME:VAR=VALUE[,VAR=VALUE]")
        env[k] = v
    if not name or name == "bare":
        raise SystemExit(f"--arm {spec}: give the arm a name other than 'bare'")
    return name, env


def _interval(rec: list[float], bare: list[float]) -> dict:
    rel = np.log(np.asarray(rec) / np.asarray(bare))
    est, lo, hi = (float(np.expm1(v)) * 100.0 for v in stats.hodges_lehmann(rel, 0.95))
    return {"estimate": est, "low": lo, "high": hi, "pairs": int(rel.size)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): 2 pairs of a tiny "
                    "Python program; it runs, its numbers mean nothing")
    ap.add_argument("--work", default=None, help="the recorded runs' incidents dir (default: a tmp dir)")
    ap.add_argument("--arm", action="append", default=[], help="NAME:VAR=VALUE[,VAR=VALUE]: another recorded "
                    "arm with this environment (repeatable)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.smoke:
        args.pairs = 2
        cmd = cmd or [sys.executable, "-c", "import time; [time.sleep(0.001) for _ in range(20)]"]
    if not cmd:
        ap.error("give the program: -- python prog.py ARGS")
    work = args.work or tempfile.mkdtemp(prefix="zc-")
    rng = random.Random(args.seed)
    arms = {"bare": None, "recorded": {}, **dict(_arm(a) for a in args.arm)}
    runs = {name: [] for name in arms}
    for i in range(args.pairs):
        for arm in rng.sample(list(arms), len(arms)):
            argv = cmd if arm == "bare" else [sys.executable, "-m", "workflow_lib.cli", "record", "--incident",
                                             f"zc-{arm}-{i}", "--incidents-dir", work, "--", *cmd]
            runs[arm].append(_run(argv, arms[arm]))
        print(f"pair {i}: " + "; ".join(f"{a} {runs[a][-1]}" for a in arms), flush=True)
    out = {"command": cmd, "pairs": args.pairs, "arms": {a: e for a, e in arms.items() if a != "bare"},
           "wall_s": {arm: [r[0] for r in v] for arm, v in runs.items()},
           "automatic_snapshots": {arm: [r[2] for r in v] for arm, v in runs.items() if arm != "bare"}}
    steady = all(r[1] is not None for v in runs.values() for r in v)
    if steady:
        out["steady_ms"] = {arm: [r[1] for r in v] for arm, v in runs.items()}
    for arm in arms:
        if arm == "bare":
            continue
        key = "" if arm == "recorded" else f"{arm}."
        out[f"{key}wall_pct"] = _interval([r[0] for r in runs[arm]], [r[0] for r in runs["bare"]])
        if steady:
            out[f"{key}steady_pct"] = _interval([r[1] for r in runs[arm]], [r[1] for r in runs["bare"]])
    for k, o in out.items():
        if k.endswith("_pct"):
            print(f"{k}: {o['estimate']:+.2f}% [{o['low']:+.2f}, {o['high']:+.2f}] over {o['pairs']} pairs")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
