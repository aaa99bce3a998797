"""warm_up: the first steps of a process pay, once, for CUDA context creation, lazy module
init, cuDNN/cuBLAS handles and their autotuning, Triton/torch.compile compilation and
DataLoader worker start.

Evidence required: the step's position (one of the rank's first `warmup_steps`) and its wall
at least `slow_step_factor` x the rank's typical step (the median of the steps after the
warm-up): a capture that starts mid-run has first steps that are not cold, and those are
diagnosed like any other (diagnose/warmup.py).
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


def describe(ci: CheckInput) -> Finding:
    w = ci.warm_up
    if w is None:
        return not_applicable(NAME, note="a steady-state step")
    ev, step = ci.ev, ci.step
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
