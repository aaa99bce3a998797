"""gpu_bound: the GPU was busy for most of the step, so the step is bounded by GPU work.

Evidence required: GPU activity (kernels/memcpy). Explains: the step's busy time.
"""

from __future__ import annotations

from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "gpu_bound"


def check(ci: CheckInput) -> Finding:
    if not ci.src.kernels:
        return unresolved(NAME, ["GPU activity (kernels table not observed)"])
    wall = ci.step.wall_ns
    busy = ci.base.busy.total_ns
    frac = busy / wall if wall > 0 else 0.0
    ev = {"busy_fraction": round(frac, 6), "threshold": ci.opts.gpu_bound_min_busy_fraction, "busy_ns": busy}
    if wall > 0 and frac >= ci.opts.gpu_bound_min_busy_fraction:
        return attributed(NAME, ci.base.busy, **ev)
    return not_applicable(NAME, **ev)
