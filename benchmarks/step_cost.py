"""Per-step cost of the always-on recorder: `with rec.step(i): pass` under each source set.

    python benchmarks/step_cost.py [--rounds 7] [--n 2000]

Shuffled rounds; prints the median microseconds per step for: host only, host with the
latency trigger, host + sched (step-boundary samples), and the default tiered recorder
(host, NVML, sched, trigger, CUPTI armed only by the trigger), next to an empty `with` loop.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workflow_lib.capture import FlightRecorder, LatencyTrigger  # noqa: E402
from workflow_lib.core.config.numbers import MAX_STEP_COUNT, TRIGGER_OPTIONS  # noqa: E402


class _Nothing:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


CONFIGS = {
    "empty with": None,
    "host": {"sources": ("host",)},
    "host+trigger": {"sources": ("host",), "trigger": True},
    "host+sched+trigger": {"sources": ("host", "sched"), "trigger": True},
    "tiered default": {"sources": ("host", "nvml", "sched", "cupti"), "trigger": True, "cupti_mode": "triggered"},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.n = 2, 200
    tmp = tempfile.mkdtemp(prefix="step-cost-")
    recs = {}
    for name, cfg in CONFIGS.items():
        if cfg is None:
            continue
        kw = dict(cfg)
        if kw.pop("trigger", False):
            # Never fires: the largest k the option checks accept (k=1e9 is refused since the
            # hardening round: core/config/numbers.py TRIGGER_OPTIONS).
            kw["trigger"] = LatencyTrigger(k=TRIGGER_OPTIONS["k"][1].hi, warmup_steps=20, cooldown_steps=MAX_STEP_COUNT)
        recs[name] = FlightRecorder(incidents_dir=tmp, **kw).start()
    per = {n: [] for n in CONFIGS}
    nothing = _Nothing()
    k = 0
    for _ in range(args.rounds):
        order = list(CONFIGS)
        random.shuffle(order)
        for name in order:
            step = recs[name].step if name in recs else (lambda i: nothing)
            t0 = time.perf_counter_ns()
            for _ in range(args.n):
                with step(k):
                    pass
                k += 1
            per[name].append((time.perf_counter_ns() - t0) / args.n / 1000)
    for r in recs.values():
        r.stop()
    for name, v in per.items():
        print(f"{name:20s} {statistics.median(v):8.2f} us/step (min {min(v):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
