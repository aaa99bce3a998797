"""What every check receives: the step, its measured base (busy, idle) and the rank's evidence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import measures
from ..evidence import RankEvidence, RankInput
from ..fast import searchsorted
from ..types import Finding, Intervals, StepWindow


@dataclass(frozen=True)
class StepBase:
    """The step's GPU timeline, computed once and shared by the checks (relative ns)."""

    step: StepWindow
    busy: Intervals
    idle: Intervals
    idle_long: Intervals  # idle gaps of at least options.min_gap_ns


@dataclass(frozen=True)
class CheckInput:
    step: StepWindow
    base: StepBase
    rank: RankInput  # the evidence, sources and options (the options reach checks only through it)
    warm_up: dict | None = None
    """Set on a cold first step of the process ({position, typical_ns, basis}); None otherwise."""
    lead_owed_ns: int = 0
    """The lead the previous step's syncs left this step short of (diagnose/lead.py): its syncs' refill bound grows by it."""


def make_base(step: StepWindow, ev: RankEvidence, min_gap_ns: int) -> StepBase:
    busy = measures.clip(ev.busy, step.start_ns, step.end_ns)
    idle = measures.gaps(ev.busy, step.start_ns, step.end_ns)
    lengths = idle.end_ns - idle.start_ns
    keep = lengths >= min_gap_ns
    return StepBase(step, busy, idle, Intervals(idle.start_ns[keep], idle.end_ns[keep]))


def host_gaps(ci: "CheckInput") -> Intervals:
    """GPU idle gaps (>= min_gap_ns) where the host was neither in a synchronizing call, an
    allocator call nor a declared wait: the candidates for host-side causes."""
    ev, lo, hi = ci.rank.ev, ci.step.start_ns, ci.step.end_ns
    cand = ci.base.idle_long
    for u in (ev.sync_union, ev.alloc_union, ev.wait_union):
        if len(u):
            cand = measures.subtract(cand, measures.clip(u, lo, hi))
    keep = (cand.end_ns - cand.start_ns) >= ci.rank.opts.min_gap_ns
    return Intervals(cand.start_ns[keep], cand.end_ns[keep])


def needs_calls_and_kernels(ci: "CheckInput", check: str) -> Finding | None:
    """`unresolved` naming what is absent when host CUDA calls or GPU activity were not
    observed (checks that time GPU idle after a host call need both); None when both were."""
    missing = []
    if not ci.rank.src.runtime_api:
        missing.append("host CUDA API calls (runtime_api not observed)")
    if not ci.rank.src.kernels:
        missing.append("GPU activity (kernels not observed)")
    return unresolved(check, missing) if missing else None


def calls_in_step(ci: "CheckInput", kind: np.ndarray) -> np.ndarray:
    """Rows of the host CUDA calls overlapping the step for which `kind` (a per-call mask of
    the rank's runtime_api rows, e.g. ev.rt_sync or ev.rt_alloc) is true."""
    rows = ci.rank.ev.rt_index.overlapping(ci.step.start_ns, ci.step.end_ns)
    return rows[kind[rows]]


def next_gpu_start(ev: RankEvidence, after_ns: np.ndarray, step_end_ns: "int | np.ndarray") -> np.ndarray:
    """For each time in `after_ns`: the first GPU activity starting at or after it, bounded by
    the step end (and never before the time itself)."""
    g = ev.gpu_start_sorted
    step_end_ns = np.broadcast_to(np.asarray(step_end_ns, np.int64), np.shape(after_ns))  # one step, or one per time
    j = searchsorted(g, after_ns, side="left")
    nxt = np.where(j < g.size, g[np.minimum(j, g.size - 1)], step_end_ns)
    return np.minimum(np.maximum(nxt, after_ns), step_end_ns)


def next_host_start(ev: RankEvidence, thread_id: np.ndarray, after_ns: np.ndarray, step_end_ns: "int | np.ndarray") -> np.ndarray:
    """For each (thread, time): the first host span of that thread starting at or after the
    time (the host went on to run named work), bounded by the step end."""
    step_end_ns = np.broadcast_to(np.asarray(step_end_ns, np.int64), np.shape(after_ns))  # one step, or one per time
    out = np.array(step_end_ns, np.int64)
    for tid in np.unique(thread_id).tolist():  # threads are few
        starts = ev.span_starts_by_thread.get(int(tid))
        if starts is None or starts.size == 0:
            continue
        m = thread_id == tid
        j = searchsorted(starts, after_ns[m], side="left")
        out[m] = np.where(j < starts.size, starts[np.minimum(j, starts.size - 1)], step_end_ns[m])
    return np.minimum(np.maximum(out, after_ns), step_end_ns)


