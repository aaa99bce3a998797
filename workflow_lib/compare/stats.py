"""Small, pure statistics used by the comparison (no SciPy on the trial nodes).

- Wilcoxon signed-rank null distribution, exact for any n (Wilcoxon 1945), and the
  Hodges-Lehmann estimate with its distribution-free confidence interval from Walsh
  averages (Hodges & Lehmann 1963; Hollander, Wolfe & Chicken, *Nonparametric
  Statistical Methods*, 3rd ed., ch. 3). Vectorized over leading axes so the
  statistical validation can run thousands of simulated experiments at once.
- Student's t distribution and the beta quantile through the regularized incomplete
  beta function (continued fraction, modified Lentz; Press et al., *Numerical
  Recipes*, 3rd ed., section 6.4), for the minimal detectable effect, for Welch's
  test in the side-by-side, and for Clopper-Pearson bounds in the tests.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..core.config.numbers import min_blocks  # noqa: F401 (the fewest blocks: defined where a design below it is refused)
from . import walsh_select

# Continued-fraction accuracy: 1e-14 relative is far below any threshold we use.
_BETACF_EPS = 1e-14
_BETACF_MAX_ITER = 500
_TINY = 1e-300


@functools.lru_cache(maxsize=64)
def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2 under the null of n signs each +/- with p = 1/2.

    Built by the recurrence P_k(t) = (P_{k-1}(t) + P_{k-1}(t - k)) / 2 in float64
    probabilities (exact counts overflow past n = 60); 200 blocks take ~1 ms.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    top = 0
    for k in range(1, n + 1):
        shifted = np.zeros_like(pmf)
        shifted[k : top + k + 1] = pmf[: top + 1]
        pmf = 0.5 * (pmf + shifted)
        top += k
    cdf = np.cumsum(pmf)
    cdf.setflags(write=False)
    return cdf


def walsh_rank(n: int, confidence: float) -> int | None:
    """1-based rank k so that [W_(k), W_(M+1-k)] of the M = n(n+1)/2 sorted Walsh
    averages covers the centre of symmetry with probability >= confidence.

    None when n is too small for any interval at this confidence (2**-n > alpha/2).
    """
    alpha_half = (1.0 - confidence) / 2.0
    if n < 1:
        return None
    if n > walsh_select.EXACT_CDF_MAX_N:  # the exact recurrence is O(n^3)
        return walsh_select.critical_rank_normal(n, confidence)
    cdf = signed_rank_cdf(n)
    # Largest c with P(T+ <= c) <= alpha/2; the interval drops c Walsh averages per side.
    below = np.nonzero(cdf <= alpha_half * (1.0 + 1e-12))[0]
    if below.size == 0:
        return None
    return int(below[-1]) + 1


def walsh_averages(x: np.ndarray) -> np.ndarray:
    """Sorted Walsh averages (x_i + x_j)/2, i <= j, along the last axis."""
    n = x.shape[-1]
    i, j = np.triu_indices(n)
    return np.sort(0.5 * (x[..., i] + x[..., j]), axis=-1)


def hodges_lehmann(x: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hodges-Lehmann estimate and signed-rank confidence interval along the last axis.

    Returns (estimate, low, high); low/high are NaN where n is too small (see walsh_rank).
    Exact, distribution-free coverage needs only that each value is independent and
    symmetric about the true shift, which the randomized schedule guarantees under
    no change (A and B labels are exchangeable within a block).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n > walsh_select.SORT_MAX_N:  # n(n+1)/2 averages would not fit: select the few needed
        k = walsh_rank(n, confidence)
        rows = [walsh_select.hodges_lehmann_1d(row, k) for row in x.reshape(-1, n)]
        est, lo, hi = (np.asarray(v, dtype=float).reshape(x.shape[:-1]) for v in zip(*rows))
        return est, lo, hi
    walsh = walsh_averages(x)
    est = np.median(walsh, axis=-1)
    k = walsh_rank(n, confidence)
    if k is None:
        nan = np.full(est.shape, np.nan)
        return est, nan, nan.copy()
    m = walsh.shape[-1]
    return est, walsh[..., k - 1], walsh[..., m - k]


# --- incomplete beta, Student's t, Clopper-Pearson --------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _BETACF_MAX_ITER + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _BETACF_EPS:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a, b > 0, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The continued fraction converges fast for x < (a+1)/(a+b+2); use symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _bisect(f, lo: float, hi: float, target: float, iters: int = 200) -> float:
    """Root of increasing f(x) = target on [lo, hi] by bisection (robust, no derivatives)."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


def t_cdf(t: float, df: float) -> float:
    """Student's t CDF with df degrees of freedom (df may be fractional, as in Welch)."""
    if df <= 0:
        raise ValueError(f"t distribution needs df > 0, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t (bisection on t_cdf; accurate to ~1e-12)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    hi = 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
    return _bisect(lambda t: t_cdf(t, df), 0.0, hi, q)


def beta_ppf(q: float, a: float, b: float) -> float:
    """Quantile of the Beta(a, b) distribution."""
    return _bisect(lambda x: betainc(a, b, x), 0.0, 1.0, q)


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact (Clopper & Pearson 1934) interval for a binomial proportion."""
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials > 0, got {successes}/{trials}")
    alpha = 1.0 - confidence
    lo = 0.0 if successes == 0 else beta_ppf(alpha / 2, successes, trials - successes + 1)
    hi = 1.0 if successes == trials else beta_ppf(1 - alpha / 2, successes + 1, trials - successes)
    return lo, hi


def clopper_pearson_upper(successes: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided exact upper bound: the rate is below this with probability `confidence`."""
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials > 0, got {successes}/{trials}")
    if successes == trials:
        return 1.0
    return beta_ppf(confidence, successes + 1, trials - successes)


def welch_t_test(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Welch's unequal-variance t test (Welch 1947): (t, two-sided p)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se2 = vx + vy
    if se2 == 0.0:
        raise ArithmeticError("both samples have zero variance; Welch's t is undefined")
    t = float((x.mean() - y.mean()) / math.sqrt(se2))
    df = se2 * se2 / (vx * vx / (x.size - 1) + vy * vy / (y.size - 1))
    p = 2.0 * t_cdf(-abs(t), df)
    return t, min(1.0, p)
