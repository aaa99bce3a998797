"""cpu_contention: a thread that launches the step's GPU work was runnable but not running
(waiting in the CPU run queue) during the step, and the GPU idled for want of its launches.

Evidence required: scheduler counters (run-queue wait ns) of the step's own thread and of
every thread that issued launch calls in it (the autograd thread included), sampled at the
step's boundaries (the recorder marks them; periodic samples count when they fall within
max(10% of the step, 200 us) of each boundary), plus GPU activity. No per-gap brackets: the
wait over the step is the evidence ("runnable, not running: N ms").
Explains: up to the largest per-thread run-queue wait, placed on the step's GPU idle gaps
outside declared waits (a thread blocked on a queue is sleeping, not runnable), longest gap
first - the gaps a descheduled submitter leaves. Resolved first: a runnable thread that is
not running stretches whatever it was doing (an allocator call, a spinning sync, Python), so
the measured run-queue wait names the cause of that much of the step before those do.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import UNRESOLVED, StepsInput, StepFindings, answer, uniform
from ..evidence import launching_threads, step_sched
from ..types import Finding, Intervals
from . import base_steps
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "cpu_contention"
# Run-queue wait below this fraction of the step is scheduler noise (a context switch or two).
MIN_FRACTION = 0.02


def _sources_missing(src) -> list[str]:
    missing = []
    if not src.sched:
        missing.append("scheduler samples (sched not observed)")
    if not src.kernels:
        missing.append("GPU activity (kernels not observed)")
    return missing


def _unsampled(threads: list[int]) -> str:
    return f"scheduler counters of threads {threads} at the step's boundaries"


def describe(ci: CheckInput) -> Finding:
    ev, step, src = ci.ev, ci.step, ci.src
    missing = _sources_missing(src)
    if missing:
        return unresolved(NAME, missing)
    threads = launching_threads(ev, step.start_ns, step.end_ns, step.thread_id)
    per = {}
    for tid in threads:
        st = step_sched(ev, tid, step.start_ns, step.end_ns)
        if st is not None:
            per[tid] = st
    if not per:
        return unresolved(NAME, [_unsampled(threads)], threads=threads)
    worst = max(per, key=lambda t: per[t]["runqueue_wait_ns"])
    wait = per[worst]["runqueue_wait_ns"]
    evidence = {
        "runqueue_wait_ns": int(wait),
        "thread_id": int(worst),
        "sentence": f"runnable, not running: {wait / 1e6:.3f} ms",
        "threads": {str(t): v for t, v in sorted(per.items())},
    }
    unsampled = [t for t in threads if t not in per]
    if unsampled:
        evidence["threads_not_sampled"] = unsampled
    if wait < max(ci.opts.min_gap_ns, MIN_FRACTION * step.wall_ns):
        return not_applicable(NAME, **evidence)
    gaps = ci.base.idle_long
    if len(ev.wait_union):
        gaps = measures.subtract(gaps, measures.clip(ev.wait_union, step.start_ns, step.end_ns))
    lengths = gaps.end_ns - gaps.start_ns
    order = np.argsort(-lengths, kind="stable")
    take = np.clip(wait - np.concatenate(([0], np.cumsum(lengths[order])[:-1])), 0, lengths[order])
    keep = take > 0
    s = gaps.start_ns[order][keep]
    e = s + take[keep]
    o = np.argsort(s)
    evidence["placed_on_gaps_ns"] = int(take.sum())
    if take.sum() < ci.opts.min_gap_ns:
        evidence["note"] = "the thread waited for a CPU but the GPU stayed busy: the wait was hidden"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, Intervals(s[o], e[o]), **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev, opts = si.frame, si.ev, si.opts
    n = fr.n
    missing = _sources_missing(si.src)
    if missing:
        return uniform(NAME, n, UNRESOLVED, tuple(missing))
    # launching_threads for every step: the step's thread and the threads of its launch calls.
    pr, pk = base_steps.calls_of(si, ev.rt_launch)
    ptid = ev.rt_thread[pr]
    threads = np.unique(np.concatenate([fr.tids, ptid]))
    launches = np.zeros((threads.size, n), bool)
    wait = np.full(n, -1, np.int64)  # the worst sampled thread's run-queue wait; -1: none sampled
    for j, tid in enumerate(threads.tolist()):  # threads are few
        launches[j] = base_steps.has_any(fr, pk[ptid == tid])
        ok, _, rq, _ = base_steps.step_sched(ev, tid, fr.starts, fr.ends)
        got = ok & (launches[j] | (fr.tids == tid))
        wait = np.where(got & (rq > wait), rq, wait)
    sampled = wait >= 0
    applicable = sampled & ~(wait < np.maximum(opts.min_gap_ns, MIN_FRACTION * fr.wall))
    # The wait placed on the step's idle gaps outside declared waits, longest gap first.
    gaps, gk = fr.split(base_steps.subtract_sparse(si.base.idle_long, ev.wait_union))
    on = applicable[gk]
    gs, length, gk = gaps.start_ns[on], (gaps.end_ns - gaps.start_ns)[on], gk[on]
    order = np.lexsort((np.arange(gk.size), -length, gk))
    ln, kk = length[order], gk[order]
    run = np.cumsum(ln)
    first = np.searchsorted(kk, kk, side="left")
    before = run - ln - (run[first] - ln[first])  # longer (or earlier equal) gaps of the same step
    take = np.empty_like(length)
    take[order] = np.clip(wait[kk] - before, 0, ln)  # back in time order
    placed = np.bincount(gk, weights=take, minlength=n)[:n]
    hit = applicable & (placed >= opts.min_gap_ns)
    keep = take > 0
    out = answer(NAME, fr, hit, Intervals(gs[keep], gs[keep] + take[keep]))
    _mark_unsampled(out, fr, ~sampled, threads, launches)
    return out


def _mark_unsampled(out: StepFindings, fr, where: np.ndarray, threads: np.ndarray, launches: np.ndarray) -> None:
    """Steps none of whose launching threads has counters: unresolved, naming the threads as
    describe() lists them (the step's own first, then the others ascending)."""
    rows = np.flatnonzero(where)
    if rows.size == 0:
        return
    own = np.searchsorted(threads, fr.tids[rows])
    others = launches[:, rows]
    others[own, np.arange(rows.size)] = False
    if threads.size <= 31:  # a thread list as one integer: the step's thread, a bit per other thread
        bits = (others.astype(np.int64) << np.arange(threads.size, dtype=np.int64)[:, None]).sum(axis=0)
        keys, inv = np.unique((own.astype(np.int64) << 32) | bits, return_inverse=True)
        lists = [(int(key) >> 32, [j for j in range(threads.size) if (int(key) >> j) & 1]) for key in keys]
    else:
        keys, inv = np.unique(np.column_stack([own, others.T]), axis=0, return_inverse=True)
        lists = [(int(key[0]), np.flatnonzero(key[1:]).tolist()) for key in keys]
    out.verdict[rows] = UNRESOLVED
    base = len(out.missing)
    for j0, js in lists:  # distinct thread lists: few
        out.missing.append((_unsampled([int(threads[j0])] + [int(threads[j]) for j in js]),))
    out.missing_code[rows] = base + inv.reshape(-1)
