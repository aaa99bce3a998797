"""One-time first calls (issue 34): a named host operation whose first call in the recording
took far longer than its later calls. Lazy init mid-run looks like this: the first call of an op
loads its kernels' module or builds a handle, the first `.item()` allocates the pinned staging,
the first eval step or checkpoint initialises what it needs; later calls of the same name pay
none of it. Read per rank, once, for checks/first_call.py (both forms of the diagnosis share it).

Named host operations: host spans (Kineto cpu_op / user_annotation / python_function rows,
recorder spans), and CUDA runtime calls, a launch call named with the kernel it launched (joined
by correlation id: the first launch of a kernel loads its module). Left out: declared waits
(input_starvation's), compilation, GC and checkpoint spans (their checks name them), and
synchronizing, allocator and copy calls, whose length is the GPU's queue, the allocator's or the
bytes moved, not a first call's (allocator_churn, sync_stall and transfer_stall read them).

A first call is one-time when its name has at least `first_call_min_later` later calls (calls
starting after it ended), it took at least `first_call_factor` x their median and
`first_call_over_longest` x the longest of them (no later call comes near it: a length that
recurs, an op's input of that size again, is not paid once), and at least `first_call_min_ns` more
than the median. The recording
may start mid-run: "first" is the first in this recording, which the evidence says.
Only the outermost of nested first calls on a thread counts (the first `linalg_vector_norm`
holds its first launch of the reduce kernel: one cost, not two).

What a first call explains (`claims`): its duration less the typical call, placed on the GPU's
idle time inside the call (a cost the queued work covered cost nothing), the earliest idle
first, up to that amount; without GPU activity for the step (host-only), the call's first that
many ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import measures
from .evidence import launch_rows_at, per_rank
from .fast import searchsorted
from .types import Intervals

COPY_CALL = re.compile(r"mem(cpy|set)", re.IGNORECASE)  # cudaMemcpyAsync, cuMemsetD32, hipMemcpy...


@dataclass(frozen=True)
class FirstCalls:
    """The rank's one-time first calls (outermost only), in start order."""

    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray  # object: the op's name, or "call (kernel)" for a launch
    runtime: np.ndarray  # bool: a CUDA runtime call (else a host span)
    typical_ns: np.ndarray  # median of the name's later calls
    later: np.ndarray  # how many later calls

    @property
    def one_time_ns(self) -> np.ndarray:
        return (self.end - self.start) - self.typical_ns


