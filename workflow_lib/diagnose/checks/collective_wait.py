"""collective_wait: time a rank spent in a collective waiting for slower peers.

Evidence required: the same step on every rank of the group, matched collective by
collective. Only the cross-rank collectives analysis (another stage) can attribute this;
here it is unresolved: with one rank because the peers are missing, with several because
the matching belongs to that analysis. NCCL kernel time in the step is reported as evidence.
"""

from __future__ import annotations

from .. import measures
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
