"""host_submission: the GPU sat idle with nothing queued while the host was neither in a
synchronizing call, an allocator call nor a declared wait; the host was late to submit.

Tiered evidence, per gap (>= min_gap_ns):
  * required: runtime_api (which thread submits; that it was not in a sync) and GPU activity
    with correlation ids (nothing queued: the next GPU activity after the gap was launched
    after the gap began), and GPU->host clock uncertainty below
    `clock_uncertainty_max_fraction` of the gap (clock_sync rows; a Kineto import counts as one
    CUPTI timebase and is accepted with the uncertainty "not measured");
  * tier 1 (what the host did): the submitting thread was in user code at the gap - a host
    span or Python op, or a non-synchronizing CUDA call - so the gap is host work in that span.
    This needs no scheduler evidence;
  * tier 2 (on CPU or descheduled?): scheduler samples of the thread bracketing the gap within
    2x its length, else the thread's counters over the whole step (sampled at step boundaries).
    Without either, the host state stays unresolved and the evidence names what is missing;
    the gap is still host work.
A gap with neither a host span/call nor scheduler evidence is unresolved.
Explains: the attributed gaps.
"""

from __future__ import annotations

import numpy as np

from ..batch import ATTRIBUTED, NOT_APPLICABLE, UNRESOLVED, StepsInput, StepFindings, uniform
from ..evidence import RankEvidence, launch_rows_at, step_sched
from ..fast import searchsorted
from ..types import Finding, Intervals
from . import base_steps
from .base import CheckInput, attributed, host_gaps, not_applicable, unresolved

NAME = "host_submission"
_EXAMPLES = 5
_NO_KERNELS = "GPU activity (kernels not observed)"
_NO_CALLS = "host CUDA API calls (runtime_api not observed): cannot tell a late host from a sync"
# Why a gap stays unattributed (the step's missing evidence when no gap is attributed).
_NO_CORR = "correlation ids to tell whether work was queued"
_NO_CLOCK = "GPU->host clock uncertainty (clock_sync not observed)"
_NO_HOST = "a host span, Python op or CUDA call of the submitting thread at the gap, or scheduler samples of it"


def _wide_clock(unc: int, fraction: float, length: int) -> str:
    return f"clock uncertainty {unc} ns is not below {fraction} x the {length} ns gap"


def _queued(ev: RankEvidence, gap_start: np.ndarray, gap_end: np.ndarray) -> np.ndarray:
    """Per gap: 1 work was queued, 0 nothing queued, -1 unknown (no correlation to a launch)."""
    out = np.full(gap_start.size, -1, np.int64)
    if ev.gpu_start_sorted.size == 0:
        return out
    j = searchsorted(ev.gpu_start_sorted, gap_end, side="left")
    has_next = j < ev.gpu_start_sorted.size
    nxt = np.minimum(j, ev.gpu_start_sorted.size - 1)
    corr = np.where(has_next, ev.gpu_corr_sorted[nxt], -1)
    rows, known = launch_rows_at(ev, corr, ev.gpu_start_sorted[nxt])
    out[known] = (ev.rt_start[rows[known]] < gap_start[known]).astype(np.int64)
    # No GPU activity after the gap within the trace: nothing was queued.
    out[~has_next] = 0
    return out


def _submitting_thread(ev: RankEvidence, gap_start: np.ndarray, fallback: int) -> np.ndarray:
    """The thread of the last runtime call that began before each gap; the step's thread if none."""
    if ev.rt_start.size == 0:
        return np.full(gap_start.size, fallback, np.int64)
    i = searchsorted(ev.rt_start, gap_start, side="right") - 1  # rows are sorted by start
    return np.where(i >= 0, ev.rt_thread[np.maximum(i, 0)], fallback)


def _span_at(ev: RankEvidence, tid: int, t: int) -> str | None:
    """Deepest host span of thread `tid` containing time t."""
    idx = ev.span_index.containing(t)
    idx = idx[ev.span_thread[idx] == tid]
    if idx.size == 0:
        return None
    return str(ev.span_name[idx[np.argmax(ev.span_depth[idx])]])


