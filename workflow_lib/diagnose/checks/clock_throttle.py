"""clock_throttle: NVML says the GPU slowed itself (thermal, power, hardware slowdown) or ran
its SM clock below maximum while busy during the step.

Evidence, first choice: NVML violation counters (nvmlDeviceGetViolationStatus: cumulative ns
held below clocks for power, thermal, board limit, reliability), polled as deltas. The two
polls around the step bracket it: an unchanged counter rules throttling out for the whole
bracket however long it is, so millisecond steps are covered by a 1 s poll; a change inside a
bracket at most 2x the step is attributed (the throttled time, capped at busy time, times
1 - busy SM clock / max SM clock: the time lost, not the time throttled); a change in a
longer bracket cannot be placed and is unresolved, saying so.
Otherwise: NVML clock samples covering the step (one inside it, or two bracketing it at
most 2x the step apart). Unresolved without them.
Explains: the step's busy time times (1 - mean busy SM clock / max SM clock): the work that a
full clock would have finished sooner. Taken from the end of the busy intervals.
"""

from __future__ import annotations

import numpy as np

from ..batch import ATTRIBUTED, NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, uniform
from ..fast import searchsorted
from ..types import Finding, Intervals
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "clock_throttle"

# nvmlClocksEventReasons bits (nvml.h): which ones mean "slowed down".
REASON_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
}
GPU_IDLE_BIT = 0x1


def _window(ts: np.ndarray, lo: int, hi: int) -> np.ndarray | None:
    """Indices of samples describing [lo, hi): inside it, else the bracketing pair; None if uncovered."""
    i = int(searchsorted(ts, lo, side="left"))
    j = int(searchsorted(ts, hi, side="right"))
    if j > i:
        return np.arange(i, j)
    if i > 0 and i < ts.size and ts[i] - ts[i - 1] <= 2 * max(hi - lo, 1):
        return np.array([i - 1, i])
    return None


def _take_tail(busy: Intervals, amount_ns: int) -> Intervals:
    """The last `amount_ns` of a disjoint union (how much of the busy time throttling cost)."""
    if amount_ns <= 0 or len(busy) == 0:
        return Intervals(busy.start_ns[:0], busy.end_ns[:0])
    lengths = (busy.end_ns - busy.start_ns)[::-1]
    cum = np.cumsum(lengths)
    k = int(searchsorted(cum, amount_ns, side="left"))
    k = min(k, lengths.size - 1)
    s = busy.start_ns[::-1][: k + 1].copy()
    e = busy.end_ns[::-1][: k + 1].copy()
    over = int(cum[k] - amount_ns)
    s[k] += max(over, 0)
    return Intervals(s[::-1], e[::-1])


VIOLATION_METRICS = ("violation_power_ns", "violation_thermal_ns", "violation_board_limit_ns", "violation_reliability_ns")


def _violations(ci: CheckInput) -> Finding | None:
    """The verdict from violation counters, or None when they do not bracket the step."""
    ev, step = ci.rank.ev, ci.step
    total, span, per = 0.0, 0, {}
    for m in VIOLATION_METRICS:
        got = ev.nvml.get(m)
        if got is None or got[0].size < 2:
            continue
        ts, v = got
        i0 = int(searchsorted(ts, step.start_ns, side="right")) - 1
        i1 = int(searchsorted(ts, step.end_ns, side="left"))
        if i0 < 0 or i1 >= ts.size:
            return None
        d = float(np.max(v[i0:i1 + 1]) - v[i0])  # several devices interleave: the rank's worst
        per[m] = int(max(d, 0))
        total = max(total, d)
        span = max(span, int(ts[i1] - ts[i0]))
    if not per:
        return None
    evidence = {"basis": "NVML violation counters (deltas)", "violation_ns": per, "bracket_ns": span}
    if total <= 0:
        return not_applicable(NAME, **evidence)
    if span > 2 * max(step.wall_ns, 1):
        return unresolved(NAME, [f"violation counters changed by {int(total)} ns within a {span} ns bracket around the "
                                 f"{step.wall_ns} ns step: a poll closer to the step's boundaries"], **evidence)
    # The counters say how long the clocks were held down, not how much work that cost: a
    # throttled busy ns loses (1 - clock ratio) of a ns. Sized by the clock samples; without
    # them the time lost is not known and nothing is credited.
    busy = ci.base.busy
    throttled = int(min(total, busy.total_ns))
    evidence["throttled_busy_ns"] = throttled
    reasons = ev.nvml.get("clock_event_reasons")
    ratio = _busy_clock_ratio(ci, _clock_window(ci), reasons, evidence)
    if ratio is None:
        evidence["note"] = "clocks held down, but no busy SM clock samples to size the time lost"
        return attributed(NAME, _take_tail(busy, 0), **evidence)
    return attributed(NAME, _take_tail(busy, int(round(throttled * max(0.0, 1.0 - ratio)))), **evidence)


