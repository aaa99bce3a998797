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

MAX_IDS_LISTED = 16  # summary.warm_up.step_ids: the first ones, not all


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
    return summary_of(totals(steps))


def totals(steps: list[dict], into: dict | None = None) -> dict:
    """What summary adds up over the warm-up steps, added to `into` (steps of one rank at a
    time, in record order, give what all of them at once give)."""
    acc = {"steps": 0, "step_ids": [], "wall_ns": 0, "over_typical_ns": 0} if into is None else into
    for s in steps:
        for f in s["findings"]:
            if f["check"] == "warm_up" and f["verdict"] == "attributed":
                acc["steps"] += 1
                if len(acc["step_ids"]) < MAX_IDS_LISTED:
                    acc["step_ids"].append(s["step_id"])
                acc["wall_ns"] += s["wall_ns"]
                acc["over_typical_ns"] += max(s["wall_ns"] - (f["evidence"].get("typical_ns") or 0), 0)
    return acc


def summary_of(acc: dict) -> dict | None:
    """summary.warm_up from `totals` (None without warm-up steps)."""
    if not acc["steps"]:
        return None
    return {"steps": acc["steps"], "step_ids": list(acc["step_ids"]), "wall_ns": int(acc["wall_ns"]),
            "over_typical_ns": int(acc["over_typical_ns"]), "once_per_process": True}
