"""sync_stall: the host blocked in a synchronizing call and the GPU queue drained behind it.

Evidence required: host CUDA API calls with is_sync (runtime_api) and GPU activity.
Explains (checks/base.call_windows, the rule for every call-shaped cause): GPU idle during
each synchronizing call, plus the idle after it returns only as far as the call delayed the
next launch: until the GPU starts again or the calling thread begins a named host span. The
host's refill after the sync (its forward pass, its Python) is that span's time and is
credited to host_submission, which names it; the evidence reports it as `refill_in_spans_ns`.
Declared waits and allocator calls after the return are their own causes.
"""

from __future__ import annotations

from .. import measures
from ..batch import StepFindings, StepsInput
from ..types import Finding
from . import base_steps
from .base import (CheckInput, attributed, call_windows, calls_in_step, needs_calls_and_kernels, next_gpu_start,
                   not_applicable, top_names)

NAME = "sync_stall"


def describe(ci: CheckInput) -> Finding:
    gate = needs_calls_and_kernels(ci, NAME)
    if gate is not None:
        return gate
    ev, step = ci.ev, ci.step
    sel = calls_in_step(ci, ev.rt_sync)
    if sel.size == 0:
        return not_applicable(NAME, sync_calls=0)
    s, e = ev.rt_start[sel], ev.rt_end[sel]
    blocked, windows = call_windows(ci, sel)
    if len(ev.alloc_union):
        windows = measures.subtract(windows, measures.subtract(measures.clip(ev.alloc_union, step.start_ns, step.end_ns), blocked))
    claimed = measures.intersect(ci.base.idle, windows)
    # The whole drain (return to next GPU start), to show how much of it the host spent in spans.
    drain = measures.intersect(ci.base.idle, measures.clip(measures.union(e, next_gpu_start(ev, e, step.end_ns)),
                                                           step.start_ns, step.end_ns))
    evidence = {
        "sync_calls": int(sel.size),
        "blocked_ns": blocked.total_ns,
        "gpu_idle_after_sync_ns": drain.total_ns,
        "gpu_idle_during_and_after_sync_ns": claimed.total_ns,
        "refill_in_spans_ns": measures.subtract(drain, claimed).total_ns,
        "calls": top_names(ev.rt_name[sel], e - s),
    }
    if claimed.total_ns < ci.opts.min_gap_ns:
        evidence["note"] = "synchronizing calls present but the GPU did not go idle behind them"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    return base_steps.call_cause(si, NAME, si.ev.rt_sync, less_allocator=True)
