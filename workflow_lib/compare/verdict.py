"""The decision rule: per-block log ratios in, estimate, noise floor, MDE and verdict out.

Vectorized over leading axes so that one call judges thousands of simulated
experiments (tests/test_compare_stats.py) exactly as compare.compare judges one.

Inputs, per block b (natural log, lower is better):
    d_b = log(median B_b) - log(median A_b)    candidate vs baseline, paired in the block
    c_b = log(median A'_b) - log(median A_b)   baseline control vs baseline (A/A)

Method (docs/statistics.md has the derivations and citations):
- estimate: Hodges-Lehmann median of Walsh averages of d; interval: the signed-rank
  interval at the plan's confidence. The randomized, A/B-exchangeable schedule makes
  each d_b symmetric about 0 when nothing changed, so coverage is exact whatever the
  run-to-run distribution (heavy tails, outliers, clock states, drift).
- noise floor: the same interval on c; the floor is its largest absolute end, i.e.
  the largest A/A difference consistent with the controls.
- minimal detectable effect (after Bloom 1995), with se = sd(d) / sqrt(n) and n - 1
  degrees of freedom: floor + (t_{1-alpha/2} + t_power) * se.
- verdict faster/slower only when the whole interval lies beyond the floor: it then
  excludes 0 AND the effect (every value in the interval) exceeds the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import stats

# Power at which the minimal detectable effect is stated: 0.8 is the convention of
# Cohen (1988) and Bloom (1995); changing it changes only the reported MDE.
MDE_POWER = 0.8

# A "no detectable change" claim is only worth making if the design could have seen a
# meaningful change. When the MDE (natural-log units; 0.05 = a 5.1% change) is larger,
# a null result is reported as inconclusive ("noise too high"). 5% is the size of
# regression users chase on GPU step times (the target case is 2% at 20 blocks);
# a setup that cannot rule out 5% has not shown "no change".
MAX_NULL_MDE_LOG = 0.05

VERDICTS = ("faster", "slower", "no_detectable_change", "inconclusive")
FASTER, SLOWER, NO_CHANGE, INCONCLUSIVE = range(4)


@dataclass(frozen=True)
class Decision:
    """Arrays share the leading shape of the inputs; log units unless named otherwise."""

    estimate_log: np.ndarray  # Hodges-Lehmann estimate of log(B/A)
    low_log: np.ndarray  # interval low end (NaN when n < min_blocks)
    high_log: np.ndarray  # interval high end
    floor_log: np.ndarray  # noise floor: max |end| of the A'/A interval (NaN if unmeasured)
    control_estimate_log: np.ndarray  # Hodges-Lehmann estimate of log(A'/A)
    control_low_log: np.ndarray
    control_high_log: np.ndarray
    mde_log: np.ndarray  # minimal detectable effect (NaN when n < 2)
    verdict: np.ndarray  # int codes indexing VERDICTS
    n_blocks: int  # valid blocks behind d
    n_control_blocks: int  # valid blocks behind c
    min_blocks: int  # fewest blocks for which an interval exists at this confidence


def _mde_log(d: np.ndarray, floor: np.ndarray, confidence: float) -> np.ndarray:
    n = d.shape[-1]
    if n < 2:
        return np.full(d.shape[:-1], np.nan)
    t_alpha = stats.t_ppf(1 - (1 - confidence) / 2, n - 1)
    t_power = stats.t_ppf(MDE_POWER, n - 1)
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    # Bloom's (t_a + t_p) * se is the effect whose interval clears 0 with the stated
    # power; ours must clear the floor, so the floor adds on. With the floor unmeasured
    # (NaN) no verdict is possible anyway; report the interval part alone.
    return (t_alpha + t_power) * se + np.nan_to_num(floor, nan=0.0)


def decide(d: np.ndarray, c: np.ndarray, confidence: float) -> Decision:
    """Judge experiments: d is (..., n) candidate log ratios, c is (..., m) control ones.

    Numeric trouble raises FloatingPointError/ArithmeticError; the caller turns that into
    `inconclusive`, never into a significant result.
    """
    d = np.asarray(d, dtype=float)
    c = np.asarray(c, dtype=float)
    n, m = d.shape[-1], c.shape[-1]
    need = stats.min_blocks(confidence)
    with np.errstate(all="raise"):
        est, lo, hi = _interval(d, confidence, need)
        c_est, c_lo, c_hi = _interval(c, confidence, need)
        floor = np.fmax(np.abs(c_lo), np.abs(c_hi)) if m >= need else np.full(d.shape[:-1], np.nan)
        mde = _mde_log(d, floor, confidence)
        verdict = np.full(d.shape[:-1], INCONCLUSIVE, dtype=np.int8)
        if n >= need and m >= need:
            # The whole interval must lie outside the band [-floor, +floor]: then it
            # excludes no change AND every plausible effect, the estimate included,
            # exceeds the largest A/A difference the controls allow.
            changed = (lo > floor) | (hi < -floor)
            verdict = np.where(changed & (est < 0), FASTER, verdict)
            verdict = np.where(changed & (est > 0), SLOWER, verdict)
            quiet = ~changed & (mde <= MAX_NULL_MDE_LOG)
            verdict = np.where(quiet, NO_CHANGE, verdict).astype(np.int8)
    return Decision(est, lo, hi, floor, c_est, c_lo, c_hi, mde, verdict, n, m, need)


def _interval(x: np.ndarray, confidence: float, need: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if x.shape[-1] == 0:
        nan = np.full(x.shape[:-1], np.nan)
        return nan, nan.copy(), nan.copy()
    est, lo, hi = stats.hodges_lehmann(x, confidence)
    if x.shape[-1] < need:  # no interval exists; keep the estimate for information
        lo, hi = np.full(est.shape, np.nan), np.full(est.shape, np.nan)
    return est, lo, hi
