"""How long `snakemake -n` takes to plan N trial blocks, against 1 block in the same run.

Usage: python benchmarks/dry_run_blocks.py [--blocks 200] [--rounds 3]
Target (issue: interleaved trials): 200 blocks plan in under 10 s. The dry run of the fewest
blocks the config accepts (6: no 95% interval exists below it, config_check refuses fewer) is
the reference: the ratio shows what the fan-out itself costs over Snakemake's start-up.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def dry_run(blocks: int, tmp: Path) -> float:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["trials"]["blocks"] = blocks
    path = tmp / f"b{blocks}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path), "--config", "incident=demo",
                    f"results_dir={tmp}/results", f"incidents_dir={tmp}/incidents"],
                   cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t


FEWEST_BLOCKS = 6  # the config's minimum at confidence 0.95 (workflow_lib/config_check.py)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args()
    if args.smoke:
        args.blocks, args.rounds = FEWEST_BLOCKS + 2, 1
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        one, many = [], []
        for _ in range(args.rounds):
            one.append(dry_run(FEWEST_BLOCKS, tmp))
            many.append(dry_run(args.blocks, tmp))
    m1, mn = statistics.median(one), statistics.median(many)
    print(f"snakemake -n, {FEWEST_BLOCKS} blocks: {m1:.2f} s (median of {args.rounds})")
    print(f"snakemake -n, {args.blocks} blocks: {mn:.2f} s (median of {args.rounds}); target < 10 s")
    print(f"ratio {args.blocks} blocks / {FEWEST_BLOCKS} blocks: {mn / m1:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
