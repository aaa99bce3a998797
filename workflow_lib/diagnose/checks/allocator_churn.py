"""allocator_churn: the host was inside device-memory allocation or release calls
(cudaMalloc/cudaFree and their driver/HIP spellings, see workflow_lib/core/vocabulary.py) and the
GPU went idle behind them.

Evidence required: host API calls (runtime_api) and GPU activity. cudaFree waits for the
device before it releases memory, so the queue drains during it; cudaMalloc is slow host time
in the driver. Resolved before sync_stall, so a cudaFree of a churning allocator is credited
here and not to a generic synchronization.
Explains (checks/base.call_windows, the rule for every call-shaped cause): GPU idle during
each allocator call, plus the idle after it returns only as far as the call delayed the next
launch: until the GPU starts again or the calling thread begins a named host span. Declared
waits (also another thread's) are never the allocator's, so a 100 us cudaHostAlloc on a
pin-memory thread cannot take a 19 ms dataloader wait, and 5 ms inside the allocator on a
cold step cannot explain 1.5 s of context creation.
"""

from __future__ import annotations

from .. import measures
from ..batch import StepFindings, StepsInput
from ..types import Finding
from . import base_steps
from .base import CheckInput, attributed, call_windows, calls_in_step, needs_calls_and_kernels, not_applicable, top_names

NAME = "allocator_churn"


def describe(ci: CheckInput) -> Finding:
    gate = needs_calls_and_kernels(ci, NAME)
    if gate is not None:
        return gate
    ev = ci.rank.ev
    sel = calls_in_step(ci, ev.rt_alloc)
    if sel.size == 0:
        return not_applicable(NAME, allocator_calls=0)
    s, e = ev.rt_start[sel], ev.rt_end[sel]
    blocked, windows = call_windows(ci, sel)
    claimed = measures.intersect(ci.base.idle, windows)
    evidence = {
        "allocator_calls": int(sel.size),
        "in_allocator_ns": blocked.total_ns,
        "gpu_idle_in_allocator_ns": measures.intersect(ci.base.idle, blocked).total_ns,
        "gpu_idle_during_and_after_ns": claimed.total_ns,
        "calls": top_names(ev.rt_name[sel], e - s),
    }
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        evidence["note"] = "allocator calls present but the GPU did not go idle behind them"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    return base_steps.call_cause(si, NAME, si.rank.ev.rt_alloc)
