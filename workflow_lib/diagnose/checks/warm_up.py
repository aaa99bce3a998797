"""warm_up: the first steps of a process pay, once, for CUDA context creation, lazy module
init, cuDNN/cuBLAS handles and their autotuning, Triton/torch.compile compilation and
DataLoader worker start.

Evidence required: the step's position (one of the rank's first `warmup_steps`) and its wall
at least `slow_step_factor` x the rank's typical step (the median wall of the steps after the
warm-up, the same reference as diagnose/excess.py): a capture that starts mid-run has first
steps that are not cold, and those are diagnosed like any other (`cold_steps`). With fewer
than `min_comparable_steps` later steps there is no typical step, and no step is called cold.
Explains: the whole step, first in the resolution order. No per-step check may credit a
once-per-process cost to itself (5 ms inside the allocator on a cold step is not 1.5 s of
allocator churn), it is never ranked as a next experiment, and the excess reference leaves
these steps out (diagnose/excess.py). The summary reports it once (summary.warm_up).
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import StepsInput, StepFindings, answer
from ..types import Finding, Intervals
from .base import CheckInput, attributed, not_applicable, top_names

NAME = "warm_up"
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


def describe(ci: CheckInput) -> Finding:
    w = ci.warm_up
    if w is None:
        return not_applicable(NAME, note="a steady-state step")
    ev, step = ci.rank.ev, ci.step
    whole = Intervals(np.array([step.start_ns], np.int64), np.array([step.end_ns], np.int64))
    evidence = {"once_per_process": True, "position": w["position"], "wall_ns": step.wall_ns,
                "typical_ns": w["typical_ns"], "basis": w["basis"]}
    rows = ev.rt_index.overlapping(step.start_ns, step.end_ns)
    if rows.size:
        evidence["in_allocator_ns"] = measures.clip(measures.union(ev.rt_start[rows[ev.rt_alloc[rows]]], ev.rt_end[rows[ev.rt_alloc[rows]]]),
                                                    step.start_ns, step.end_ns).total_ns
        evidence["in_sync_ns"] = measures.clip(measures.union(ev.rt_start[rows[ev.rt_sync[rows]]], ev.rt_end[rows[ev.rt_sync[rows]]]),
                                               step.start_ns, step.end_ns).total_ns
    sel = ev.span_index.overlapping(step.start_ns, step.end_ns)
    comp = ev.span_is_compile[sel]
    if comp.any():
        evidence["compile_spans"] = top_names(ev.span_name[sel][comp], (ev.span_end[sel] - ev.span_start[sel])[comp])
    evidence["gpu_busy_ns"] = ci.base.busy.total_ns
    return attributed(NAME, whole, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py): the cold steps whole."""
    return answer(NAME, si.frame, si.is_cold, si.frame.windows)