def _first_and_later(key: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Per distinct key: (its first row, the median and the longest duration of its later calls,
    their count). A later call starts at or after the first call's end: a call of the same name
    nested inside the first (an op dispatching to itself) is part of it, not a later call."""
    _, g = np.unique(key, return_inverse=True)
    g = g.reshape(-1)
    order = np.lexsort((start, g))
    gs = g[order]
    head = np.ones(gs.size, bool)
    head[1:] = gs[1:] != gs[:-1]
    first = order[head]  # in group order
    later = np.flatnonzero(start >= end[first][g])
    dur = end - start
    o2 = np.lexsort((dur[later], g[later]))
    lg, ld = g[later][o2], dur[later][o2]
    groups = np.arange(first.size)
    lo = searchsorted(lg, groups, side="left")
    cnt = searchsorted(lg, groups, side="right") - lo
    if ld.size == 0:
        z = np.zeros(first.size, np.int64)
        return first, z, z, cnt
    a = ld[np.clip(lo + (cnt - 1) // 2, 0, ld.size - 1)]
    b = ld[np.clip(lo + cnt // 2, 0, ld.size - 1)]
    longest = ld[np.clip(lo + cnt - 1, 0, ld.size - 1)]
    has = cnt > 0
    return first, np.where(has, (a + b) // 2, 0).astype(np.int64), np.where(has, longest, 0).astype(np.int64), cnt


def of_rank(ev, opts) -> FirstCalls:
    """The rank's one-time first calls (once per evidence object and thresholds)."""
    knobs = (opts.first_call_factor, opts.first_call_over_longest, opts.first_call_min_later, opts.first_call_min_ns)
    return per_rank(ev, "first_calls", lambda: _of_rank(ev, opts), key=knobs)


def _of_rank(ev, opts) -> FirstCalls:
    # Host spans, less the ones other checks name.
    sp = np.flatnonzero(~(ev.span_is_wait | ev.span_is_compile | ev.span_is_gc | ev.span_is_checkpoint))
    s_key = ev.span_name.codes[sp].astype(np.int64)
    # Runtime calls, less syncs, allocator and copy calls; a launch keyed with its kernel's name.
    kern = np.full(ev.rt_start.size, -1, np.int64)
    rows, ok = launch_rows_at(ev, ev.k_corr, ev.k_start)
    kern[rows[ok]] = ev.k_name.codes[ok]
    copy = ev.rt_name.where(lambda n: bool(COPY_CALL.search(n))) if ev.rt_start.size else np.zeros(0, bool)
    rt = np.flatnonzero(~(ev.rt_sync | ev.rt_alloc | copy))
    nk = np.int64(len(ev.k_name.dictionary) + 1)
    r_key = np.int64(len(ev.span_name.dictionary)) + ev.rt_name.codes[rt].astype(np.int64) * nk + (kern[rt] + 1)
    key = np.concatenate([s_key, r_key])
    start = np.concatenate([ev.span_start[sp], ev.rt_start[rt]])
    end = np.concatenate([ev.span_end[sp], ev.rt_end[rt]])
    thread = np.concatenate([ev.span_thread[sp], ev.rt_thread[rt]])
    is_rt = np.concatenate([np.zeros(sp.size, bool), np.ones(rt.size, bool)])
    src_row = np.concatenate([sp, rt])
    if key.size:
        first, typical, longest, cnt = _first_and_later(key, start, end)
        d = end[first] - start[first]
        keep = ((cnt >= opts.first_call_min_later) & (d >= opts.first_call_factor * typical)
                & (d >= opts.first_call_over_longest * longest) & (d - typical >= opts.first_call_min_ns))
        first, typical, cnt = first[keep], typical[keep], cnt[keep]
    else:
        first = typical = cnt = np.zeros(0, np.int64)
    # Outermost only: a first call inside another of the same thread is part of its cost.
    order = np.lexsort((-end[first], start[first], thread[first]))
    kept: list[int] = []
    for i in order.tolist():  # one-time first calls are few (one per name at most)
        j = first[i]
        if kept and thread[first[kept[-1]]] == thread[j] and end[first[kept[-1]]] >= end[j] and start[first[kept[-1]]] <= start[j]:
            continue
        kept.append(i)
    sel = np.array(sorted(kept, key=lambda i: (int(start[first[i]]), int(first[i]))), np.int64)
    f = first[sel] if sel.size else np.zeros(0, np.int64)
    names = np.array([_name(ev, bool(is_rt[r]), int(src_row[r]), int(kern[src_row[r]]) if is_rt[r] else -1) for r in f.tolist()], object)
    out = FirstCalls(start[f], end[f], thread[f], names, is_rt[f], typical[sel] if sel.size else np.zeros(0, np.int64),
                     cnt[sel] if sel.size else np.zeros(0, np.int64))
    return out


def _name(ev, runtime: bool, row: int, kernel: int) -> str:
    if not runtime:
        return str(ev.span_name[row])
    call = str(ev.rt_name[row])
    return f"{call} ({ev.k_name.dictionary[kernel]})" if kernel >= 0 else call


def claims(fc: FirstCalls, ev, rows: np.ndarray, kernels: bool) -> Intervals:
    """What the first calls `rows` explain: each its one-time ns, on the GPU's idle time inside it
    (earliest first), or, host-only, its first that many ns."""
    parts_s, parts_e = [], []
    for i in rows.tolist():  # a handful
        s, e, budget = int(fc.start[i]), int(fc.end[i]), int(fc.one_time_ns[i])
        if not kernels:
            parts_s.append(np.array([s], np.int64))
            parts_e.append(np.array([s + budget], np.int64))
            continue
        idle = measures.subtract(measures.as_intervals([s], [e]), ev.busy) if len(ev.busy) else measures.as_intervals([s], [e])
        ln = idle.end_ns - idle.start_ns
        before = np.concatenate([[0], np.cumsum(ln)[:-1]])
        take = np.clip(budget - before, 0, ln)
        keep = take > 0
        parts_s.append(idle.start_ns[keep])
        parts_e.append(idle.start_ns[keep] + take[keep])
    if not parts_s:
        return measures.empty()
    return measures.union(np.concatenate(parts_s), np.concatenate(parts_e))
