"""gpu_bound: the GPU's kernels were running for most of the step, so the step is bounded by
GPU compute.

Evidence required: GPU kernels. Copy-engine time is not compute: a step whose GPU was busy
with copies is transfer_stall's question, so busy here means kernels only.
Explains: the step's kernel-busy time.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import UNRESOLVED, StepFindings, StepsInput, answer, uniform
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "gpu_bound"


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.kernels:
        return unresolved(NAME, ["GPU activity (kernels table not observed)"])
    wall = ci.step.wall_ns
    kbusy = measures.clip(ci.rank.ev.kernel_busy, ci.step.start_ns, ci.step.end_ns)
    busy = kbusy.total_ns
    frac = busy / wall if wall > 0 else 0.0
    ev = {"busy_fraction": round(frac, 6), "threshold": ci.rank.opts.gpu_bound_min_busy_fraction, "busy_ns": busy,
          "basis": "kernels only (copies and memsets are transfer_stall's)"}
    if wall > 0 and frac >= ci.rank.opts.gpu_bound_min_busy_fraction:
        return attributed(NAME, kbusy, **ev)
    return not_applicable(NAME, **ev)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    if not si.rank.src.kernels:
        return uniform(NAME, si.frame.n, UNRESOLVED, ("GPU activity (kernels table not observed)",))
    wall = si.frame.wall
    busy = si.frame.per_step(si.rank.ev.kernel_busy)
    frac = np.where(wall > 0, busy / np.maximum(wall, 1), 0.0)
    return answer(NAME, si.frame, (wall > 0) & (frac >= si.rank.opts.gpu_bound_min_busy_fraction), si.rank.ev.kernel_busy)