def _call_at(ev: RankEvidence, tid: int, t: int) -> str | None:
    """Name of a non-synchronizing runtime/driver call of thread `tid` running at time t."""
    idx = ev.rt_index.containing(t)
    idx = idx[(ev.rt_thread[idx] == tid) & ~ev.rt_sync[idx]]
    return None if idx.size == 0 else str(ev.rt_name[idx[-1]])


def _state_of(cpu: float, rq: float, span: float) -> tuple[str, dict]:
    run, wait = cpu / span, rq / span
    fractions = {"running": run, "runnable_not_running": wait, "sleeping_or_blocked": max(0.0, 1.0 - run - wait)}
    return max(fractions, key=fractions.get), {k: round(float(v), 4) for k, v in fractions.items()}


def _host_state(ev: RankEvidence, tid: int, a: int, b: int) -> tuple[str | None, dict]:
    """(state, detail) from the thread's scheduler samples bracketing [a, b); state None if not covered."""
    s = ev.sched.get(tid)
    if s is None or s.ts_ns.size < 2:
        return None, {"reason": "no scheduler samples for the submitting thread"}
    i0 = int(searchsorted(s.ts_ns, a, side="right")) - 1
    i1 = int(searchsorted(s.ts_ns, b, side="left"))
    if i0 < 0 or i1 >= s.ts_ns.size:
        return None, {"reason": "scheduler samples do not bracket the gap"}
    span = int(s.ts_ns[i1] - s.ts_ns[i0])
    if span > 2 * (b - a):
        return None, {"reason": f"scheduler samples {span} ns apart around a {b - a} ns gap (need <= 2x the gap)"}
    dcpu = s.cpu_time_ns[i1] - s.cpu_time_ns[i0]
    drq = s.runqueue_wait_ns[i1] - s.runqueue_wait_ns[i0]
    if np.isfinite(dcpu) and np.isfinite(drq) and span > 0:
        return _state_of(dcpu, drq, span)
    states = s.state[i0 : i1 + 1].astype(str)
    r = float(np.mean(states == "R"))
    # /proc state 'R' is running or runnable: without schedstat counters the two are not separable.
    return ("running_or_runnable" if r >= 0.5 else "sleeping_or_blocked"), {"R_fraction": round(r, 4)}


