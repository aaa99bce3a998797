"""allocator_churn: the host was inside device-memory allocation or release calls
(cudaMalloc/cudaFree and their driver/HIP spellings, see workflow_lib/core/vocabulary.py) and the
GPU went idle behind them.

Evidence required: host API calls (runtime_api) and GPU activity. cudaFree waits for the
device before it releases memory, so the queue drains during it; cudaMalloc is slow host time
in the driver. Resolved before sync_stall, so a cudaFree of a churning allocator is credited
here and not to a generic synchronization.
Explains: GPU idle from the start of each allocator call until the next GPU activity after it
returns.
"""

from __future__ import annotations

from .. import measures
from ..types import Finding
from .base import CheckInput, attributed, calls_in_step, needs_calls_and_kernels, next_gpu_start, not_applicable, top_names

NAME = "allocator_churn"


def check(ci: CheckInput) -> Finding:
    gate = needs_calls_and_kernels(ci, NAME)
    if gate is not None:
        return gate
    ev, step = ci.ev, ci.step
    sel = calls_in_step(ci, ev.rt_alloc)
    if sel.size == 0:
        return not_applicable(NAME, allocator_calls=0)
    s, e = ev.rt_start[sel], ev.rt_end[sel]
    nxt = next_gpu_start(ev, e, step.end_ns)
    claimed = measures.intersect(ci.base.idle, measures.clip(measures.union(s, nxt), step.start_ns, step.end_ns))
    evidence = {
        "allocator_calls": int(sel.size),
        "in_allocator_ns": measures.clip(measures.union(s, e), step.start_ns, step.end_ns).total_ns,
        "gpu_idle_during_and_after_ns": claimed.total_ns,
        "calls": top_names(ev.rt_name[sel], e - s),
    }
    if claimed.total_ns < ci.opts.min_gap_ns:
        evidence["note"] = "allocator calls present but the GPU did not go idle behind them"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)
