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

Without GPU activity (a CPU-only program, a capture with no GPU source; issue 34: a check
attributes what its evidence shows) the step thread's own run-queue wait is the evidence and
the step's wall is what it stretched (not in a GPU program's step outside every CUPTI window:
there the GPU may have hidden it, and the check stays unresolved): it is placed on the step's time outside declared waits,
from the step's start (counters read at two moments cannot say where in between the thread
waited; the evidence says so), labelled "basis: host-only". Where no samples bracket the step
closely (a sidecar samples every 0.5 s, not at step boundaries), the thread's counters are
interpolated linearly between the samples around it, up to INTERPOLATE_MAX_SPACING_NS apart
(the evidence names the spacing). What stays open: whether it delayed a GPU (none observed).
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import UNRESOLVED, StepsInput, StepFindings, answer, uniform
from ..evidence import launching_threads, step_sched
from ..fast import searchsorted
from ..types import Finding, Intervals
from . import base_steps
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "cpu_contention"
# Run-queue wait below this fraction of the step is scheduler noise (a context switch or two).
MIN_FRACTION = 0.02
# Host-only reading: samples around a step farther apart than this are too coarse to give the
# step a share of the wait between them (the sidecar samples every 0.5 s, backing off to 8 s).
INTERPOLATE_MAX_SPACING_NS = 2_000_000_000
HOST_ONLY = ("host-only: no GPU activity observed; the step thread's run-queue wait stretched the step "
             "(placed from the step's start outside declared waits: where in the step it waited is not known)")
OPEN = "whether the wait delayed GPU work: no GPU activity observed"
# A GPU program's step outside every CUPTI window: the GPU may have hidden the wait (a host ahead
# of its GPU waits for a CPU at no cost: measured on the H200 GC capture, 0.7 ms of run-queue wait
# in 1.8 ms steps no longer than the others), so the wait is not placed on the step.
OUTSIDE_WINDOW = "GPU activity for this step (kernels not observed: CUPTI armed in windows): whether the GPU hid the wait"


def _sources_missing(src) -> list[str]:
    """What the check lacks: scheduler samples only (without GPU activity it reads the host)."""
    return [] if src.sched else ["scheduler samples (sched not observed)"]


def interpolated(ev, tid: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, runqueue_wait_ns, spacing_ns) per window [lo, hi) of thread `tid`: its cumulative
    run-queue wait interpolated linearly between the samples around each end, where samples
    with counters bracket the window no more than INTERPOLATE_MAX_SPACING_NS apart."""
    n = np.shape(lo)[0]
    s = ev.sched.get(int(tid))
    zero = np.zeros(n, np.int64)
    if s is None:
        return np.zeros(n, bool), zero, zero
    known = np.isfinite(s.runqueue_wait_ns)
    ts, rq = s.ts_ns[known], s.runqueue_wait_ns[known]
    if ts.size < 2:
        return np.zeros(n, bool), zero, zero
    i0 = searchsorted(ts, lo, side="right") - 1
    i1 = searchsorted(ts, hi, side="left")
    ok = (i0 >= 0) & (i1 < ts.size)
    a, b = np.clip(i0, 0, ts.size - 1), np.clip(i1, 0, ts.size - 1)
    spacing = np.maximum(ts[np.minimum(a + 1, ts.size - 1)] - ts[a], ts[b] - ts[np.maximum(b - 1, 0)])
    ok &= spacing <= INTERPOLATE_MAX_SPACING_NS
    wait = np.interp(hi.astype(float), ts.astype(float), rq) - np.interp(lo.astype(float), ts.astype(float), rq)
    return ok, np.where(ok, np.maximum(wait, 0), 0).astype(np.int64), np.where(ok, spacing, 0)


def _host_only(ci: CheckInput) -> Finding:
    """describe() without GPU activity: the step thread's wait over the step, on its time."""
    ev, step = ci.rank.ev, ci.step
    tid = int(step.thread_id)
    st = step_sched(ev, tid, step.start_ns, step.end_ns)
    lo, hi = np.array([step.start_ns]), np.array([step.end_ns])
    if st is not None:
        wait, basis = int(st["runqueue_wait_ns"]), "samples at the step's boundaries"
    else:
        ok, w, spacing = interpolated(ev, tid, lo, hi)
        if not ok[0]:
            return unresolved(NAME, [_unsampled([tid])], threads=[tid])
        wait, basis = int(w[0]), f"interpolated between samples {int(spacing[0]) / 1e6:.0f} ms apart"
    evidence = {"basis": HOST_ONLY, "runqueue_wait_ns": wait, "thread_id": tid, "counters": basis,
                "sentence": f"runnable, not running: {wait / 1e6:.3f} ms", "open": OPEN}
    if wait < max(ci.rank.opts.min_gap_ns, MIN_FRACTION * step.wall_ns):
        return not_applicable(NAME, **evidence)
    free = measures.subtract(measures.as_intervals([step.start_ns], [step.end_ns]),
                             measures.clip(ev.wait_union, step.start_ns, step.end_ns))
    claimed = _first(free, wait)
    evidence["placed_ns"] = claimed.total_ns
    return attributed(NAME, claimed, **evidence)


