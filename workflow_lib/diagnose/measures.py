"""Interval algebra and the four measures (wall, kernel sum, busy, idle gaps) plus host API time.

Everything is vectorized over NumPy int64 arrays: a union is a sort plus a running maximum,
per-window sums are two `searchsorted` lookups into prefix sums. Times are ns on the incident's
host timeline. Callers subtract a common origin before calling when values are absolute Unix
ns, so that products of counts and times stay far from int64 overflow.
"""

from __future__ import annotations

import numpy as np

from .types import Intervals

_I64 = np.int64


def empty() -> Intervals:
    return Intervals(np.zeros(0, _I64), np.zeros(0, _I64))


def as_intervals(start_ns, end_ns) -> Intervals:
    """Raw (possibly overlapping, unsorted) intervals -> their union."""
    return union(np.asarray(start_ns, _I64), np.asarray(end_ns, _I64))


def union(start_ns: np.ndarray, end_ns: np.ndarray) -> Intervals:
    """Union of [start, end) intervals: sort by start, running max of ends, split where a start
    exceeds every end before it. Zero-length intervals vanish."""
    start_ns = np.asarray(start_ns, _I64)
    end_ns = np.asarray(end_ns, _I64)
    keep = end_ns > start_ns
    s, e = start_ns[keep], end_ns[keep]
    if s.size == 0:
        return empty()
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
    return union(np.concatenate([x.start_ns for x in sets]), np.concatenate([x.end_ns for x in sets]))


def _sweep(a: Intervals, b: Intervals, keep_a_and_b: bool) -> Intervals:
    # Both inputs are disjoint unions; walk the merged boundaries and keep the segments
    # where (a and b) or (a and not b) holds.
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


def intersect(a: Intervals, b: Intervals) -> Intervals:
    return _sweep(a, b, True)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    return _sweep(a, b, False)


def clip(iv: Intervals, lo_ns: int, hi_ns: int) -> Intervals:
    """The part of a disjoint union inside [lo, hi)."""
    i = int(np.searchsorted(iv.end_ns, lo_ns, side="right"))
    j = int(np.searchsorted(iv.start_ns, hi_ns, side="left"))
    if j <= i:
        return empty()
    s = np.maximum(iv.start_ns[i:j], lo_ns)
    e = np.minimum(iv.end_ns[i:j], hi_ns)
    keep = e > s
    return Intervals(s[keep], e[keep])


def gaps(iv: Intervals, lo_ns: int, hi_ns: int) -> Intervals:
    """Complement of a disjoint union inside [lo, hi): the idle gaps."""
    return subtract(Intervals(np.array([lo_ns], _I64), np.array([hi_ns], _I64)), clip(iv, lo_ns, hi_ns))


def covered_between(iv: Intervals, lo_ns: np.ndarray, hi_ns: np.ndarray) -> np.ndarray:
    """For many windows at once: length of a disjoint union inside each [lo, hi)."""
    lo_ns = np.asarray(lo_ns, _I64)
    hi_ns = np.asarray(hi_ns, _I64)
    if len(iv) == 0:
        return np.zeros(lo_ns.shape, _I64)
    lengths = iv.end_ns - iv.start_ns
    before = np.concatenate([[0], np.cumsum(lengths)])

    def cum(t):
        k = np.searchsorted(iv.start_ns, t, side="right") - 1
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
        ns = np.searchsorted(s, t, side="right")
        ne = np.searchsorted(e, t, side="right")
        return (ns * t - ps[ns]) - (ne * t - pe[ne])

    return f(hi_ns) - f(lo_ns)


def overlap_factor(kernel_sum_ns: int, busy_ns: int) -> float | None:
    """kernel sum / busy: 1.0 means serial kernels, above 1 means streams overlapped."""
    return None if busy_ns <= 0 else round(kernel_sum_ns / busy_ns, 6)


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
