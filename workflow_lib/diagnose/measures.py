"""Interval algebra and the four measures (wall, kernel sum, busy, idle gaps) plus host API time.

Everything is vectorized over NumPy int64 arrays: a union is a sort plus a running maximum,
per-window sums are two `searchsorted` lookups into prefix sums. Times are ns on the incident's
host timeline. Callers subtract a common origin before calling when values are absolute Unix
ns, so that products of counts and times stay far from int64 overflow.
"""

from __future__ import annotations

import numpy as np

from .fast import searchsorted
from .types import Intervals

_I64 = np.int64


def empty() -> Intervals:
    return Intervals(np.zeros(0, _I64), np.zeros(0, _I64))


def as_intervals(start_ns, end_ns) -> Intervals:
    """Raw (possibly overlapping, unsorted) intervals -> their union."""
    return union(np.asarray(start_ns, _I64), np.asarray(end_ns, _I64))


# Per-step interval sets hold a handful of intervals; there a NumPy call (~1-5 us each, a sweep
# makes ~25) costs more than the work. Up to SMALL boundary points the same algorithms run on
# Python ints (exact, same results: tests/test_diagnose_speed_paths.py compares both paths).
SMALL = 48


def _arr(values: list) -> np.ndarray:
    return np.array(values, _I64) if values else np.zeros(0, _I64)


def _union_py(s: list, e: list) -> Intervals:
    pairs = sorted((a, b) for a, b in zip(s, e) if b > a)  # ties by end: same union as a stable sort
    out_s, out_e = [], []
    for a, b in pairs:
        if out_e and a <= out_e[-1]:
            if b > out_e[-1]:
                out_e[-1] = b
        else:
            out_s.append(a)
            out_e.append(b)
    return Intervals(_arr(out_s), _arr(out_e))


def union(start_ns: np.ndarray, end_ns: np.ndarray) -> Intervals:
    """Union of [start, end) intervals: sort by start, running max of ends, split where a start
    exceeds every end before it. Zero-length intervals vanish."""
    start_ns = np.asarray(start_ns, _I64)
    end_ns = np.asarray(end_ns, _I64)
    if start_ns.size <= SMALL:
        return _union_py(start_ns.tolist(), end_ns.tolist())
    keep = end_ns > start_ns
    # Most unions here are of pieces already in start order and non-empty (cut from sorted
    # columns): those skip the copies, and the sort's gathers (a 1M-step diagnosis makes ~40).
    s, e = (start_ns, end_ns) if keep.all() else (start_ns[keep], end_ns[keep])
    if s.size == 0:
        return empty()
    if not bool(np.all(s[1:] >= s[:-1])):
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return Intervals(s[first], run_end[last])


def union_many(*sets: Intervals) -> Intervals:
    if not sets:
        return empty()
    if sum(len(x) for x in sets) <= SMALL:
        return _union_py([v for x in sets for v in x.start_ns.tolist()], [v for x in sets for v in x.end_ns.tolist()])
    return union(np.concatenate([x.start_ns for x in sets]), np.concatenate([x.end_ns for x in sets]))


def _sweep_py(a: Intervals, b: Intervals, keep_a_and_b: bool) -> Intervals:
    # The sweep below on Python ints: the state after all boundary events at a point decides
    # the segment that starts there; touching kept segments merge, as union() merges them.
    ev: dict[int, list] = {}
    for arr, da, db in ((a.start_ns, 1, 0), (a.end_ns, -1, 0), (b.start_ns, 0, 1), (b.end_ns, 0, -1)):
        for p in arr.tolist():
            d = ev.get(p)
            if d is None:
                ev[p] = [da, db]
            else:
                d[0] += da
                d[1] += db
    out_s, out_e = [], []
    ca = cb = 0
    prev, inside = None, False
    for p in sorted(ev):
        if inside:
            if out_e and out_e[-1] == prev:
                out_e[-1] = p
            else:
                out_s.append(prev)
                out_e.append(p)
        d = ev[p]
        ca += d[0]
        cb += d[1]
        inside = ca > 0 and (cb > 0 if keep_a_and_b else cb == 0)
        prev = p
    return Intervals(_arr(out_s), _arr(out_e))