def _busy_clock_ratio(ci: CheckInput, cwin, reasons, evidence: dict) -> float | None:
    """Mean busy SM clock / max SM clock over the clock samples `cwin` (idle samples dropped)."""
    ev = ci.rank.ev
    clocks = ev.nvml.get("sm_clock_mhz")
    max_clock = ev.nvml.get("max_sm_clock_mhz")
    if cwin is None or clocks is None or max_clock is None or not max_clock[1].size:
        return None
    vals = clocks[1][cwin]
    if reasons is not None:
        # Drop samples taken while the GPU was idle: idle clocks are low by design.
        k = np.clip(searchsorted(reasons[0], clocks[0][cwin], side="right") - 1, 0, reasons[0].size - 1)
        busy_mask = (reasons[1][k].astype(np.int64) & GPU_IDLE_BIT) == 0
        vals = vals[busy_mask] if busy_mask.any() else vals[:0]
    mx = float(np.max(max_clock[1]))
    if not vals.size or mx <= 0:
        return None
    ratio = float(np.mean(vals)) / mx
    evidence.update(sm_clock_mean_mhz=round(float(np.mean(vals)), 1), sm_clock_max_mhz=mx, clock_ratio=round(ratio, 4))
    return ratio


def _clock_window(ci: CheckInput):
    clocks = ci.rank.ev.nvml.get("sm_clock_mhz")
    return _window(clocks[0], ci.step.start_ns, ci.step.end_ns) if clocks is not None else None


def describe(ci: CheckInput) -> Finding:
    ev, step, opts = ci.rank.ev, ci.step, ci.rank.opts
    if not ci.rank.src.nvml or not ev.nvml:
        return unresolved(NAME, ["NVML samples (nvml not observed)"])
    by_counters = _violations(ci)
    if by_counters is not None:
        return by_counters
    reasons = ev.nvml.get("clock_event_reasons")
    rwin = _window(reasons[0], step.start_ns, step.end_ns) if reasons is not None else None
    cwin = _clock_window(ci)
    if rwin is None and cwin is None:
        return unresolved(NAME, ["NVML clock-event reasons or SM clock samples covering the step"])
    evidence: dict = {}
    throttled_reasons: list[str] = []
    if rwin is not None:
        bits = reasons[1][rwin].astype(np.int64)
        evidence["reason_samples"] = int(bits.size)
        throttled_reasons = [name for name, bit in REASON_BITS.items() if (bits & bit).any()]
        evidence["reasons"] = throttled_reasons
    ratio = _busy_clock_ratio(ci, cwin, reasons, evidence)
    slowed = ratio is not None and ratio < opts.throttle_clock_fraction
    if not throttled_reasons and not slowed:
        return not_applicable(NAME, **evidence)
    busy = ci.base.busy
    if ratio is None:
        evidence["note"] = "throttle reasons set, but no busy SM clock samples to size the cost"
        return attributed(NAME, _take_tail(busy, 0), **evidence)
    cost = int(busy.total_ns * max(0.0, 1.0 - ratio))
    return attributed(NAME, _take_tail(busy, cost), **evidence)


