"""sync_stall: the host blocked in a synchronizing call and the GPU queue drained behind it.

Evidence required: host CUDA API calls with is_sync (runtime_api) and GPU activity.
Explains (checks/base.call_windows, the rule for every call-shaped cause): GPU idle during
each synchronizing call, plus the idle after it returns as far as the call caused it (issue
34: credit by consequence, bounded): until the GPU starts again, and through the refill
(checks/base.refill_end): after a sync the queue is empty, so every launch until the host is
ahead again runs on an idle GPU because of the sync, inside named spans too. Bounded by the
lead the sync took away (`lead_lost_ns`: the GPU busy time while the host was blocked): a
0.05 ms sync on an idle GPU followed by 50 ms of host work in `forward` gets 0.05 ms, the
rest is host_submission's; `refill_in_spans_ns` is the drain's idle left to others. Several
syncs in one step (one per layer) are bounded together by the lead they took (refill_end's
set_lead): the first sync's wait on the queued work covers the refill after later ones. A
step that follows a step with syncs starts without the lead those took (diagnose/lead.py):
its syncs' bound also holds what it is short of a sync-free step's typical lead
(`lead_owed_ns`), so per-layer syncs on consecutive steps keep the refill of every layer.
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
    ev, step = ci.rank.ev, ci.step
    sel = calls_in_step(ci, ev.rt_sync)
    if sel.size == 0:
        return not_applicable(NAME, sync_calls=0)
    s, e = ev.rt_start[sel], ev.rt_end[sel]
    blocked, windows = call_windows(ci, sel, refill=True, owed=True)
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
        "lead_lost_ns": int(measures.covered_between(ev.busy, s, e).sum()),
        "calls": top_names(ev.rt_name[sel], e - s),
    }
    if ci.lead_owed_ns:  # a step of a run of synced steps (diagnose/lead.py): the lead the run took before it
        evidence["lead_owed_ns"] = int(ci.lead_owed_ns)
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        evidence["note"] = "synchronizing calls present but the GPU did not go idle behind them"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    return base_steps.call_cause(si, NAME, si.rank.ev.rt_sync, less_allocator=True, refill=True)