def _sweep(a: Intervals, b: Intervals, keep_a_and_b: bool) -> Intervals:
    # Both inputs are disjoint unions; walk the merged boundaries and keep the segments
    # where (a and b) or (a and not b) holds.
    if len(a) == 0 or (keep_a_and_b and len(b) == 0):
        return empty()
    if 2 * (len(a) + len(b)) <= SMALL:
        return _sweep_py(a, b, keep_a_and_b)
    if _in_order(a) and (len(b) == 0 or _in_order(b)):
        return _meet(a, b if keep_a_and_b else _outside(b, a))
    return _sweep_np(a, b, keep_a_and_b)


def _sweep_np(a: Intervals, b: Intervals, keep_a_and_b: bool) -> Intervals:
    """The sweep over all boundaries, sorted: for inputs not in order (overlapping intervals)."""
    pts = np.concatenate([a.start_ns, a.end_ns, b.start_ns, b.end_ns])
    if pts.size == 0:
        return empty()
    da = np.concatenate([np.ones(len(a), _I64), -np.ones(len(a), _I64), np.zeros(2 * len(b), _I64)])
    db = np.concatenate([np.zeros(2 * len(a), _I64), np.ones(len(b), _I64), -np.ones(len(b), _I64)])
    order = np.argsort(pts, kind="stable")
    pts, da, db = pts[order], da[order], db[order]
    # Collapse equal boundary points so each segment [pts[i], pts[i+1]) has one state.
    uniq, idx = np.unique(pts, return_index=True)
    ca = np.cumsum(da)
    cb = np.cumsum(db)
    last_of_point = np.append(idx[1:] - 1, pts.size - 1)
    ca, cb = ca[last_of_point], cb[last_of_point]
    inside = (ca > 0) & (cb > 0) if keep_a_and_b else (ca > 0) & (cb == 0)
    seg = np.flatnonzero(inside[:-1])
    return union(uniq[seg], uniq[seg + 1])


def _in_order(iv: Intervals) -> bool:
    """Disjoint (touching allowed) and in start order, as union() and the set operations give."""
    return bool(np.all(iv.start_ns[1:] >= iv.end_ns[:-1]))


def _outside(b: Intervals, a: Intervals) -> Intervals:
    """The complement of b (in order) over a's span: the gaps between b's intervals."""
    if len(b) == 0:
        return Intervals(a.start_ns[:1], a.end_ns[-1:])
    s = np.concatenate([a.start_ns[:1], b.end_ns])
    e = np.concatenate([b.start_ns, a.end_ns[-1:]])
    keep = e > s
    return Intervals(s[keep], e[keep])


