"""Side by side on identical inputs: hyperfine's Welch test, pyperf compare_to, stallcase.

Every simulated experiment (benchmarks/noise_model.py) is judged three ways:
- hyperfine's scripts/welch_ttest.py: Welch's unequal-variance t test on all baseline
  runs vs all candidate runs, "different" when p < 0.05 (reimplemented here on a
  hyperfine export structure; the script itself calls scipy.stats.ttest_ind(equal_var=False));
- pyperf: the real `python -m pyperf compare_to -G base.json cand.json`, on pyperf
  suite files holding one benchmark per experiment and one run per measured value;
- stallcase: workflow_lib.compare.verdict.decide on the same runs, paired within blocks.

Usage (from the repository root; needs `pip install pyperf` in a separate venv):
    /work/venv/bin/python -m benchmarks.stats_side_by_side \
        --pyperf-python /work/venvs/pyperf/bin/python --experiments 500 --out docs/stats_side_by_side.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sys

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the repository root

from benchmarks.noise_model import Design, NoiseModel, Simulated, simulate
from workflow_lib.compare import stats
from workflow_lib.compare import verdict as V

# Builds pyperf suite files with pyperf's own API (run in the pyperf venv).
_PYPERF_WRITER = """
import json, sys, pyperf
data = json.load(open(sys.argv[1]))
for side in ("base", "cand"):
    benches = []
    for name, values in data[side].items():
        runs = [pyperf.Run([v], metadata={"name": name, "unit": "second"}, collect_metadata=False) for v in values]
        benches.append(pyperf.Benchmark(runs))
    pyperf.BenchmarkSuite(benches).dump(data["out_" + side], replace=True)
"""

SCENARIOS = (
    ("A/A, plain 1% log-normal noise, interleaved", NoiseModel(outlier_p=0.0, slow_block_p=0.0, flip_p=0.0), True),
    ("A/A, heavy tails + outliers + clock states, interleaved", NoiseModel(), True),
    ("A/A + heavy noise + 10% drift, interleaved", NoiseModel(drift=0.10), True),
    ("A/A + heavy noise + 10% drift, sequential (all A, then all B)", NoiseModel(drift=0.10), False),
    ("true +2% change + heavy noise, interleaved", NoiseModel(effect=0.02), True),
)


@dataclass(frozen=True)
class Rates:
    slower: int
    faster: int
    experiments: int

    def cell(self) -> str:
        claims = self.slower + self.faster
        lo, hi = stats.clopper_pearson(claims, self.experiments)
        return f"{claims / self.experiments:.1%} [{lo:.1%}, {hi:.1%}] ({self.slower} slower, {self.faster} faster)"


def hyperfine_export(a_s: np.ndarray, b_s: np.ndarray) -> dict:
    """The part of hyperfine's `--export-json` that welch_ttest.py reads."""
    return {"results": [{"command": "baseline", "times": a_s.tolist()}, {"command": "candidate", "times": b_s.tolist()}]}


def welch_like_hyperfine(export: dict, threshold: float = 0.05) -> int:
    """+1 candidate slower, -1 faster, 0 'almost the same' (p >= threshold), as the script decides."""
    x, y = (np.asarray(r["times"]) for r in export["results"][:2])
    t, p = stats.welch_t_test(x, y)
    if p >= threshold:
        return 0
    return 1 if t < 0 else -1  # t = mean(x) - mean(y) over se: negative means y (candidate) is slower


def hyperfine_rates(sim: Simulated) -> Rates:
    calls = [welch_like_hyperfine(hyperfine_export(a * 1e-9, b * 1e-9)) for a, b in zip(sim.a_ns, sim.b_ns)]
    return Rates(calls.count(1), calls.count(-1), len(calls))


def pyperf_rates(sim: Simulated, pyperf_python: str, workdir: Path) -> Rates:
    names = [f"exp{e:04d}" for e in range(sim.a_ns.shape[0])]
    data = {
        "base": {n: (a * 1e-9).tolist() for n, a in zip(names, sim.a_ns)},
        "cand": {n: (b * 1e-9).tolist() for n, b in zip(names, sim.b_ns)},
        "out_base": str(workdir / "base.json"), "out_cand": str(workdir / "cand.json"),
    }
    (workdir / "values.json").write_text(json.dumps(data))
    subprocess.run([pyperf_python, "-c", _PYPERF_WRITER, str(workdir / "values.json")], check=True)
    out = subprocess.run(
        [pyperf_python, "-m", "pyperf", "compare_to", "-G", data["out_base"], data["out_cand"]],
        check=True, capture_output=True, text=True,
    ).stdout
    return Rates(_count(out, "Slower"), _count(out, "Faster"), len(names))


def _count(out: str, title: str) -> int:
    m = re.search(rf"^{title} \((\d+)\):", out, re.MULTILINE)
    return int(m.group(1)) if m else 0


def stallcase_rates(sim: Simulated, design: Design) -> Rates:
    v = V.decide(sim.d, sim.c, design.confidence).verdict
    return Rates(int(np.sum(v == V.SLOWER)), int(np.sum(v == V.FASTER)), v.size)


def table(experiments: int, pyperf_python: str | None, seed: int) -> str:
    design = Design()
    rows = [
        "| scenario (same values to all three) | hyperfine welch_ttest.py: 'difference' | pyperf compare_to: significant | stallcase: faster/slower |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for k, (title, model, interleaved) in enumerate(SCENARIOS):
            sim = simulate(model, design, experiments, seed=seed + k, interleaved=interleaved)
            pyperf = pyperf_rates(sim, pyperf_python, Path(tmp)).cell() if pyperf_python else "not run"
            cells = [hyperfine_rates(sim).cell(), pyperf, stallcase_rates(sim, design).cell()]
            rows.append(f"| {title} | " + " | ".join(cells) + " |")
    note = (
        f"\n{experiments} simulated experiments per row, seed {seed}; design {design.blocks} blocks x "
        f"({design.runs_per_arm} A + {design.runs_per_arm} B + {design.control_runs} A' + {design.warmup_runs} warm-up) runs; "
        "cells: share of experiments where the tool claims a change [95% Clopper-Pearson interval].\n"
    )
    return "\n".join(rows) + "\n" + note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pyperf-python", default="/work/venvs/pyperf/bin/python", help="python with pyperf installed")
    p.add_argument("--experiments", type=int, default=500)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path, help="also write the table here")
    p.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): a few experiments, pyperf's "
                   "column only where --pyperf-python exists; it runs, its numbers mean nothing")
    args = p.parse_args(argv)
    if args.smoke:
        args.experiments = 10
        if not Path(args.pyperf_python).exists():
            print(f"no pyperf at {args.pyperf_python}: its column is left out (smoke run)")
            args.pyperf_python = None
    text = table(args.experiments, args.pyperf_python, args.seed)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
