"""GPU probe of the comparison statistics: a real B-vs-A and a real A/A on one GPU.

Not the trials runner (workflow_lib/trials/block.py is): a minimal stand-in that runs each
scheduled run as a fresh `python -c` process (argv list, no shell) timing a bf16
matmul loop, writes plan/execution records, and judges them with compare.compare.
It shows what noise floor and MDE the statistics see on real hardware, and whether
an A/A comes out `no_detectable_change` with the demo's block count.

Run on the GPU machine from the repository root (everything lands under $OUT):
    python3 benchmarks/h200_aa_probe.py --blocks 6
Needs torch, numpy, blake3, jsonschema. About 5 minutes for 2 x 6 blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workflow_lib.compare import rule as compare_rule  # noqa: E402
from workflow_lib.core import records  # noqa: E402
from workflow_lib.plan.schedule import make_schedule  # noqa: E402

# The workload: N x N bf16 matmuls; prints the median step time in ns. One step is
# 8 matmuls then a synchronize, so a step is a few ms and host noise stays visible.
WORKLOAD = """
import sys, time, statistics, torch
n, steps = int(sys.argv[1]), int(sys.argv[2])
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(20):
    a @ b
torch.cuda.synchronize()
times = []
for _ in range(steps):
    t0 = time.perf_counter_ns()
    for _ in range(8):
        c = a @ b
    torch.cuda.synchronize()
    times.append(time.perf_counter_ns() - t0)
print("STEP_MEDIAN_NS", statistics.median(times[10:]))
"""

# CPU stand-in with the same output, to check the plumbing where there is no GPU.
WORKLOAD_CPU = """
import sys, time, statistics, numpy as np
n, steps = int(sys.argv[1]), int(sys.argv[2])
a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
times = []
for _ in range(steps):
    t0 = time.perf_counter_ns(); a @ b; times.append(time.perf_counter_ns() - t0)
print("STEP_MEDIAN_NS", statistics.median(times[10:]))
"""

DIGEST0 = "0" * 64


def plan_for(args, n_candidate: int, experiment: str) -> dict:
    design = {
        "blocks": args.blocks, "runs_per_arm": args.runs_per_arm, "control_runs": args.runs_per_arm,
        "warmup_runs": 1, "seed": args.seed, "max_retries": 1, "max_failed_fraction": 0.25, "confidence": 0.95,
        "metric": {"name": "step_median", "source": "stdout_regex", "regex": "STEP_MEDIAN_NS (\\S+)",
                   "statistic": "median", "unit": "ns"},
    }
    base = {"argv": [sys.executable, "-c", args.workload, str(args.n), str(args.steps)], "env": {}, "changes": {}}
    cand = {"argv": [sys.executable, "-c", args.workload, str(n_candidate), str(args.steps)], "env": {},
            "changes": {} if n_candidate == args.n else {"args": [str(n_candidate)]}}
    if n_candidate == args.n:
        cand["same_as_baseline"] = True
    plan = {
        "schema_version": 1, "kind": "plan", "incident_id": "h200-probe", "experiment": experiment,
        "snapshot_digest": DIGEST0, "artifacts": [],
        "workload": {"argv": base["argv"], "cwd": str(Path.cwd()), "env": {}},
        "arms": {"baseline": base, "candidate": cand}, "design": design,
        "schedule": make_schedule(design), "environment": {},
    }
    records.validate(plan, "plan")
    return plan


def one_run(workload: str, n: int, steps: int, index: int, arm: str, attempt: int) -> dict:
    start = time.time_ns()
    proc = subprocess.run([sys.executable, "-c", workload, str(n), str(steps)], capture_output=True, text=True, timeout=120)
    end = time.time_ns()
    value = None
    for line in proc.stdout.splitlines():
        if line.startswith("STEP_MEDIAN_NS "):
            value = float(line.split()[1])
    ok = proc.returncode == 0 and value is not None
    return {
        "index": index, "arm": arm, "attempt": attempt, "status": "ok" if ok else "failed",
        "exit_code": proc.returncode, "start_unix_ns": start, "end_unix_ns": end,
        "metric_ns": value if ok else None, "values_ns": [value] if ok else [],
        "gpu": {"status": "not_observed", "reason": "probe does not sample NVML"}, "unusual": [],
        "error": None if ok else (proc.stderr.strip().splitlines() or ["no metric line"])[-1][:300],
    }


def run_experiment(args, n_candidate: int, name: str, out: Path) -> dict:
    plan = plan_for(args, n_candidate, name)
    pd = records.write_record(out / name / "plan.json", plan, "plan")
    size = {"warmup": args.n, "A": args.n, "A'": args.n, "B": n_candidate}
    paths = []
    for block, runs in plan["schedule"].items():
        recorded = []
        for r in runs:
            for attempt in range(plan["design"]["max_retries"] + 1):
                recorded.append(one_run(args.workload, size[r["arm"]], args.steps, r["index"], r["arm"], attempt))
                if recorded[-1]["status"] == "ok":
                    break
        failed = sum(x["status"] == "failed" for x in recorded)
        execution = {
            "schema_version": 1, "kind": "execution", "block": block, "plan_digest": pd, "preflight_digest": DIGEST0,
            "node": os.uname().nodename, "status": "complete" if failed <= 2 else "too_many_failures", "runs": recorded,
        }
        paths.append(out / name / "execution" / f"{block}.json")
        records.write_record(paths[-1], execution, "execution")
        print(f"{name} {block}: {[round(x['metric_ns'] / 1e6, 3) if x['metric_ns'] else None for x in recorded]} ms", flush=True)
    compare_rule.run(out / name / "plan.json", paths, out / name / "comparison.json")
    return records.read_record(out / name / "comparison.json", "comparison")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--runs-per-arm", type=int, default=2)
    p.add_argument("--n", type=int, default=4096, help="baseline matmul size")
    p.add_argument("--candidate-n", type=int, default=4608, help="candidate matmul size (slower)")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--cpu", action="store_true", help="numpy stand-in workload (plumbing check without a GPU)")
    p.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): --cpu, "
                   "two blocks, small matrices, into a temp dir; it runs, its numbers mean nothing")
    args = p.parse_args()
    if args.smoke:
        import tempfile

        args.cpu, args.blocks, args.runs_per_arm, args.n, args.candidate_n, args.steps = True, 2, 1, 64, 96, 15
        os.environ.setdefault("OUT", tempfile.mkdtemp(prefix="aa-probe-"))
    args.workload = WORKLOAD_CPU if args.cpu else WORKLOAD
    out = Path(os.environ.get("OUT", "probe_out"))
    summary = {}
    for name, n_cand in (("b_vs_a", args.candidate_n), ("a_vs_a", args.n)):
        rec = run_experiment(args, n_cand, name, out)
        summary[name] = {k: rec[k] for k in ("verdict", "reasons", "estimate", "noise_floor", "mde", "counts")}
        print(name, rec["verdict"], *rec["reasons"], sep="\n  ", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