def refill_end(ev: RankEvidence, s: np.ndarray, e: np.ndarray, hi: "int | np.ndarray",
               set_lead: np.ndarray | None = None, set_first_end: np.ndarray | None = None) -> np.ndarray:
    """Per synchronizing call [s, e): how far after its return the GPU idle is the call's own
    consequence (issue 34, credit by consequence, bounded). The sync emptied the GPU's queue:
    the launches after it run on an idle GPU until the host has rebuilt its lead. Bounded by
    the lead the sync took away: the GPU busy time while the host was blocked is how far ahead
    the host would have been without it, so the first that much idle after the return (in the
    step) is the sync's, and no more (a sync that waited on an idle GPU took no lead and gets
    no refill).

    Repeated syncs in one step (a sync per layer) are bounded together: `set_lead` is, per
    call, the lead all the set's calls in the step took away up to its return (set_lead), and
    `set_first_end` the set's first return. Without any of them the host would have been that
    far ahead, so the idle since the first return is the syncs' until it adds up to that lead:
    the lead one sync took covers the refill after a later one (a per-sync bound gives each
    layer's refill only the little that layer's sync waited for). Each call keeps at least its
    own bound. Conservative: the lead the host would have kept building is not counted."""
    hi = np.broadcast_to(np.asarray(hi, np.int64), np.shape(e))
    b = ev.busy
    if len(b) == 0 or e.size == 0:
        return np.asarray(e, np.int64).copy()
    lead = measures.covered_between(b, s, e)
    # F(t) = t - busy before t: non-decreasing, flat over busy time. The refill ends where F
    # has grown by the lead since the return: that much idle lies between.
    base = b.start_ns[0]
    cum_before = np.concatenate([[0], np.cumsum(b.end_ns - b.start_ns)[:-1]])
    f_start = b.start_ns - cum_before

    def f(t):
        return t - measures.covered_between(b, np.full(t.size, base), np.maximum(t, base))

    target = f(e) + lead
    if set_lead is not None:
        target = np.maximum(target, f(np.asarray(set_first_end, np.int64)) + set_lead)
    i = searchsorted(f_start, target, side="left")
    last_f = f_start[-1]
    t = np.where(i < f_start.size, b.start_ns[np.minimum(i, f_start.size - 1)] - (f_start[np.minimum(i, f_start.size - 1)] - target),
                 b.end_ns[-1] + (target - last_f))
    return np.maximum(np.minimum(t, hi), e)


def set_lead(ev: RankEvidence, blocked: Intervals, piece_shift: np.ndarray, lane_lo: np.ndarray, until: np.ndarray,
             shift: np.ndarray) -> np.ndarray:
    """Per call: the GPU busy time inside its set's blocked time (`blocked`: the union of the
    set's calls, each set on its own lane of a timeline where lanes do not overlap; one lane
    on the real timeline for one step) from its lane's start `lane_lo` up to `until` (its
    return, in the step): the lead the set's calls had taken away by then (refill_end).
    `piece_shift` and `shift`: virtual minus real time per blocked piece and per call."""
    if len(blocked) == 0 or until.size == 0:
        return np.zeros(until.size, np.int64)
    rs, re = blocked.start_ns - piece_shift, blocked.end_ns - piece_shift
    cum = np.concatenate([[0], np.cumsum(measures.covered_between(ev.busy, rs, re))])
    j = searchsorted(blocked.start_ns, until, side="left")  # pieces starting before the return
    last = np.maximum(j - 1, 0)
    past = (j > 0) & (blocked.end_ns[last] > until)  # a piece running on past it (another call of the set)
    over = np.where(past, measures.covered_between(ev.busy, np.where(past, until - shift, 0), np.where(past, re[last], 0)), 0)
    return cum[j] - over - cum[searchsorted(blocked.start_ns, lane_lo, side="left")]


def call_windows(ci: "CheckInput", rows: np.ndarray, refill: bool = False, owed: bool = False) -> tuple[Intervals, Intervals]:
    """(blocked, windows) for host calls `rows`: the calls' own time, and that time plus the
    GPU idle after each return only as far as the call delayed the next launch: until the
    GPU starts again or, sooner, the calling thread begins a named host span (that host time
    is the span's: host_submission names it). With `refill` (synchronizing calls), also the
    refill after the return (refill_end): its idle is the sync's even inside named spans; with
    `owed` too, the set's bound also holds the lead the previous step's syncs left the step
    short of (ci.lead_owed_ns, diagnose/lead.py). Declared waits after a return are input_starvation's, and waits of other threads are
    never a call's."""
    ev, step = ci.rank.ev, ci.step
    lo, hi = step.start_ns, step.end_ns
    s, e, tid = ev.rt_start[rows], ev.rt_end[rows], ev.rt_thread[rows]
    blocked = measures.clip(measures.union(s, e), lo, hi)
    stop = np.minimum(next_gpu_start(ev, e, hi), next_host_start(ev, tid, e, hi))
    if refill and e.size:
        zero = np.zeros(e.size, np.int64)
        lead = set_lead(ev, blocked, np.zeros(len(blocked), np.int64), np.full(e.size, lo), np.minimum(e, hi), zero)
        if owed:
            lead = lead + ci.lead_owed_ns
        stop = np.maximum(stop, refill_end(ev, s, e, hi, lead, np.full(e.size, e.min())))
    windows = measures.clip(measures.union(s, np.maximum(stop, e)), lo, hi)
    if len(ev.wait_union):
        after = measures.subtract(windows, blocked)
        windows = measures.union_many(blocked, measures.subtract(after, measures.clip(ev.wait_union, lo, hi)))
        near = ev.span_index.overlapping(lo, hi)
        other = near[ev.span_is_wait[near] & ~np.isin(ev.span_thread[near], np.unique(tid))]
        if other.size:
            windows = measures.subtract(windows, measures.clip(measures.union(ev.span_start[other], ev.span_end[other]), lo, hi))
    return blocked, windows


def unresolved(check: str, missing: list[str], **evidence) -> Finding:
    return Finding(check, "unresolved", measures.empty(), evidence, tuple(missing))


def not_applicable(check: str, **evidence) -> Finding:
    return Finding(check, "not_applicable", measures.empty(), evidence, ())


def attributed(check: str, claimed: Intervals, **evidence) -> Finding:
    return Finding(check, "attributed", claimed, evidence, ())


def top_names(names: np.ndarray, weights: np.ndarray, limit: int = 5) -> dict[str, int]:
    """Largest total weight per distinct name (for evidence), largest first."""
    if names.size == 0:
        return {}
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    tot = np.bincount(inv, weights=weights.astype(float))
    order = np.argsort(-tot, kind="stable")[:limit]
    return {str(uniq[i]): int(tot[i]) for i in order}
