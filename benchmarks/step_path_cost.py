"""What one recorded step costs the thread that runs it, by recorder component.

    python benchmarks/step_path_cost.py [--blocks 41] [--n 2000] [--json out.json]

Each configuration (sources on the recorder) runs `--blocks` pairs of blocks of `--n`
steps in one process, recorder live against paused (`FlightRecorder.pause()`), in seeded
random order within a pair. A step is `with rec.step(i):` around the four spans the
transformer loop writes (data, forward, backward, optimizer) and no work, so the difference
between the arms is the recorder's step path alone. Two clocks per block: the training
thread's CPU time (`time.thread_time_ns`: what this thread spends, robust to other jobs on
a loaded machine) and the process's CPU time (all threads: the samplers' work as well).
The added ns per step is the Hodges-Lehmann estimate with its 95% interval over the pairs'
differences (workflow_lib/compare/stats.py), per configuration, all in the same run; `live
step` is the median thread CPU of a whole recorded step (the loop, the step, its spans).

`--sample-threads N` (default 40) adds the scheduler's periodic all-thread sample, which runs
on the sampler thread while holding the GIL between its syscalls: a process with N extra idle
threads, `SchedSampler.sample_once` through fds kept open per thread (what ships) against
reading each file by path (open/read/close: what it did before, still its fallback),
two samplers (`max_cached_tasks = 0` for the second), `--blocks` pairs in seeded random
order, thread CPU per sample.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workflow_lib.compare import stats  # noqa: E402
from workflow_lib.capture import FlightRecorder  # noqa: E402
from workflow_lib.capture.sources import sched  # noqa: E402
from workflow_lib.capture.trigger import LatencyTrigger  # noqa: E402

CONFIGS = {
    "host": ("host",),
    "host_sched": ("host", "sched"),
    "host_nvml": ("host", "nvml"),
    "default": ("host", "nvml", "sched", "collectives"),
    # The default as a GPU machine runs it, less CUPTI: a latency trigger fed every step (here
    # one that never decides: its warm-up never ends, its window is kept), the Python the step
    # path still calls.
    "default_trigger": ("host", "nvml", "sched", "collectives"),
}
TRIGGERED = {"default_trigger"}
SPANS = ("data", "forward", "backward", "optimizer")


def block(rec: FlightRecorder, first: int, n: int) -> tuple[int, int]:
    span = rec  # looked up per call, as `with rec.span(...)` in the README's loop
    t, p = time.thread_time_ns(), time.process_time_ns()
    for i in range(first, first + n):
        with rec.step(i):
            for name in SPANS:
                with span.span(name):
                    pass
    return time.thread_time_ns() - t, time.process_time_ns() - p


def run_config(sources: tuple[str, ...], blocks: int, n: int, seed: int, work: str, trigger: bool = False) -> dict:
    rec = FlightRecorder(incident_id="steppath", incidents_dir=work, sources=sources).start()
    if trigger:
        rec.trigger = LatencyTrigger(warmup_steps=10**9)
    step = 0
    for live in (True, False):  # warm both states (span objects, schedstat fds)
        (rec.resume if live else rec.pause)()
        block(rec, step, n)
        step += n
    rng = random.Random(seed)
    thread_d, proc_d, live_abs = [], [], []
    for _ in range(blocks):
        got = {}
        for live in rng.sample([True, False], 2):
            (rec.resume if live else rec.pause)()
            got[live] = block(rec, step, n)
            step += n
        thread_d.append((got[True][0] - got[False][0]) / n)
        live_abs.append(got[True][0] / n)
        proc_d.append((got[True][1] - got[False][1]) / n)
    rec.resume()
    rec.stop()

    def hl(d):
        e, lo, hi = stats.hodges_lehmann(np.array(d, dtype=float), 0.95)
        return {"estimate": float(e), "low": float(lo), "high": float(hi)}

    return {"sources": list(sources), "trigger": trigger, "blocks": blocks, "n": n,
            "step_path": rec.report().get("step_path", "python"),
            "thread_cpu_ns_per_step": hl(thread_d), "process_cpu_ns_per_step": hl(proc_d),
            # The whole recorded step (the loop's own Python, the step and its four spans): median.
            "live_thread_cpu_ns_per_step": float(np.median(live_abs)),
            "sched_boundary_marks": rec.sched.boundary_marks if rec.sched else None}


def periodic_sample(threads: int, pairs: int, seed: int) -> dict:
    import threading

    stop = threading.Event()
    helpers = [threading.Thread(target=stop.wait, daemon=True) for _ in range(threads)]
    for h in helpers:
        h.start()
    samplers = {"kept_fds": sched.SchedSampler(1 << 16), "by_path": sched.SchedSampler(1 << 16)}
    samplers["by_path"].max_cached_tasks = 0
    rng = random.Random(seed + 2)
    cost = {"kept_fds": [], "by_path": []}
    n = threading.active_count()
    try:
        for s in samplers.values():  # warm: fds opened, pages touched
            s.sample_once()
        for _ in range(pairs):
            for arm in rng.sample(list(cost), 2):
                t = time.thread_time_ns()
                samplers[arm].sample_once()
                cost[arm].append(time.thread_time_ns() - t)
    finally:
        for s in samplers.values():
            s.stop()
        stop.set()
    e, lo, hi = stats.hodges_lehmann(np.array(cost["kept_fds"], float) - np.array(cost["by_path"], float), 0.95)
    return {"threads_sampled": n, "pairs": pairs,
            "kept_fds_us_median": float(np.median(cost["kept_fds"]) / 1e3),
            "by_path_us_median": float(np.median(cost["by_path"]) / 1e3),
            "kept_minus_by_path_us": {"estimate": e / 1e3, "low": lo / 1e3, "high": hi / 1e3}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=41)
    ap.add_argument("--n", type=int, default=2000, help="steps per block")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {tuple(CONFIGS)}")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--sample-threads", type=int, default=40, help="extra idle threads for the periodic sample (0: skip)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.blocks, args.n, args.sample_threads = 3, 200, 2
    names = [c.strip() for c in args.configs.split(",")]
    bad = [c for c in names if c not in CONFIGS]
    if bad:
        ap.error(f"unknown config(s) {bad}; known: {tuple(CONFIGS)}")
    work = tempfile.mkdtemp(prefix="steppath-")
    out = {}
    print(f"added ns per recorded step (live - paused), HL [95%] over {args.blocks} block pairs of {args.n} steps")
    for c in names:
        r = out[c] = run_config(CONFIGS[c], args.blocks, args.n, args.seed, work, trigger=c in TRIGGERED)
        t, p = r["thread_cpu_ns_per_step"], r["process_cpu_ns_per_step"]
        print(f"{c:15s} thread CPU {t['estimate']:8.0f} [{t['low']:.0f}, {t['high']:.0f}]   "
              f"process CPU {p['estimate']:8.0f} [{p['low']:.0f}, {p['high']:.0f}]   "
              f"live step {r['live_thread_cpu_ns_per_step']:6.0f}", flush=True)
    if args.sample_threads:
        r = out["periodic_sample"] = periodic_sample(args.sample_threads, args.blocks, args.seed)
        d = r["kept_minus_by_path_us"]
        print(f"periodic sched sample, ~{r['threads_sampled']} threads, thread CPU per sample: kept fds "
              f"{r['kept_fds_us_median']:.0f} us, by path {r['by_path_us_median']:.0f} us, "
              f"kept - by path {d['estimate']:+.0f} [{d['low']:+.0f}, {d['high']:+.0f}] us", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