def _first(iv: Intervals, amount: int) -> Intervals:
    """The first `amount` ns of a disjoint union, in time order."""
    return measures.first_per_group(iv, np.zeros(len(iv), np.int64), np.array([amount], np.int64))


def _iv_of(s: np.ndarray, e: np.ndarray) -> Intervals:
    return Intervals(np.asarray(s, np.int64), np.asarray(e, np.int64))


def _unsampled(threads: list[int]) -> str:
    return f"scheduler counters of threads {threads} at the step's boundaries"


def describe(ci: CheckInput) -> Finding:
    ev, step, src = ci.rank.ev, ci.step, ci.rank.src
    missing = _sources_missing(src)
    if missing:
        return unresolved(NAME, missing)
    if not src.kernels:
        return unresolved(NAME, [OUTSIDE_WINDOW]) if src.gpu_outside_window else _host_only(ci)
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
    if wait < max(ci.rank.opts.min_gap_ns, MIN_FRACTION * step.wall_ns):
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
    if take.sum() < ci.rank.opts.min_gap_ns:
        evidence["note"] = "the thread waited for a CPU but the GPU stayed busy: the wait was hidden"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, Intervals(s[o], e[o]), **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev, opts = si.frame, si.rank.ev, si.rank.opts
    n = fr.n
    missing = _sources_missing(si.rank.src)
    if missing:
        return uniform(NAME, n, UNRESOLVED, tuple(missing))
    if not si.rank.src.kernels:
        return uniform(NAME, n, UNRESOLVED, (OUTSIDE_WINDOW,)) if si.rank.src.gpu_outside_window else _host_only_steps(si)
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
    first = searchsorted(kk, kk, side="left")
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
    own = searchsorted(threads, fr.tids[rows])
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


def _host_only_steps(si: StepsInput) -> StepFindings:
    """_host_only for every step of a rank at once."""
    fr, ev, opts = si.frame, si.rank.ev, si.rank.opts
    n = fr.n
    wait = np.full(n, -1, np.int64)
    tids = np.unique(fr.tids).tolist()
    for tid in tids:  # threads are few
        m = slice(None) if len(tids) == 1 else fr.tids == tid  # one thread (the usual case): no masked copies
        ok, _, rq, _ = base_steps.step_sched(ev, tid, fr.starts[m], fr.ends[m])
        iok, iw, _ = interpolated(ev, tid, fr.starts[m], fr.ends[m])
        wait[m] = np.where(ok, rq, np.where(iok, iw, -1))
    sampled = wait >= 0
    applicable = sampled & ~(wait < np.maximum(opts.min_gap_ns, MIN_FRACTION * fr.wall))
    # The free time of the applicable steps only (the steps are disjoint, and split cuts at their
    # boundaries, so these are the same pieces as the whole frame's, kept where applicable).
    win = _iv_of(fr.starts[applicable], fr.ends[applicable])
    free, k = fr.split(measures.subtract(win, ev.wait_union) if len(ev.wait_union) else win)
    out = answer(NAME, fr, applicable, measures.first_per_group(free, k, wait))
    rows = np.flatnonzero(~sampled)
    if rows.size:
        out.verdict[rows] = UNRESOLVED
        for tid in np.unique(fr.tids[rows]).tolist():
            out.missing.append((_unsampled([int(tid)]),))
            out.missing_code[rows[fr.tids[rows] == tid]] = len(out.missing) - 1
    return out
