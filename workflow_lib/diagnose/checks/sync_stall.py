"""sync_stall: the host blocked in a synchronizing call and the GPU queue drained behind it.

Evidence required: host CUDA API calls with is_sync (runtime_api) and GPU activity.
Explains: GPU idle from the start of each synchronizing call until the next GPU activity
after it returns (the queue is empty when a sync returns, so the GPU waits for the host to
submit again; host work before the next launch is the refill the sync forced), except time
after the return that the host spent in a declared wait or an allocator call: overlapping
causes are split by time, each credited with its own interval.
"""

from __future__ import annotations

from .. import measures
from ..types import Finding
from .base import CheckInput, attributed, calls_in_step, needs_calls_and_kernels, next_gpu_start, not_applicable, top_names

NAME = "sync_stall"


def check(ci: CheckInput) -> Finding:
    gate = needs_calls_and_kernels(ci, NAME)
    if gate is not None:
        return gate
    ev, step = ci.ev, ci.step
    sel = calls_in_step(ci, ev.rt_sync)
    if sel.size == 0:
        return not_applicable(NAME, sync_calls=0)
    s, e = ev.rt_start[sel], ev.rt_end[sel]
    blocked = measures.clip(measures.union(s, e), step.start_ns, step.end_ns)
    # Next GPU activity starting at or after each sync returns; the step end bounds the drain.
    nxt = next_gpu_start(ev, e, step.end_ns)
    windows = measures.clip(measures.union(s, nxt), step.start_ns, step.end_ns)
    # Each cause gets its own interval: after the call returns, time the host spends in a
    # declared wait or an allocator call is that cause's, not the sync's refill.
    for other in (ev.wait_union, ev.alloc_union):
        if len(other):
            windows = measures.subtract(windows, measures.subtract(measures.clip(other, step.start_ns, step.end_ns), blocked))
    claimed = measures.intersect(ci.base.idle, windows)
    after = measures.intersect(ci.base.idle, measures.clip(measures.union(e, nxt), step.start_ns, step.end_ns))
    evidence = {
        "sync_calls": int(sel.size),
        "blocked_ns": blocked.total_ns,
        "gpu_idle_after_sync_ns": after.total_ns,
        "gpu_idle_during_and_after_sync_ns": claimed.total_ns,
        "calls": top_names(ev.rt_name[sel], e - s),
    }
    if claimed.total_ns < ci.opts.min_gap_ns:
        evidence["note"] = "synchronizing calls present but the GPU did not go idle behind them"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)
