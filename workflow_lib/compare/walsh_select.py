"""Order statistics of Walsh averages without building all n(n+1)/2 of them.

`stats.hodges_lehmann` sorts every Walsh average (x_i + x_j)/2, i <= j: O(n^2) memory and
O(n^2 log n) time, 50 million values at 10,000 blocks. For large n this module finds the
few it needs (the median, and the two interval ends) by selection on the value: with x
sorted, the number of averages <= t is sum_j min(j + 1, #{i: x_i <= 2t - x_j}), one
`searchsorted` (O(n log n)); bisection on t narrows (lo, hi] until it holds at most a few
n averages, which are then listed and sorted. Same values as the full sort (each
average is one of them, chosen by the same rank), in O(n log n) per bisection step
(the idea of Monahan 1984, "Algorithm 616: fast computation of the Hodges-Lehmann
location estimator", ACM TOMS 10(3), with bisection instead of random pivots).

The signed-rank critical value for large n comes from the normal approximation of the
null distribution of T+ (mean n(n+1)/4, variance n(n+1)(2n+1)/24, continuity-corrected;
Hollander, Wolfe & Chicken, 3rd ed., section 3.1) with the Edgeworth term for its fourth
cumulant (Kendall & Stuart, vol. 1, section 6.17), because the exact recurrence costs
O(n^3) (0.07 s at n = 400, 1 s at 1,000, 11 s at 2,000 here). The approximated rank
equals the exact one for n = 60-400 at 70-99% (tests/test_walsh_select.py).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

# Above this many blocks the exact null distribution gives way to the normal approximation.
EXACT_CDF_MAX_N = 400
# Above this many values the Walsh averages are selected, not all sorted (2,000 -> 2 million averages, ~0.2 s).
SORT_MAX_N = 2_000
_BISECT_MAX = 200


def critical_rank_normal(n: int, confidence: float) -> int | None:
    """1-based rank k of the interval [W_(k), W_(M+1-k)]: the largest c with P(T+ <= c) <= alpha/2,
    plus one, with P from the normal approximation and its Edgeworth kurtosis term."""
    alpha_half = (1.0 - confidence) / 2.0
    mu = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0
    sigma = math.sqrt(var)
    # T+ = sum of k * Bernoulli(1/2), k = 1..n: fourth cumulant -(1/8) sum k^4 (lighter tails than
    # the normal, which alone puts c up to a few ranks off at n = 400).
    k4 = -n * (n + 1) * (2 * n + 1) * (3 * n * n + 3 * n - 1) / 240.0
    g = k4 / (24.0 * var * var)
    unit = NormalDist()

    def cdf(c: int) -> float:
        u = (c + 0.5 - mu) / sigma
        return unit.cdf(u) - unit.pdf(u) * g * (u ** 3 - 3 * u)

    c = math.floor(mu - 0.5 + unit.inv_cdf(alpha_half) * sigma)
    while c >= 0 and cdf(c) > alpha_half:
        c -= 1
    while cdf(c + 1) <= alpha_half:
        c += 1
    return c + 1 if c >= 0 else None


def _counts(x: np.ndarray, t: float) -> np.ndarray:
    """Per j, how many i <= j have (x_i + x_j)/2 <= t (x sorted)."""
    j = np.arange(x.size)
    return np.minimum(j + 1, np.searchsorted(x, 2.0 * t - x, side="right"))


def walsh_order_stats(x: np.ndarray, ranks: list[int]) -> list[float]:
    """The Walsh averages of rank k (1-based, ascending) for each k in `ranks`; x any order."""
    x = np.sort(np.asarray(x, dtype=float))
    return [_select(x, k) for k in ranks]


def _select(x: np.ndarray, k: int) -> float:
    n = x.size
    lo, hi = float(x[0]) - max(1.0, abs(float(x[0]))), float(x[-1])  # count(lo) = 0 < k <= count(hi) = M
    c_lo = np.zeros(n, np.int64)
    c_hi = _counts(x, hi)
    j = np.arange(n)
    for _ in range(_BISECT_MAX):
        if int(c_hi.sum() - c_lo.sum()) <= 4 * n:
            break
        # The smallest average above lo: when it already has rank >= k it is the answer
        # (this ends runs of tied values, e.g. many zero differences, that bisection cannot split).
        open_ = c_lo <= j
        a = float(np.min(0.5 * (x[c_lo[open_]] + x[open_])))
        c_a = _counts(x, a)
        if int(c_a.sum()) >= k:
            return a
        lo, c_lo = a, c_a
        mid = 0.5 * (lo + hi)
        if lo < mid < hi:
            c_mid = _counts(x, mid)
            if int(c_mid.sum()) < k:
                lo, c_lo = mid, c_mid
            else:
                hi, c_hi = mid, c_mid
    # List the averages in (lo, hi]: for column j, rows c_lo[j] .. c_hi[j]-1 (x sorted, i <= j).
    width = c_hi - c_lo
    cols = np.repeat(np.arange(n), width)
    rows = np.repeat(c_lo, width) + (np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width))
    vals = np.sort(0.5 * (x[rows] + x[cols]))
    return float(vals[k - int(c_lo.sum()) - 1])


def hodges_lehmann_1d(x: np.ndarray, k: int | None) -> tuple[float, float, float]:
    """(estimate, low, high) as stats.hodges_lehmann gives them for one row; NaN ends when k is None."""
    n = x.size
    m = n * (n + 1) // 2
    mid = [m // 2 + 1] if m % 2 else [m // 2, m // 2 + 1]
    want = mid + ([k, m + 1 - k] if k is not None else [])
    got = walsh_order_stats(x, want)
    est = float(np.mean(got[:len(mid)]))
    if k is None:
        return est, math.nan, math.nan
    return est, got[-2], got[-1]
