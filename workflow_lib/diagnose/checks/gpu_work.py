"""gpu_work: the GPU was executing the step's kernels.

Evidence required: GPU activity. Explains: the kernel-busy time that clock_throttle and
gpu_bound did not claim. Copies and memsets are never GPU work (issue 34): a copy on the
critical path is transfer_stall's, and a copy nothing waited for explains nothing (a 425 MB
pageable copy once took 153 ms of "GPU work"). Kernel time is the GPU doing the step's work
whatever the busy fraction, so it is explained by that work; whether the step is *bounded* by it is gpu_bound's question (busy
fraction >= 0.9). Growth of this time over the typical step is the excess cause
"gpu_work_growth", with the kernels whose time grew named in summary.slow_steps.
"""

from __future__ import annotations

from .. import measures
from ..batch import UNRESOLVED, StepsInput, StepFindings, answer, uniform
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "gpu_work"
BASIS = "kernels only (copies and memsets are transfer_stall's)"


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.kernels:
        return unresolved(NAME, ["GPU activity (kernels table not observed)"])
    busy = measures.clip(ci.rank.ev.kernel_busy, ci.step.start_ns, ci.step.end_ns)
    if busy.total_ns == 0:
        return not_applicable(NAME, busy_ns=0, basis=BASIS)
    return attributed(NAME, busy, busy_ns=busy.total_ns, intervals=len(busy), basis=BASIS)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    if not si.rank.src.kernels:
        return uniform(NAME, si.frame.n, UNRESOLVED, ("GPU activity (kernels table not observed)",))
    return answer(NAME, si.frame, si.frame.per_step(si.rank.ev.kernel_busy) > 0, si.rank.ev.kernel_busy)