def describe(ci: CheckInput) -> Finding:
    ev, step, src, opts = ci.rank.ev, ci.step, ci.rank.src, ci.rank.opts
    if not src.kernels:
        return unresolved(NAME, [_NO_KERNELS])
    cand = host_gaps(ci)
    if len(cand) == 0:
        return not_applicable(NAME, candidate_gaps=0)
    if not src.runtime_api:
        return unresolved(NAME, [_NO_CALLS], candidate_gap_ns=cand.total_ns)
    queued = _queued(ev, cand.start_ns, cand.end_ns)
    free = queued != 1
    queued_ns = int((cand.end_ns - cand.start_ns)[queued == 1].sum())
    gs, ge, q = cand.start_ns[free], cand.end_ns[free], queued[free]
    if gs.size == 0:
        return not_applicable(NAME, candidate_gaps=len(cand), idle_with_work_queued_ns=queued_ns)
    tids = _submitting_thread(ev, gs, step.thread_id)
    unc = ev.clock_uncertainty_ns
    attributed_mask = np.zeros(gs.size, bool)
    state_ns: dict[str, int] = {}
    span_ns: dict[str, int] = {}
    missing: set[str] = set()
    state_missing: set[str] = set()
    examples = []
    step_state: dict[int, tuple] = {}
    # Per-gap evidence: gaps of at least min_gap_ns in one step are tens to hundreds.
    for i in range(gs.size):
        a, b, tid = int(gs[i]), int(ge[i]), int(tids[i])
        length = b - a
        mid = (a + b) // 2
        span = _span_at(ev, tid, mid)
        call = _call_at(ev, tid, mid)
        host_in = f"CUDA call {call}" if call is not None else span
        why = []
        if q[i] == -1:
            why.append(_NO_CORR)
        if unc is None and not src.shared_timebase:
            why.append(_NO_CLOCK)
        elif unc is not None and unc >= opts.clock_uncertainty_max_fraction * length:
            why.append(_wide_clock(unc, opts.clock_uncertainty_max_fraction, length))
        state, detail, basis = None, {}, None
        if src.sched:
            state, detail = _host_state(ev, tid, a, b)
            basis = "gap" if state is not None else None
            if state is None:
                if tid not in step_state:
                    st = step_sched(ev, tid, step.start_ns, step.end_ns)
                    step_state[tid] = _state_of(st["cpu_ns"], st["runqueue_wait_ns"], st["span_ns"]) if st and st["span_ns"] > 0 else (None, detail)
                state, sdetail = step_state[tid]
                if state is not None:
                    detail, basis = sdetail, "step"
                else:
                    state_missing.add(f"on CPU or descheduled: scheduler samples of thread {tid} bracketing the gap or the step ({detail.get('reason')})")
        else:
            state_missing.add("on CPU or descheduled: scheduler samples (sched not observed)")
        if host_in is None and state is None:
            why.append(_NO_HOST)
        if not why:
            attributed_mask[i] = True
            key = state or "unresolved"
            state_ns[key] = state_ns.get(key, 0) + length
        missing.update(why)
        key = host_in or "(no host span)"
        span_ns[key] = span_ns.get(key, 0) + length
        if len(examples) < _EXAMPLES:
            examples.append({"gap_ns": length, "thread_id": tid, "host_span": host_in, "host_state": state,
                             "host_state_basis": basis, "state_detail": detail, "attributed": not why})
    claimed = Intervals(gs[attributed_mask], ge[attributed_mask])
    evidence = {
        "candidate_gaps": int(gs.size),
        "candidate_gap_ns": int((ge - gs).sum()),
        "attributed_gap_ns": claimed.total_ns,
        "idle_with_work_queued_ns": queued_ns,
        "host_state_ns": state_ns,
        "host_spans_ns": dict(sorted(span_ns.items(), key=lambda kv: -kv[1])[:5]),
        "clock_uncertainty_ns": unc if unc is not None else ("not measured (shared CUPTI timebase)" if src.shared_timebase else None),
        "examples": examples,
    }
    if state_missing:
        evidence["host_state_missing"] = sorted(state_missing)
    if len(claimed) == 0:
        return unresolved(NAME, sorted(missing), **evidence)
    if missing:
        evidence["partially_unresolved"] = sorted(missing)
    return attributed(NAME, claimed, **evidence)


