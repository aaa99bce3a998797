"""The helpers of checks/base.py for all steps of a rank at once (diagnose/batch.py).

Each gives, for every step, what its per-step namesake gives for one: the same rule, read
from the same evidence, over arrays of steps instead of one window.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import StepFrame, StepsInput, uniform, UNRESOLVED
from ..lanes import Lanes
from ..types import Intervals
from .base import next_gpu_start, next_host_start

def calls_of(si: StepsInput, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(call rows, steps they overlap) for the rank's host CUDA calls where `kind` holds, one
    pair per call and step (checks/base.calls_in_step for all steps)."""
    ev = si.ev
    rows = np.flatnonzero(kind)
    which, k = si.frame.overlapping(ev.rt_start[rows], ev.rt_end[rows])
    return rows[which], k


def has_any(frame: StepFrame, step_of_pair: np.ndarray) -> np.ndarray:
    return np.bincount(step_of_pair, minlength=frame.n)[: frame.n] > 0


def _thread_step_keys(tid: np.ndarray, k: np.ndarray, threads: np.ndarray) -> np.ndarray:
    return k.astype(np.int64) * (threads.size + 1) + np.searchsorted(threads, tid)


def call_windows(si: StepsInput, rows: np.ndarray, pair_rows: np.ndarray, pair_steps: np.ndarray) -> tuple[Intervals, Intervals]:
    """checks/base.call_windows for every step at once: `rows` are the calls (each once) and
    (pair_rows, pair_steps) the steps each overlaps. Returns (blocked, windows) as disjoint
    unions inside the steps the calls overlap: lane_call_windows with one lane per step, each
    step taking the calls that overlap it (a call's window runs on only in the last of them)."""
    del rows  # the pairs name every call with each step it overlaps
    lanes = Lanes.of_steps(si.frame, np.unique(pair_steps))
    return lane_call_windows(si, lanes, pair_rows, np.searchsorted(lanes.step, pair_steps))


def needs_calls_and_kernels(si: StepsInput, check: str):
    """checks/base.needs_calls_and_kernels for all steps (a source is absent for the rank)."""
    missing = []
    if not si.src.runtime_api:
        missing.append("host CUDA API calls (runtime_api not observed)")
    if not si.src.kernels:
        missing.append("GPU activity (kernels not observed)")
    return uniform(check, si.frame.n, UNRESOLVED, tuple(missing)) if missing else None


def host_gaps(si: StepsInput) -> tuple[Intervals, np.ndarray]:
    """checks/base.host_gaps for all steps: GPU idle gaps (>= min_gap_ns) outside synchronizing,
    allocator and declared-wait time, as pieces with their step."""
    ev = si.ev
    cand = si.base.idle_long
    for u in (ev.sync_union, ev.alloc_union, ev.wait_union):
        if len(u):
            cand = measures.subtract(cand, u)
    p, k = si.frame.split(cand)
    keep = (p.end_ns - p.start_ns) >= si.opts.min_gap_ns
    return Intervals(p.start_ns[keep], p.end_ns[keep]), k[keep]


def lane_call_windows(si: StepsInput, lanes, rows: np.ndarray, lane: np.ndarray) -> tuple[Intervals, Intervals]:
    """checks/base.call_windows for many call sets at once: set g is the calls rows[lane == g],
    taken inside the step of lane g (diagnose/lanes.py) as the per-step rule takes the calls
    it is given, also one outside the step (a copy issued in the step before). Returns
    (blocked, windows) on the lanes' timeline."""
    ev, fr = si.ev, si.frame
    s, e, tid = ev.rt_start[rows], ev.rt_end[rows], ev.rt_thread[rows]
    hi = fr.ends[lanes.step[lane]]
    stop = np.minimum(next_gpu_start(ev, e, hi), next_host_start(ev, tid, e, hi))
    blocked = lanes.place(s, e, lane)
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
