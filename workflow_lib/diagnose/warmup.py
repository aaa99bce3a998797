"""Which of a rank's first steps are cold (warm-up), and the once-per-process line about them.

A step is warm-up when it is one of the rank's first `warmup_steps` steps in time order and
its wall is at least `slow_step_factor` x the typical step (median wall of the steps after the
warm-up, the same reference as diagnose/excess.py). A capture that starts mid-run has first
steps that are not cold; they are diagnosed like any other. With fewer than
`min_comparable_steps` later steps there is no typical step, and the first steps are warm-up
by position alone.
"""

from __future__ import annotations

import numpy as np


def cold_steps(wall_ns: np.ndarray, opts) -> list[dict | None]:
    """Per step (time order): {position, typical_ns, basis} for a warm-up step, else None."""
    n = int(wall_ns.size)
    k = min(int(opts.warmup_steps), n)
    out: list[dict | None] = [None] * n
    later = wall_ns[k:]
    if later.size < opts.min_comparable_steps:
        return out
    typical = int(np.median(later))
    if typical <= 0:  # zero-length steps: no scale to call a step cold against
        return out
    for i in range(k):
        if wall_ns[i] >= opts.slow_step_factor * typical:
            out[i] = {"position": i, "typical_ns": typical,
                      "basis": f"one of the first {opts.warmup_steps} steps and >= {opts.slow_step_factor}x the typical step"}
    return out


def summary(steps: list[dict]) -> dict | None:
    """summary.warm_up: the warm-up cost, reported once ("warm-up: 1.6 s, once per process")."""
    warm = [(s, f) for s in steps for f in s["findings"] if f["check"] == "warm_up" and f["verdict"] == "attributed"]
    if not warm:
        return None
    wall = sum(s["wall_ns"] for s, _ in warm)
    over = sum(max(s["wall_ns"] - (f["evidence"].get("typical_ns") or 0), 0) for s, f in warm)
    return {"steps": len(warm), "step_ids": [s["step_id"] for s, _ in warm][:16], "wall_ns": int(wall),
            "over_typical_ns": int(over), "once_per_process": True}