def _windows(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_window for every step: (first, end, covered): the samples are ts[first:end]."""
    i = searchsorted(ts, lo, side="left")
    j = searchsorted(ts, hi, side="right")
    inside = j > i
    if ts.size >= 2:
        ii = np.clip(i, 1, ts.size - 1)
        pair = ~inside & (i > 0) & (i < ts.size) & (ts[ii] - ts[ii - 1] <= 2 * np.maximum(hi - lo, 1))
    else:
        pair = np.zeros(i.size, bool)
    first = np.where(inside, i, i - 1)
    end = np.where(inside, j, i + 1)
    return first, end, inside | pair


def _range_sums(values: np.ndarray, first: np.ndarray, end: np.ndarray, ok: np.ndarray, ufunc=np.add) -> np.ndarray:
    """ufunc.reduce(values[first:end]) where ok (ranges non-empty there), 0 elsewhere."""
    out = np.zeros(first.size, values.dtype)
    if not ok.any():
        return out
    ext = np.append(values, values[:1])  # reduceat needs every index inside the array
    idx = np.stack([first[ok], end[ok]], axis=1).ravel()
    out[ok] = ufunc.reduceat(ext, idx)[0::2]
    return out


def _busy_ratio_steps(ev, first, end, ok) -> tuple[np.ndarray, np.ndarray]:
    """_busy_clock_ratio for every step's clock window: (ratio, known)."""
    clocks = ev.nvml.get("sm_clock_mhz")
    max_clock = ev.nvml.get("max_sm_clock_mhz")
    n = first.size
    if clocks is None or max_clock is None or not max_clock[1].size:
        return np.zeros(n), np.zeros(n, bool)
    reasons = ev.nvml.get("clock_event_reasons")
    busy = np.ones(clocks[0].size, bool)
    if reasons is not None:
        k = np.clip(searchsorted(reasons[0], clocks[0], side="right") - 1, 0, reasons[0].size - 1)
        busy = (reasons[1][k].astype(np.int64) & GPU_IDLE_BIT) == 0
    count = _range_sums(busy.astype(np.int64), first, end, ok)
    total = _range_sums(np.where(busy, clocks[1], 0.0), first, end, ok)
    mx = float(np.max(max_clock[1]))
    known = ok & (count > 0) & (mx > 0)
    return np.where(known, total / np.maximum(count, 1) / (mx if mx > 0 else 1.0), 0.0), known


def _tail_steps(frame, busy: Intervals, amount: np.ndarray) -> Intervals:
    """_take_tail for every step: the last amount[k] ns of step k's busy pieces."""
    p, k = frame.split(busy)
    if p.start_ns.size == 0:
        return p
    length = p.end_ns - p.start_ns
    # ns of busy after each piece within its step (reverse cumulative sum per step).
    per_step_total = np.bincount(k, weights=length, minlength=frame.n).astype(np.int64)
    upto = np.cumsum(length) - np.concatenate([[0], np.cumsum(per_step_total)[:-1]])[k]  # busy up to and with the piece
    after = per_step_total[k] - upto
    take = np.clip(amount[k] - after, 0, length)
    keep = take > 0
    return Intervals(p.end_ns[keep] - take[keep], p.end_ns[keep])


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev, opts = si.frame, si.rank.ev, si.rank.opts
    n = fr.n
    if not si.rank.src.nvml or not ev.nvml:
        return uniform(NAME, n, UNRESOLVED, ("NVML samples (nvml not observed)",))
    lo, hi, wall = fr.starts, fr.ends, fr.wall
    busy_ns = fr.per_step(si.base.busy)
    verdict = np.full(n, NOT_APPLICABLE, np.int8)
    codes = np.zeros(n, np.int32)
    missing: list = [()]
    amount = np.zeros(n, np.int64)
    clocks = ev.nvml.get("sm_clock_mhz")
    if clocks is not None:
        cf, ce, cok = _windows(clocks[0], lo, hi)
        ratio, known = _busy_ratio_steps(ev, cf, ce, cok)
    else:
        ratio, known = np.zeros(n), np.zeros(n, bool)
    # Violation counters first, where every counter brackets the step.
    metrics = [ev.nvml[m] for m in VIOLATION_METRICS if m in ev.nvml and ev.nvml[m][0].size >= 2]
    by_counters = np.zeros(n, bool)
    if metrics:
        by_counters = np.ones(n, bool)
        total = np.zeros(n)
        span = np.zeros(n, np.int64)
        for ts, v in metrics:
            i0 = searchsorted(ts, lo, side="right") - 1
            i1 = searchsorted(ts, hi, side="left")
            inside = (i0 >= 0) & (i1 < ts.size)
            by_counters &= inside
            a, b = np.maximum(i0, 0), np.minimum(i1, ts.size - 1)
            top = _range_sums(v.astype(float), a, b + 1, inside, np.maximum)
            total = np.maximum(total, np.where(inside, top - v[a], 0.0))
            span = np.maximum(span, np.where(inside, ts[b] - ts[a], 0))
        moved = by_counters & (total > 0)
        far = moved & (span > 2 * np.maximum(wall, 1))
        for k in np.flatnonzero(far).tolist():  # one sentence per such step, with its numbers
            why = (f"violation counters changed by {int(total[k])} ns within a {int(span[k])} ns bracket around the "
                   f"{int(wall[k])} ns step: a poll closer to the step's boundaries",)
            if why not in missing:
                missing.append(why)
            codes[k] = missing.index(why)
        verdict[far] = UNRESOLVED
        att = moved & ~far
        verdict[att] = ATTRIBUTED
        throttled = np.minimum(total, busy_ns).astype(np.int64)
        cost = np.rint(throttled * np.maximum(0.0, 1.0 - ratio)).astype(np.int64)
        amount[att & known] = cost[att & known]
    rest = ~by_counters
    reasons = ev.nvml.get("clock_event_reasons")
    rok = np.zeros(n, bool)
    slowed_by = np.zeros(n, bool)
    if reasons is not None:
        rf, re_, rok = _windows(reasons[0], lo, hi)
        bits = reasons[1].astype(np.int64)
        for bit in REASON_BITS.values():
            slowed_by |= _range_sums(((bits & bit) != 0).astype(np.int64), rf, re_, rok) > 0
    cok_ = cok if clocks is not None else np.zeros(n, bool)
    uncovered = rest & ~rok & ~cok_
    missing.append(("NVML clock-event reasons or SM clock samples covering the step",))
    verdict[uncovered] = UNRESOLVED
    codes[uncovered] = len(missing) - 1
    slowed = known & (ratio < opts.throttle_clock_fraction)
    att = rest & ~uncovered & (slowed_by | slowed)
    verdict[att] = ATTRIBUTED
    cost = (busy_ns * np.maximum(0.0, 1.0 - ratio)).astype(np.int64)
    amount[att & known] = cost[att & known]
    amount[verdict != ATTRIBUTED] = 0
    return StepFindings(NAME, verdict, _tail_steps(fr, si.base.busy, amount), missing, codes)
