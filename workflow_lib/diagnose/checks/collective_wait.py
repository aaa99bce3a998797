"""collective_wait: time a rank spent in a collective waiting for slower peers.

Evidence required: the same step on every rank of the group, matched collective by
collective. Only the cross-rank collectives analysis (another stage) can attribute this;
here it is unresolved: with one rank because the peers are missing, with several because
the matching belongs to that analysis. NCCL kernel time in the step is reported as evidence.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import NOT_APPLICABLE, UNRESOLVED, StepsInput, StepFindings, uniform
from ..types import Finding
from .base import CheckInput, not_applicable, unresolved

NAME = "collective_wait"


def check(ci: CheckInput) -> Finding:
    ev, step = ci.ev, ci.step
    nccl = measures.clip(ev.nccl_union, step.start_ns, step.end_ns)
    if ci.src.ranks <= 1:
        return unresolved(NAME, ["other ranks' traces: a collective wait is only attributable by comparing arrival across ranks"],
                          ranks=ci.src.ranks, nccl_kernel_ns=nccl.total_ns)
    if nccl.total_ns == 0:
        return not_applicable(NAME, ranks=ci.src.ranks, nccl_kernel_ns=0)
    return unresolved(NAME, ["cross-rank collective matching (the collectives analysis)"],
                      ranks=ci.src.ranks, nccl_kernel_ns=nccl.total_ns)


def check_steps(si: StepsInput) -> StepFindings:
    """check() for every step of a rank at once (diagnose/batch.py)."""
    n = si.frame.n
    if si.src.ranks <= 1:
        return uniform(NAME, n, UNRESOLVED, ("other ranks' traces: a collective wait is only attributable by comparing arrival across ranks",))
    nccl = si.frame.per_step(si.ev.nccl_union) > 0
    return StepFindings(NAME, np.where(nccl, UNRESOLVED, NOT_APPLICABLE).astype(np.int8), measures.empty(),
                        [(), ("cross-rank collective matching (the collectives analysis)",)], nccl.astype(np.int32))
