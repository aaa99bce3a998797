"""The small statistics module against known values and exactness properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workflow_lib.compare import stats


@pytest.mark.parametrize("q,df,expected", [(0.975, 5, 2.570582), (0.975, 19, 2.093024), (0.8, 19, 0.860951),
                                           (0.995, 1, 63.656741), (0.025, 10, -2.228139), (0.5, 3, 0.0)])
def test_t_quantiles(q, df, expected):
    assert stats.t_ppf(q, df) == pytest.approx(expected, abs=1e-5)


def test_t_cdf_symmetry_and_limits():
    assert stats.t_cdf(0.0, 4) == pytest.approx(0.5)
    assert stats.t_cdf(1.3, 7) + stats.t_cdf(-1.3, 7) == pytest.approx(1.0)
    assert stats.t_cdf(1.959964, 1e7) == pytest.approx(0.975, abs=1e-6)


def test_clopper_pearson_known_values():
    assert stats.clopper_pearson_upper(0, 1000) == pytest.approx(1 - 0.05 ** (1 / 1000), rel=1e-9)
    lo, hi = stats.clopper_pearson(3, 10)
    assert (lo, hi) == pytest.approx((0.066739, 0.652453), abs=1e-6)
    assert stats.clopper_pearson(10, 10)[1] == 1.0 and stats.clopper_pearson(0, 10)[0] == 0.0
    with pytest.raises(ValueError):
        stats.clopper_pearson(11, 10)


def test_signed_rank_distribution_small_n_exact():
    # n = 3: T+ takes 0..6 with counts 1,1,1,2,1,1,1 out of 8.
    assert stats.signed_rank_cdf(3) * 8 == pytest.approx(np.cumsum([1, 1, 1, 2, 1, 1, 1]))
    assert stats.signed_rank_cdf(200)[-1] == pytest.approx(1.0)


def test_walsh_rank_matches_tables_and_minimum_blocks():
    # Published two-sided 5% critical values of the signed-rank test: n=6 -> 0, n=10 -> 8, n=20 -> 52.
    assert stats.walsh_rank(6, 0.95) == 1 and stats.walsh_rank(10, 0.95) == 9 and stats.walsh_rank(20, 0.95) == 53
    assert stats.walsh_rank(5, 0.95) is None
    assert stats.min_blocks(0.95) == 6 and stats.min_blocks(0.99) == 8 and stats.min_blocks(0.9) == 5


def test_hodges_lehmann_on_small_sample():
    est, lo, hi = stats.hodges_lehmann(np.array([1.0, 2.0, 3.0, 4.0, 100.0, 5.0]), 0.95)
    assert float(est) == pytest.approx(3.5)  # the outlier barely moves it
    assert (float(lo), float(hi)) == (1.0, 100.0)  # n = 6: the interval spans min..max


def test_interval_coverage_is_exact_under_symmetry():
    # Cauchy block values (no mean, no variance): coverage still >= the nominal 95%.
    rng = np.random.default_rng(0)
    x = 0.3 + rng.standard_cauchy(size=(4000, 12))
    _, lo, hi = stats.hodges_lehmann(x, 0.95)
    coverage = np.mean((lo <= 0.3) & (hi >= 0.3))
    assert 0.945 <= coverage <= 0.975


def test_welch_matches_hand_computation():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 3.0, 4.0, 5.0, 7.0])
    t, p = stats.welch_t_test(x, y)
    se = math.sqrt(x.var(ddof=1) / 4 + y.var(ddof=1) / 5)
    assert t == pytest.approx((x.mean() - y.mean()) / se)
    assert 0.15 < p < 0.17
    with pytest.raises(ArithmeticError):
        stats.welch_t_test(np.ones(3), np.ones(3))