def _host_in(ev: RankEvidence, tids: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (thread, time): whether the thread was in a host span or a non-synchronizing call
    then (tier 1 of describe(): only whether one exists decides the verdict)."""
    out = np.zeros(t.size, bool)
    for tid in np.unique(tids).tolist():  # threads are few
        m = tids == tid
        sp = ev.span_thread == tid
        rt = (ev.rt_thread == tid) & ~ev.rt_sync
        out[m] = base_steps.covers(ev.span_start[sp], ev.span_end[sp], t[m]) | base_steps.covers(ev.rt_start[rt], ev.rt_end[rt], t[m])
    return out


def _bracketed(ev: RankEvidence, tid: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per gap [a, b) of one thread: whether _host_state finds a state (samples bracketing it
    within 2x its length)."""
    s = ev.sched.get(tid)
    if s is None or s.ts_ns.size < 2:
        return np.zeros(a.size, bool)
    i0 = searchsorted(s.ts_ns, a, side="right") - 1
    i1 = searchsorted(s.ts_ns, b, side="left")
    inside = (i0 >= 0) & (i1 < s.ts_ns.size)
    span = s.ts_ns[np.minimum(i1, s.ts_ns.size - 1)] - s.ts_ns[np.maximum(i0, 0)]
    return inside & (span <= 2 * (b - a))


def _host_state_known(si: StepsInput, tids: np.ndarray, k: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per gap: whether describe() finds the host state, from samples bracketing the gap or else
    from the thread's counters over the step."""
    fr, out = si.frame, np.zeros(a.size, bool)
    for tid in np.unique(tids).tolist():  # threads are few
        m = np.flatnonzero(tids == tid)
        gap = _bracketed(si.rank.ev, tid, a[m], b[m])
        out[m] = gap
        rest = m[~gap]
        if rest.size == 0:
            continue
        kr = k[rest]  # gaps are in time order: their steps ascend
        steps = kr[np.concatenate(([True], kr[1:] != kr[:-1]))]
        ok, _, _, span = base_steps.step_sched(si.rank.ev, tid, fr.starts[steps], fr.ends[steps])
        by_step = np.zeros(fr.n, bool)
        by_step[steps] = ok & (span > 0)
        out[rest] = by_step[kr]
    return out


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev, src, opts = si.frame, si.rank.ev, si.rank.src, si.rank.opts
    n = fr.n
    if not src.kernels:
        return uniform(NAME, n, UNRESOLVED, (_NO_KERNELS,))
    cand, ck = base_steps.host_gaps(si)
    has_cand = base_steps.has_any(fr, ck)
    if not src.runtime_api:
        out = uniform(NAME, n, UNRESOLVED, (_NO_CALLS,))
        out.verdict[~has_cand] = NOT_APPLICABLE
        out.missing_code[~has_cand] = 0
        return out
    queued = _queued(ev, cand.start_ns, cand.end_ns)
    free = queued != 1
    gs, ge, q, k = cand.start_ns[free], cand.end_ns[free], queued[free], ck[free]
    tids = _submitting_thread(ev, gs, fr.tids[k])
    length = ge - gs
    unc = ev.clock_uncertainty_ns
    no_clock = unc is None and not src.shared_timebase  # the whole rank
    wide = (unc >= opts.clock_uncertainty_max_fraction * length) if unc is not None else np.zeros(gs.size, bool)
    known = _host_state_known(si, tids, k, gs, ge) if src.sched else np.zeros(gs.size, bool)
    no_host = ~_host_in(ev, tids, (gs + ge) // 2) & ~known
    no_corr = q == -1
    ok = ~no_corr & ~wide & ~no_host & (not no_clock)
    has_free = base_steps.has_any(fr, k)
    hit = base_steps.has_any(fr, k[ok])
    verdict = np.full(n, NOT_APPLICABLE, np.int8)
    verdict[has_free] = UNRESOLVED
    verdict[hit] = ATTRIBUTED
    missing, codes = _missing(fr, verdict == UNRESOLVED, k, no_corr, no_clock, wide, no_host, length, unc, opts)
    return StepFindings(NAME, verdict, Intervals(gs[ok], ge[ok]), missing, codes)


def _missing(fr, unresolved_step, k, no_corr, no_clock, wide, no_host, length, unc, opts):
    """describe()'s sorted set of reasons over an unresolved step's gaps, as codes into a list of
    distinct tuples. The fixed reasons combine as bits; a wide clock names each gap's length."""
    n = fr.n
    bits = np.zeros(n, np.int64)
    for bit, why in enumerate((no_corr, no_host)):
        bits |= base_steps.has_any(fr, k[why]).astype(np.int64) << bit
    if no_clock:
        bits |= 4
    missing: dict[tuple, int] = {(): 0}
    codes = np.zeros(n, np.int32)
    fixed = [(_NO_CORR, 1), (_NO_HOST, 2), (_NO_CLOCK, 4)]
    wk, wl = k[wide], length[wide]
    plain = unresolved_step & ~base_steps.has_any(fr, wk)
    for b in np.unique(bits[plain]).tolist():  # at most 8 combinations
        t = tuple(sorted(why for why, bit in fixed if b & bit))
        codes[plain & (bits == b)] = missing.setdefault(t, len(missing))
    # Steps with a gap the clock cannot time: each string names that gap's length, so such steps
    # rarely share a tuple and one is built per step (the loop is as long as what it writes).
    on = unresolved_step[wk]
    wk, wl = wk[on], wl[on]
    order = np.lexsort((wl, wk))
    wk, wl = wk[order], wl[order]
    distinct = np.concatenate(([True], (wk[1:] != wk[:-1]) | (wl[1:] != wl[:-1]))) if wk.size else np.zeros(0, bool)
    wk, wl = wk[distinct].tolist(), wl[distinct].tolist()
    text = {w: _wide_clock(unc, opts.clock_uncertainty_max_fraction, w) for w in set(wl)}
    i = 0
    while i < len(wk):
        step, j = wk[i], i
        while j < len(wk) and wk[j] == step:
            j += 1
        whys = [why for why, bit in fixed if int(bits[step]) & bit] + [text[w] for w in wl[i:j]]
        codes[step] = missing.setdefault(tuple(sorted(whys)), len(missing))
        i = j
    return list(missing), codes
