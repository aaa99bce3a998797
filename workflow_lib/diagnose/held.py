"""Held time (issue 34): the program's launched, ready GPU work waited while none of its own
work ran on the GPU. The GPU was running something the program's record does not hold:
another process time-slicing it, or, where the record is incomplete, work of this program
that the record dropped. So held time is read only where the record is shown complete.

Per GPU activity (kernel, copy, memset) joined to its launch call by correlation id: it is
ready at max(the launch call's return, the end of the work before it on its stream); the time
from ready to its start, where at least HELD_MIN_NS, is a wait. Held time is the union of the
waits less the GPU busy time (any of the program's work running on any stream).

Completeness, what must hold for a step's held time to be read (checks/kernel_slowdown.py):
- the capture lost no GPU or runtime record (Sources.gpu_loss: ring wrap-around, unread
  CUPTI buffers, CUPTI errors, where the capture counted them; Kineto records none);
- every launch call overlapping the step has its GPU record (a launch without one is a
  dropped record: its work ran unseen);
- the rank's streams keep their order (no activity starts more than STREAM_OVERLAP_NS before
  the work ahead of it on its stream ended: ready times are read from that order), and the
  GPU->host clock uncertainty, where measured, is under a tenth of HELD_MIN_NS;
- the rank's runtime record is not launch calls only: a program makes other CUDA calls
  (synchronizations, event and stream calls, allocations); a record of launches alone was
  filtered or cut out of a larger trace (HTA's sampled trace filter), and the kernels left
  out with their launches leave no trace in the correlation: their time reads as held.
What held time cannot tell: a stream waiting on a host function launched on it
(cudaLaunchHostFunc) or on another device's event also holds ready work with the GPU idle, and
neither is GPU activity in the record (evidence `why.held_by` says so).
Correlation ids repeat after CUPTI is detached and attached again between the recorder's GPU
windows; an activity is joined to the latest launch call with its id that started before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import measures
from .evidence import launch_rows_at, per_rank
from .types import Intervals

# A launched activity waiting this long with none of the program's work running is not the
# queue's own latency (launch to start on an idle H200 is 5-20 us; back-to-back kernels leave
# 1-5 us): the GPU was doing something else.
HELD_MIN_NS = 100_000
# Activities on one stream run one after another: an overlap larger than the records' rounding
# (Kineto writes microseconds; copies' timestamps jitter by ~1 us) contradicts the stream's order.
STREAM_OVERLAP_NS = 5_000
LAUNCHES_ONLY = ("the rank's runtime record holds launch calls only (filtered or cut from a larger trace): work "
                 "dropped with its launches would read as held")


@dataclass(frozen=True)
class Held:
    """One rank's held time and what its completeness rests on."""

    time: Intervals  # held intervals (relative ns), disjoint
    launch_ok: np.ndarray  # per runtime row: not a launch, or a launch with its GPU record
    rank_gaps: tuple  # reasons the whole rank's record is not complete (empty: complete)


def of_rank(ev, src) -> Held:
    """The rank's held time (once per evidence object: the batched and per-step forms share it)."""
    return per_rank(ev, "held", lambda: _of_rank(ev, src))


def _of_rank(ev, src) -> Held:
    gs = np.concatenate([ev.k_start, ev.copies.start])
    ge = np.concatenate([ev.k_end, ev.copies.end])
    stream = np.concatenate([ev.k_stream, ev.copies.stream])
    corr = np.concatenate([ev.k_corr, ev.copies.corr]).astype(np.int64)
    rows, ok = launch_rows_at(ev, corr, gs)
    launch_ok = ~ev.rt_launch
    launch_ok[rows[ok]] = True
    # The end of the work before each activity on its stream (in start order).
    prev = np.full(gs.size, np.iinfo(np.int64).min, np.int64)
    for sid in np.unique(stream).tolist():  # streams are few
        m = np.flatnonzero(stream == sid)
        m = m[np.argsort(gs[m], kind="stable")]
        prev[m[1:]] = np.maximum.accumulate(ge[m])[:-1]
    first = prev == np.iinfo(np.int64).min  # nothing ahead on its stream
    disordered = int((~first & (prev - np.where(first, 0, gs) > STREAM_OVERLAP_NS)).sum())
    ready = np.where(ok, np.maximum(ev.rt_end[rows] if ev.rt_end.size else prev, prev), np.iinfo(np.int64).max)
    wait = ok & (gs - ready >= HELD_MIN_NS)
    held = measures.subtract(measures.union(ready[wait], gs[wait]), ev.busy) if wait.any() else measures.empty()
    gaps = tuple(src.gpu_loss)
    if ev.rt_launch.size and bool(ev.rt_launch.all()):
        gaps += (LAUNCHES_ONLY,)
    if disordered:
        gaps += (f"{disordered} GPU activities start before the work ahead of them on their stream ended: the record's "
                 "streams do not keep their order (stream ids not recorded, or records merged), so when work was "
                 "ready cannot be read",)
    if ev.clock_uncertainty_ns is not None and ev.clock_uncertainty_ns > HELD_MIN_NS // 10:
        gaps += (f"GPU->host clock uncertainty {ev.clock_uncertainty_ns} ns: a {HELD_MIN_NS // 1000} us wait between a "
                 "launch call and its kernel cannot be timed",)
    out = Held(held, launch_ok, gaps)
    return out


def launches_unmatched(ev, h: Held, lo: int, hi: int) -> int:
    """Launch calls overlapping [lo, hi) without their GPU record."""
    rows = ev.rt_index.overlapping(lo, hi)
    return int((~h.launch_ok[rows]).sum())
