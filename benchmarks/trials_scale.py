"""Trials and comparison at 10k runs: is any stage quadratic in runs or blocks?

    .venv/bin/python benchmarks/trials_scale.py [--runs 1000 10000] [--repeats 3] [--design wide|narrow]

For each size, a synthetic plan (benchmarks/compare_builders: the project's own schedule) and one
execution record per block with every run ok (1% log-normal noise, B 2% slower), then each
stage timed in this process, `--repeats` times, interleaved over sizes:
  schedule   make_schedule (the plan's counterbalanced interleaving)
  validate   records.validate of the plan and of every execution record (the read path)
  compare    compare.compare: per-block estimates, the verdict (Hodges-Lehmann + signed-rank
             interval on blocks), components, the record
  write      records.write_record of the comparison (schema validation, canonical bytes)
The reference is the same stage at the smallest size, measured in the same run: a linear
stage grows by the size ratio, a quadratic one by its square. Prints each stage's median time
(min-max over repeats) per size and the growth exponent log(t_big / t_small) / log(size ratio)
(1 = linear, 2 = quadratic); the target is no stage above ~1.2.
  wide    3 runs per arm, 3 control runs, 1 warm-up per arm (11 runs a block): 10k runs = 909 blocks
  narrow  1 run per arm, 1 control run, no warm-up (3 runs a block): 10k runs = 3,333 blocks
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DESIGNS = {"wide": (3, 3, 1), "narrow": (1, 1, 0)}


def stages(runs: int, kind: str, tmp: Path) -> dict[str, float]:
    from benchmarks import compare_builders as cb
    from workflow_lib.compare import build as compare
    from workflow_lib.core import records
    from workflow_lib.plan.schedule import make_schedule

    per_arm, control, warm = DESIGNS[kind]
    per_block = 2 * per_arm + control + 2 * warm
    des = cb.design(blocks=max(1, runs // per_block), runs_per_arm=per_arm, control_runs=control, warmup_runs=warm)
    out = {}
    t = time.perf_counter()
    make_schedule(des)
    out["schedule"] = time.perf_counter() - t
    pl = cb.plan(des)
    ex, digests, pd = cb.executions(pl, cb.lognormal_values(1, effect=0.02))
    t = time.perf_counter()
    records.validate(pl, "plan")
    for e in ex.values():
        records.validate(e, "execution")
    out["validate"] = time.perf_counter() - t
    typed_pl, typed_ex = cb.typed_records(pl, ex)  # as compare/rule.py reads them, before the clock
    t = time.perf_counter()
    rec = compare.compare(typed_pl, typed_ex, digests, pd).to_json()
    out["compare"] = time.perf_counter() - t
    t = time.perf_counter()
    records.write_record(tmp / f"comparison-{runs}.json", rec, "comparison")
    out["write"] = time.perf_counter() - t
    out["_blocks"] = des["blocks"]
    out["_verdict"] = rec["verdict"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--design", choices=sorted(DESIGNS), default="narrow")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.repeats = [60], 1
    sizes = sorted(args.runs)
    got: dict[int, list[dict]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        stages(sizes[0], args.design, Path(tmp))  # warm-up: imports, schema compilation, caches
        for _ in range(args.repeats):
            for n in sizes:  # interleaved, so drift in the machine's load hits every size alike
                got[n].append(stages(n, args.design, Path(tmp)))
    names = [k for k in got[sizes[0]][0] if not k.startswith("_")]
    print(f"design {args.design}; repeats {args.repeats}; load average {open('/proc/loadavg').read().split()[0]}")
    for n in sizes:
        print(f"{n:>6} runs ({got[n][0]['_blocks']} blocks, verdict {got[n][0]['_verdict']}): " + "  ".join(
            f"{s} {median([r[s] for r in got[n]]):.3f} s [{min(r[s] for r in got[n]):.3f}-{max(r[s] for r in got[n]):.3f}]"
            for s in names))
    small, big = sizes[0], sizes[-1]
    ratio = got[big][0]["_blocks"] / got[small][0]["_blocks"]
    worst = 0.0
    for s in names:
        a, b = median([r[s] for r in got[small]]), median([r[s] for r in got[big]])
        exp = math.log(b / a) / math.log(ratio) if a > 0 and b > 0 and ratio > 1 else float("nan")
        worst = max(worst, exp)
        print(f"{s:>9}: {b / a:7.1f}x for {ratio:.1f}x the blocks; growth exponent {exp:.2f} (1 linear, 2 quadratic)")
    total = {n: median([sum(r[s] for s in names) for r in got[n]]) for n in sizes}
    print(f"total at {big} runs: {total[big]:.2f} s; worst growth exponent {worst:.2f} (target <= ~1.2: "
          f"{'met' if worst <= 1.2 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
