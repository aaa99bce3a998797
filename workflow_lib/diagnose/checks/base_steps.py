"""The helpers of checks/base.py for all steps of a rank at once (diagnose/batch.py).

Each gives, for every step, what its per-step namesake gives for one: the same rule, read
from the same evidence, over arrays of steps instead of one window.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import UNRESOLVED, StepFrame, StepsInput, answer, uniform
from ..lanes import Lanes
from ..fast import searchsorted
from ..types import Intervals
from .base import next_gpu_start, next_host_start, refill_end, set_lead


def calls_of(si: StepsInput, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(call rows, steps they overlap) for the rank's host CUDA calls where `kind` holds, one
    pair per call and step (checks/base.calls_in_step for all steps)."""
    ev = si.rank.ev
    rows = np.flatnonzero(kind)
    which, k = si.frame.overlapping(ev.rt_start[rows], ev.rt_end[rows])
    return rows[which], k


def has_any(frame: StepFrame, step_of_pair: np.ndarray) -> np.ndarray:
    return np.bincount(step_of_pair, minlength=frame.n)[: frame.n] > 0


def _thread_step_keys(tid: np.ndarray, k: np.ndarray, threads: np.ndarray) -> np.ndarray:
    return k.astype(np.int64) * (threads.size + 1) + searchsorted(threads, tid)


def call_windows(si: StepsInput, rows: np.ndarray, pair_rows: np.ndarray, pair_steps: np.ndarray,
                 refill: bool = False, owed: bool = False) -> tuple[Intervals, Intervals]:
    """checks/base.call_windows for every step at once: `rows` are the calls (each once) and
    (pair_rows, pair_steps) the steps each overlaps. Returns (blocked, windows) as disjoint
    unions inside the steps the calls overlap: lane_call_windows with one lane per step, each
    step taking the calls that overlap it (a call's window runs on only in the last of them)."""
    del rows  # the pairs name every call with each step it overlaps
    lanes = Lanes.of_steps(si.frame, np.unique(pair_steps))
    return lane_call_windows(si, lanes, pair_rows, searchsorted(lanes.step, pair_steps), refill, owed)


def call_cause(si: StepsInput, check: str, kind: np.ndarray, less_allocator: bool = False, refill: bool = False):
    """The batched form of a call-shaped cause (allocator_churn, sync_stall): GPU idle in the
    call windows (call_windows) of the calls where `kind` holds, attributed where a step has
    such a call and at least min_gap_ns of it; `less_allocator`: allocator time outside these
    calls is not theirs, `refill`: the refill after a sync is the sync's (sync_stall's rules)."""
    gate = needs_calls_and_kernels(si, check)
    if gate is not None:
        return gate
    fr, ev = si.frame, si.rank.ev
    pr, pk = calls_of(si, kind)
    blocked, windows = call_windows(si, np.unique(pr), pr, pk, refill, owed=refill)
    if less_allocator and len(ev.alloc_union):
        windows = measures.subtract(windows, measures.subtract(fr.pieces(ev.alloc_union), blocked))
    claimed = measures.intersect(si.base.idle, windows)
    return answer(check, fr, has_any(fr, pk) & (fr.per_step(claimed) >= si.rank.opts.min_gap_ns), claimed)


def needs_calls_and_kernels(si: StepsInput, check: str):
    """checks/base.needs_calls_and_kernels for all steps (a source is absent for the rank)."""
    missing = []
    if not si.rank.src.runtime_api:
        missing.append("host CUDA API calls (runtime_api not observed)")
    if not si.rank.src.kernels:
        missing.append("GPU activity (kernels not observed)")
    return uniform(check, si.frame.n, UNRESOLVED, tuple(missing)) if missing else None


def host_gaps(si: StepsInput) -> tuple[Intervals, np.ndarray]:
    """checks/base.host_gaps for all steps: GPU idle gaps (>= min_gap_ns) outside synchronizing,
    allocator and declared-wait time, as pieces with their step."""
    ev = si.rank.ev
    cand = subtract_sparse(si.base.idle_long, measures.union_many(ev.sync_union, ev.alloc_union, ev.wait_union))
    p, k = si.frame.split(cand)
    keep = (p.end_ns - p.start_ns) >= si.rank.opts.min_gap_ns
    return Intervals(p.start_ns[keep], p.end_ns[keep]), k[keep]


def subtract_sparse(a: Intervals, b: Intervals) -> Intervals:
    """measures.subtract(a, b) for a rank's per-step pieces `a`: only the pieces that meet `b`
    go through the sweep (few, where `b` is sync calls or declared waits), the rest are kept
    as they are. The same set; pieces that touch at a step boundary stay apart (StepFrame.split
    cuts them there anyway)."""
    if len(a) == 0 or len(b) == 0:
        return a
    touched = measures.covered_between(b, a.start_ns, a.end_ns) > 0
    if not touched.any():
        return a
    cut = measures.subtract(Intervals(a.start_ns[touched], a.end_ns[touched]), b)
    s = np.concatenate([a.start_ns[~touched], cut.start_ns])
    e = np.concatenate([a.end_ns[~touched], cut.end_ns])
    order = np.argsort(s, kind="stable")
    return Intervals(s[order], e[order])


