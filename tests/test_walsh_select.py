"""Large-n Hodges-Lehmann: selected Walsh averages equal the fully sorted ones; the approximated
critical rank equals the exact one where both can be computed."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.compare import stats, walsh_select


def _full(x: np.ndarray, k: int) -> tuple[float, float, float]:
    w = stats.walsh_averages(x)
    m = w.size
    return float(np.median(w)), float(w[k - 1]), float(w[m - k])


@pytest.mark.parametrize("kind", ["normal", "rounded", "three_values", "all_equal", "heavy_tail"])
@pytest.mark.parametrize("n", [walsh_select.SORT_MAX_N + 1, 2_600])
def test_selection_matches_the_full_sort(kind, n):
    rng = np.random.default_rng(n)
    x = {"normal": lambda: rng.standard_normal(n),
         "rounded": lambda: np.round(rng.standard_normal(n), 1),  # many tied averages
         "three_values": lambda: rng.integers(-1, 2, n).astype(float),
         "all_equal": lambda: np.zeros(n),
         "heavy_tail": lambda: rng.standard_cauchy(n)}[kind]()
    k = stats.walsh_rank(n, 0.95)
    got = stats.hodges_lehmann(x, 0.95)  # takes the selection path at this n
    want = _full(x, k)
    # Tied real values can round to neighbouring floats depending on which pair made them.
    np.testing.assert_allclose([float(v) for v in got], want, rtol=1e-12, atol=1e-15)


def test_selection_over_leading_axes():
    x = np.random.default_rng(3).standard_normal((2, walsh_select.SORT_MAX_N + 5))
    est, lo, hi = stats.hodges_lehmann(x, 0.95)
    assert est.shape == lo.shape == hi.shape == (2,)
    for r in range(2):
        np.testing.assert_allclose([est[r], lo[r], hi[r]], _full(x[r], stats.walsh_rank(x.shape[1], 0.95)), rtol=1e-12)


@pytest.mark.parametrize("n", [60, 100, 200, 300, walsh_select.EXACT_CDF_MAX_N])
@pytest.mark.parametrize("confidence", [0.7, 0.8, 0.9, 0.95, 0.99])
def test_approximated_rank_equals_the_exact_one(n, confidence):
    exact = stats.walsh_rank(n, confidence)  # n <= EXACT_CDF_MAX_N: the exact distribution
    assert walsh_select.critical_rank_normal(n, confidence) == exact


def test_large_n_uses_the_approximation():
    n = walsh_select.EXACT_CDF_MAX_N + 1
    assert stats.walsh_rank(n, 0.95) == walsh_select.critical_rank_normal(n, 0.95)
