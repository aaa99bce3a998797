"""How far the host runs ahead of the GPU, and the lead a step's syncs find already taken (issue 34).

A host ahead of the GPU has queued work: the lead at a time t is the GPU busy time from t to
the end of the last activity whose launch call had returned by t (each activity joined to its
call by correlation id, session-aware: evidence.launch_rows_at). After a sync the queue is
empty and every launch until the host is ahead again runs on an idle GPU (checks/base.refill_end).

A run of steps with syncs (a sync per layer on steps 40-45) starts each step after the first
without the lead the host would have had: the previous step's syncs took it, and the host
had no sync-free step to rebuild it in. The steps without any sync show that lead: the median
lead at their starts (`typical`). So a step with syncs that follows a step with syncs is owed
`max(0, typical - its lead at start)`: without the syncs of the run the host would have been
that much further ahead when the step began, and the idle after its first sync's return is the
syncs' up to the lead they took in the step plus what they are owed (checks/base.refill_end's
set bound). Nothing is owed on a run's first step (its syncs found the host's own lead and took
it: set_lead counts it), on a step after a sync-free one, or where fewer than
`min_comparable_steps` comparable sync-free steps with GPU evidence show the typical lead (a
program that syncs every step never shows how far ahead it would run without).
"""

from __future__ import annotations

import numpy as np

from . import measures
from .evidence import RankEvidence, launch_rows_at
from .fast import searchsorted

def _queued_ends(ev: RankEvidence) -> tuple[np.ndarray, np.ndarray]:
    """(launch returns ascending, the latest end of any activity launched by then): the rank's
    GPU activities (kernels, copies, memsets) joined to their launch calls (read once per rank)."""
    gs = np.concatenate([ev.k_start, ev.copies.start])
    ge = np.concatenate([ev.k_end, ev.copies.end])
    corr = np.concatenate([ev.k_corr, ev.copies.corr]).astype(np.int64)
    rows, ok = launch_rows_at(ev, corr, gs)
    ret = ev.rt_end[rows[ok]] if ev.rt_end.size else np.zeros(0, np.int64)
    ends = ge[ok]
    order = np.argsort(ret, kind="stable")
    return ret[order], np.maximum.accumulate(ends[order]) if ends.size else ends


def lead_at(ev: RankEvidence, t: np.ndarray) -> np.ndarray:
    """Per time: the GPU work queued ahead of the host (busy time from t to the end of the last
    activity launched by t); 0 where nothing launched by then was still to run."""
    t = np.asarray(t, np.int64)
    ret, q = _queued_ends(ev)
    if ret.size == 0 or t.size == 0:
        return np.zeros(t.size, np.int64)
    j = searchsorted(ret, t, side="right") - 1
    qend = np.where(j >= 0, q[np.maximum(j, 0)], t)
    return measures.covered_between(ev.busy, t, np.maximum(qend, t))


def owed(ev: RankEvidence, starts: np.ndarray, has_sync: np.ndarray, comparable: np.ndarray) -> np.ndarray:
    """Per step (any order): the lead a step with syncs is owed by the previous step's syncs
    (module docstring). `has_sync`: a synchronizing call overlaps the step; `comparable`: the
    step counts for the typical lead (past warm-up, GPU activity recorded there)."""
    n = starts.size
    out = np.zeros(n, np.int64)
    free = comparable & ~has_sync
    if n < 2 or int(free.sum()) < 3 or not has_sync.any():
        return out
    lead = lead_at(ev, starts)
    typical = int(np.median(lead[free]))
    order = np.argsort(starts, kind="stable")
    prev_sync = np.zeros(n, bool)
    prev_sync[order[1:]] = has_sync[order[:-1]]
    run = has_sync & prev_sync
    out[run] = np.maximum(0, typical - lead[run])
    return out


def owed_of_steps(ev: RankEvidence, starts: np.ndarray, ends: np.ndarray, warmup_steps: int,
                  covered: np.ndarray | None) -> np.ndarray:
    """owed() for a rank's steps: a step has a sync where a synchronizing call overlaps it, and
    counts for the typical lead past the rank's first `warmup_steps` steps and inside a GPU
    window (`covered`, None: every step)."""
    n = starts.size
    if n == 0:
        return np.zeros(0, np.int64)
    has_sync = measures.covered_between(ev.sync_union, starts, ends) > 0
    pos = np.empty(n, np.int64)
    pos[np.argsort(starts, kind="stable")] = np.arange(n)
    comparable = pos >= warmup_steps
    if covered is not None:
        comparable &= covered
    return owed(ev, starts, has_sync, comparable)