def covers(start_ns: np.ndarray, end_ns: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time: whether any of the intervals (rows sorted by start, overlapping or not) holds
    it, start <= t < end as IntervalIndex.containing: the running maximum of the ends of the
    rows starting at or before t is past t. No union, so no sort."""
    if start_ns.size == 0:
        return np.zeros(np.shape(t), bool)
    j = searchsorted(start_ns, t, side="right") - 1
    return (j >= 0) & (t < np.maximum.accumulate(end_ns)[np.maximum(j, 0)])


def step_sched(ev, tid: int, lo: np.ndarray, hi: np.ndarray):
    """evidence.step_sched for many windows [lo, hi) of one thread: (bracketed, cpu_ns,
    runqueue_wait_ns, span_ns) per window, with the same nearest-sample rule and tolerance;
    the counters are 0 where not bracketed."""
    n = np.shape(lo)[0]
    zero = np.zeros(n, np.int64)
    s = ev.sched.get(int(tid))
    if s is None or s.ts_ns.size < 2:
        return np.zeros(n, bool), zero, zero, zero
    ts, m = s.ts_ns, s.ts_ns.size
    tol = np.maximum((hi - lo) // 10, 200_000)
    # The sample nearest each boundary (ties to the one before the start, after the end).
    i0 = searchsorted(ts, lo, side="right") - 1
    nxt = np.minimum(i0 + 1, m - 1)
    i0 = i0 + ((i0 + 1 < m) & ((i0 < 0) | (np.abs(ts[nxt] - lo) < np.abs(lo - ts[np.maximum(i0, 0)]))))
    i1 = searchsorted(ts, hi, side="left")
    prev = np.maximum(i1 - 1, 0)
    i1 = i1 - ((i1 - 1 >= 0) & ((i1 >= m) | (np.abs(hi - ts[prev]) < np.abs(ts[np.minimum(i1, m - 1)] - hi))))
    ok = (i0 >= 0) & (i1 < m) & (i1 > i0)
    a, b = np.clip(i0, 0, m - 1), np.clip(i1, 0, m - 1)
    ok &= (np.abs(ts[a] - lo) <= tol) & (np.abs(ts[b] - hi) <= tol)
    dcpu = s.cpu_time_ns[b] - s.cpu_time_ns[a]
    drq = s.runqueue_wait_ns[b] - s.runqueue_wait_ns[a]
    ok &= np.isfinite(dcpu) & np.isfinite(drq)
    # int(max(d, 0)) of the per-step form: truncation of a non-negative float.
    cpu = np.where(ok, np.maximum(np.nan_to_num(dcpu), 0), 0).astype(np.int64)
    rq = np.where(ok, np.maximum(np.nan_to_num(drq), 0), 0).astype(np.int64)
    return ok, cpu, rq, np.where(ok, ts[b] - ts[a], 0)


def lane_call_windows(si: StepsInput, lanes, rows: np.ndarray, lane: np.ndarray,
                      refill: bool = False, owed: bool = False) -> tuple[Intervals, Intervals]:
    """checks/base.call_windows for many call sets at once: set g is the calls rows[lane == g],
    taken inside the step of lane g (diagnose/lanes.py) as the per-step rule takes the calls
    it is given, also one outside the step (a copy issued in the step before). Returns
    (blocked, windows) on the lanes' timeline."""
    ev, fr = si.rank.ev, si.frame
    s, e, tid = ev.rt_start[rows], ev.rt_end[rows], ev.rt_thread[rows]
    hi = fr.ends[lanes.step[lane]]
    stop = np.minimum(next_gpu_start(ev, e, hi), next_host_start(ev, tid, e, hi))
    blocked = lanes.place(s, e, lane)
    if refill and e.size:
        sh = lanes.shift
        piece_lane = searchsorted(lanes.base, blocked.start_ns, side="right") - 1
        lead = set_lead(ev, blocked, sh[piece_lane], lanes.base[lane], np.minimum(e, hi) + sh[lane], sh[lane])
        if owed and si.lead_owed is not None:
            lead = lead + si.lead_owed[lanes.step[lane]]
        first = np.full(lanes.n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first, lane, e)
        stop = np.maximum(stop, refill_end(ev, s, e, hi, lead, first[lane]))
    windows = lanes.place(s, np.maximum(stop, e), lane)
    if len(ev.wait_union):
        after = measures.subtract(windows, blocked)
        windows = measures.union_many(blocked, measures.subtract(after, lanes.lift(ev.wait_union)))
        # Declared waits of threads that made none of the set's calls are never a call's.
        w = np.flatnonzero(ev.span_is_wait)
        wi, wk = fr.overlapping(ev.span_start[w], ev.span_end[w])
        j, wl = lanes.lanes_of(wk)
        wi = w[wi[j]]
        if wi.size:
            threads = np.unique(np.concatenate([tid, ev.span_thread[wi]]))
            mine = np.isin(_thread_step_keys(ev.span_thread[wi], wl, threads), _thread_step_keys(tid, lane, threads))
            wi, wl = wi[~mine], wl[~mine]
            if wi.size:
                windows = measures.subtract(windows, lanes.place(ev.span_start[wi], ev.span_end[wi], wl))
    return blocked, windows
