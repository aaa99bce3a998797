"""host_submission: the GPU went idle with nothing queued while the host was neither in a
synchronizing call nor in a declared wait; the host was late to submit.

Evidence required, per gap:
  * runtime_api (to know the host was not in a sync, and which thread submits),
  * GPU activity with correlation ids (to know nothing was queued: the next GPU activity
    after the gap was launched after the gap began),
  * scheduler samples of the submitting thread that cover the gap: one sample at or before
    its start and one at or after its end, at most 2x the gap apart, so the thread's
    running / runnable / blocked split over that bracket is mostly the gap itself,
  * GPU->host clock uncertainty below `clock_uncertainty_max_fraction` of the gap. Rule:
    clock_sync rows give the uncertainty; with none, a Kineto import counts as measured on
    one timebase (CUPTI corrects GPU times onto the host clock it reads) and is accepted
    with the uncertainty reported as "not measured"; any other source is unresolved.
A gap missing any of these is unresolved, with the host span it fell in and what is missing.
Explains: the attributed gaps.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..evidence import RankEvidence, launch_rows
from ..types import Finding, Intervals
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "host_submission"
_EXAMPLES = 5


def _queued(ev: RankEvidence, gap_start: np.ndarray, gap_end: np.ndarray) -> np.ndarray:
    """Per gap: 1 work was queued, 0 nothing queued, -1 unknown (no correlation to a launch)."""
    out = np.full(gap_start.size, -1, np.int64)
    if ev.gpu_start_sorted.size == 0:
        return out
    j = np.searchsorted(ev.gpu_start_sorted, gap_end, side="left")
    has_next = j < ev.gpu_start_sorted.size
    corr = np.where(has_next, ev.gpu_corr_sorted[np.minimum(j, ev.gpu_start_sorted.size - 1)], -1)
    rows, known = launch_rows(ev, corr)
    out[known] = (ev.rt_start[rows[known]] < gap_start[known]).astype(np.int64)
    # No GPU activity after the gap within the trace: nothing was queued.
    out[~has_next] = 0
    return out


def _submitting_thread(ev: RankEvidence, gap_start: np.ndarray, fallback: int) -> np.ndarray:
    """The thread of the last runtime call that began before each gap; the step's thread if none."""
    if ev.rt_start.size == 0:
        return np.full(gap_start.size, fallback, np.int64)
    i = np.searchsorted(ev.rt_start, gap_start, side="right") - 1  # rows are sorted by start
    return np.where(i >= 0, ev.rt_thread[np.maximum(i, 0)], fallback)


def _span_at(ev: RankEvidence, tid: int, t: int) -> str | None:
    """Deepest host span of thread `tid` containing time t."""
    idx = ev.span_index.containing(t)
    idx = idx[ev.span_thread[idx] == tid]
    if idx.size == 0:
        return None
    return str(ev.span_name[idx[np.argmax(ev.span_depth[idx])]])


def _host_state(ev: RankEvidence, tid: int, a: int, b: int) -> tuple[str | None, dict]:
    """(state, detail) from the thread's scheduler samples bracketing [a, b); state None if not covered."""
    s = ev.sched.get(tid)
    if s is None or s.ts_ns.size < 2:
        return None, {"reason": "no scheduler samples for the submitting thread"}
    i0 = int(np.searchsorted(s.ts_ns, a, side="right")) - 1
    i1 = int(np.searchsorted(s.ts_ns, b, side="left"))
    if i0 < 0 or i1 >= s.ts_ns.size:
        return None, {"reason": "scheduler samples do not bracket the gap"}
    span = int(s.ts_ns[i1] - s.ts_ns[i0])
    if span > 2 * (b - a):
        return None, {"reason": f"scheduler samples {span} ns apart around a {b - a} ns gap (need <= 2x the gap)"}
    dcpu = s.cpu_time_ns[i1] - s.cpu_time_ns[i0]
    drq = s.runqueue_wait_ns[i1] - s.runqueue_wait_ns[i0]
    if np.isfinite(dcpu) and np.isfinite(drq) and span > 0:
        run, wait = dcpu / span, drq / span
        fractions = {"running": run, "runnable_not_running": wait, "sleeping_or_blocked": max(0.0, 1.0 - run - wait)}
        state = max(fractions, key=fractions.get)
        return state, {k: round(float(v), 4) for k, v in fractions.items()}
    states = s.state[i0 : i1 + 1].astype(str)
    r = float(np.mean(states == "R"))
    # /proc state 'R' is running or runnable: without schedstat counters the two are not separable.
    return ("running_or_runnable" if r >= 0.5 else "sleeping_or_blocked"), {"R_fraction": round(r, 4)}


def check(ci: CheckInput) -> Finding:
    ev, step, src, opts = ci.ev, ci.step, ci.src, ci.opts
    if not src.kernels:
        return unresolved(NAME, ["GPU activity (kernels not observed)"])
    lo, hi = step.start_ns, step.end_ns
    cand = measures.subtract(measures.subtract(ci.base.idle_long, measures.clip(ev.sync_union, lo, hi)), measures.clip(ev.wait_union, lo, hi))
    lengths = cand.end_ns - cand.start_ns
    keep = lengths >= opts.min_gap_ns
    cand = Intervals(cand.start_ns[keep], cand.end_ns[keep])
    if len(cand) == 0:
        return not_applicable(NAME, candidate_gaps=0)
    if not src.runtime_api:
        return unresolved(NAME, ["host CUDA API calls (runtime_api not observed): cannot tell a late host from a sync"],
                          candidate_gap_ns=cand.total_ns)
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
    examples = []
    # Per-gap evidence: gaps of at least min_gap_ns in one step are few (tens at most).
    for i in range(gs.size):
        a, b, tid = int(gs[i]), int(ge[i]), int(tids[i])
        length = b - a
        span = _span_at(ev, tid, (a + b) // 2)
        why = []
        if q[i] == -1:
            why.append("correlation ids to tell whether work was queued")
        if not src.sched:
            why.append("scheduler samples (sched not observed)")
            state, detail = None, {}
        else:
            state, detail = _host_state(ev, tid, a, b)
            if state is None:
                why.append(f"scheduler coverage of thread {tid}: {detail['reason']}")
        if unc is None and not src.shared_timebase:
            why.append("GPU->host clock uncertainty (clock_sync not observed)")
        elif unc is not None and unc >= opts.clock_uncertainty_max_fraction * length:
            why.append(f"clock uncertainty {unc} ns is not below {opts.clock_uncertainty_max_fraction} x the {length} ns gap")
        if not why:
            attributed_mask[i] = True
            state_ns[state] = state_ns.get(state, 0) + length
        missing.update(why)
        key = span or "(no host span)"
        span_ns[key] = span_ns.get(key, 0) + length
        if len(examples) < _EXAMPLES:
            examples.append({"gap_ns": length, "thread_id": tid, "host_span": span, "host_state": state,
                             "state_detail": detail, "attributed": not why})
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
    if len(claimed) == 0:
        return unresolved(NAME, sorted(missing), **evidence)
    if missing:
        evidence["partially_unresolved"] = sorted(missing)
    return attributed(NAME, claimed, **evidence)