def _meet(a: Intervals, b: Intervals) -> Intervals:
    """a and b for two unions in order, without a sort of all boundaries: for each interval of
    the shorter, the other's intervals it overlaps (two binary searches), cut to it. The same
    set as the sweep's, as a union (touching pieces merged)."""
    if len(b) > len(a):
        a, b = b, a
    if len(b) == 0:
        return empty()
    i0 = searchsorted(a.end_ns, b.start_ns, side="right")  # the first of a ending after b's start
    cnt = np.maximum(searchsorted(a.start_ns, b.end_ns, side="left") - i0, 0)
    if int(cnt.max()) <= 1:  # each of b meets one of a at most: no repeats
        which = np.flatnonzero(cnt)
        j = i0[which]
    else:
        which = np.repeat(np.arange(cnt.size), cnt)
        j = np.repeat(i0, cnt) + (np.arange(which.size) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    s = np.maximum(a.start_ns[j], b.start_ns[which])
    e = np.minimum(a.end_ns[j], b.end_ns[which])
    return union(s, e)


def intersect(a: Intervals, b: Intervals) -> Intervals:
    return _sweep(a, b, True)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    return _sweep(a, b, False)


def clip(iv: Intervals, lo_ns: int, hi_ns: int) -> Intervals:
    """The part of a disjoint union inside [lo, hi)."""
    i = int(searchsorted(iv.end_ns, lo_ns, side="right"))
    j = int(searchsorted(iv.start_ns, hi_ns, side="left"))
    if j <= i:
        return empty()
    s = np.maximum(iv.start_ns[i:j], lo_ns)
    e = np.minimum(iv.end_ns[i:j], hi_ns)
    keep = e > s
    return Intervals(s[keep], e[keep])


def gaps(iv: Intervals, lo_ns: int, hi_ns: int) -> Intervals:
    """Complement of a disjoint union inside [lo, hi): the idle gaps."""
    return subtract(Intervals(np.array([lo_ns], _I64), np.array([hi_ns], _I64)), clip(iv, lo_ns, hi_ns))


def first_per_group(iv: Intervals, group: np.ndarray, amount: np.ndarray) -> Intervals:
    """The first `amount[g]` ns of each group's pieces, in time order: `iv` pieces in time
    order, `group` their group (non-decreasing, as StepFrame.split gives steps)."""
    group = np.asarray(group, _I64)
    length = iv.end_ns - iv.start_ns
    if length.size == 0:
        return empty()
    run = np.cumsum(length)
    first = searchsorted(group, group, side="left")
    before = run - length - (run[first] - length[first])  # earlier pieces of the same group
    take = np.clip(np.asarray(amount, _I64)[group] - before, 0, length)
    keep = take > 0
    return Intervals(iv.start_ns[keep], iv.start_ns[keep] + take[keep])


def covered_between(iv: Intervals, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
    """For many windows at once: length of a disjoint union inside each [lo, hi)."""
    lo_ns = np.asarray(lo_ns, _I64)
    hi_ns = np.asarray(hi_ns, _I64)
    if len(iv) == 0:
        return np.zeros(lo_ns.shape, _I64)
    lengths = iv.end_ns - iv.start_ns
    before = np.concatenate([[0], np.cumsum(lengths)])

    def cum(t):
        k = searchsorted(iv.start_ns, t, side="right") - 1
        kk = np.clip(k, 0, None)
        part = np.clip(t - iv.start_ns[kk], 0, lengths[kk])
        return np.where(k < 0, 0, before[kk] + part)

    return np.maximum(cum(hi_ns) - cum(lo_ns), 0)


def overlap_sum_between(start_ns: np.ndarray, end_ns: np.ndarray, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
    """For many windows: sum over raw (overlapping) intervals of their overlap with [lo, hi).

    F(t) = sum_i |[s_i, e_i) n (-inf, t)| = sum_{s_i<=t}(t - s_i) - sum_{e_i<=t}(t - e_i);
    the answer is F(hi) - F(lo). Two sorted arrays with prefix sums, no loop.
    """
    lo_ns = np.asarray(lo_ns, _I64)
    hi_ns = np.asarray(hi_ns, _I64)
    s = np.sort(np.asarray(start_ns, _I64))
    e = np.sort(np.asarray(end_ns, _I64))
    if s.size == 0:
        return np.zeros(lo_ns.shape, _I64)
    ps = np.concatenate([[0], np.cumsum(s)])
    pe = np.concatenate([[0], np.cumsum(e)])

    def f(t):
        ns = searchsorted(s, t, side="right")
        ne = searchsorted(e, t, side="right")
        return (ns * t - ps[ns]) - (ne * t - pe[ne])

    return f(hi_ns) - f(lo_ns)


def overlap_factor(kernel_sum_ns: int, busy_ns: int) -> float | None:
    """kernel sum / busy: 1.0 means serial kernels, above 1 means streams overlapped."""
    return None if busy_ns <= 0 else round(kernel_sum_ns / busy_ns, 6)


def round6(x: np.ndarray) -> np.ndarray:
    """Python's round(v, 6) of every float, as an array, the same floats. rint(v * 1e6) / 1e6 is
    round's answer wherever v * 1e6 is not within a hair of a half (k / 1e6 of two exact doubles
    is the double nearest the decimal k e-6, which round returns); the few within it take round
    itself. A million Python calls cost ~0.65 s of a 1M-step diagnosis."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = x * 1e6
        out = np.rint(scaled) / 1e6
        near = np.flatnonzero(~(np.abs(scaled - np.floor(scaled) - 0.5) >= 1e-6))  # NaN and inf too
    out[near] = [round(v, 6) if np.isfinite(v) else v for v in x[near].tolist()]
    return out


def overlap_factors(kernel_sum_ns: np.ndarray, busy_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """overlap_factor for many steps: (values, null mask), the same floats."""
    k, b = np.asarray(kernel_sum_ns, _I64), np.asarray(busy_ns, _I64)
    null = b <= 0
    out = round6(k / np.where(null, 1, b))  # int64 / int64 as Python's int / int below 2**53
    out[null] = 0.0
    return out, null


def gap_records(g: Intervals, origin_ns: int, limit: int) -> list[dict]:
    """The `limit` longest gaps as records on the absolute timeline, longest first."""
    if len(g) == 0:
        return []
    lengths = g.end_ns - g.start_ns
    top = np.argsort(-lengths, kind="stable")[:limit]
    return [
        {"start_ns": int(g.start_ns[i] + origin_ns), "end_ns": int(g.end_ns[i] + origin_ns), "length_ns": int(lengths[i])}
        for i in top
    ]
