"""A verdict as soon as the evidence allows: a group-sequential design with alpha spending.

`trials: {stop: early}` runs blocks in waves and looks at the evidence after each wave; it
stops when the interval clears the A/A floor (faster/slower), when it rules out a change
larger than the minimal effect (`min_effect_pct`, no detectable change), or at the block
limit (`blocks`). Looking after every wave with the fixed design's 95% interval would not
hold the error at 5%: each look is another chance for noise to cross the line (Armitage,
McPherson & Rowe 1969: five looks at 5% give about 14%).

Method: a group-sequential design whose error is spent across the looks (Lan & DeMets 1983,
"Discrete sequential boundaries for clinical trials", Biometrika 70:659-663), with the linear
(Pocock-type) spending function alpha(t) = alpha * t, t = blocks so far / block limit (Kim &
DeMets 1987 for the power family). Look k uses the exact signed-rank interval of the fixed
design (stats.hodges_lehmann) at level 1 - alpha_k, alpha_k = alpha(t_k) - alpha(t_{k-1}).
The looks and their levels are fixed in the plan before any run, so by the union bound
(Bonferroni) the chance that ANY look's interval misses the true shift is at most
sum(alpha_k) = alpha, whatever the data and whenever the design stops. This is the
conservative form of the spending design: it needs no joint distribution of the looks
(the signed-rank intervals of nested samples have none in closed form), and a verdict can only
be wrong when its look's interval missed. A verdict of faster/slower needs that interval to
lie beyond the floor, so it excludes 0: under no change the false-positive rate is at most
alpha at every stopping time (tests/test_sequential.py simulates it).

A look needs an interval: n blocks give the signed-rank interval at level 1 - a only when
2 * 2**-n <= a. Alpha of a wave too small for an interval is carried to the next look (its
level is still fixed in advance), and the first look is the first wave end with enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import verdict as V

from ..plan.types import Stop
from ..plan.stopping import DEFAULT_MIN_EFFECT_PCT, DEFAULT_WAVE, STOPS, design, looks  # noqa: F401  (the plan fixes them)


@dataclass(frozen=True)
class Look:
    """One look at the evidence: what it decided and at which level."""

    index: int  # 0-based look number
    blocks: int  # blocks the look read
    level: float  # confidence of this look's interval: 1 - alpha_k
    stop: bool
    why: str  # "clears_floor", "rules_out_min_effect", "block_limit" or "continue"
    decision: V.Decision | None


def judge(d: np.ndarray, c: np.ndarray, stop: Stop, look_index: int) -> Look:
    """Look `look_index` of the plan's `stop` design on the blocks' d and c (log ratios)."""
    plan_looks = stop.looks
    look = plan_looks[look_index]
    level = 1.0 - float(look.alpha)
    dec = V.decide(np.asarray(d, float)[None, :], np.asarray(c, float)[None, :], level)
    verdict = int(dec.verdict[0])
    lo, hi = float(dec.low_log[0]), float(dec.high_log[0])
    delta = float(stop.min_effect_log)
    last = look_index == len(plan_looks) - 1
    if verdict in (V.FASTER, V.SLOWER):
        why = "clears_floor"
    elif math.isfinite(lo) and math.isfinite(hi) and -delta < lo and hi < delta:
        why = "rules_out_min_effect"
    elif last:
        why = "block_limit"
    else:
        why = "continue"
    return Look(look_index, int(look.blocks), level, why != "continue", why, dec)


def verdict_code(look: Look) -> int:
    """The verdict a stopped look gives: its interval beyond the floor, or within the minimal
    effect (no detectable change at this look's level), else the fixed rule's (inconclusive)."""
    if look.decision is None:
        return V.INCONCLUSIVE
    if look.why == "rules_out_min_effect":
        return V.NO_CHANGE
    code = int(look.decision.verdict[0])
    return code if code in (V.FASTER, V.SLOWER) else (V.NO_CHANGE if code == V.NO_CHANGE else V.INCONCLUSIVE)


def look_at(blocks_done: int, stop: Stop) -> int | None:
    """The look whose blocks are exactly `blocks_done`, or None."""
    for k, look in enumerate(stop.looks):
        if look.blocks == blocks_done:
            return k
    return None


def simulate(d: np.ndarray, c: np.ndarray, stop: Stop) -> tuple[np.ndarray, np.ndarray]:
    """(verdict codes, blocks used) of many experiments at once: d and c are (experiments,
    block_limit) arrays of block values; each experiment stops at its first stopping look.
    The same judge() as the workflow, vectorized by look (the tests' simulation)."""
    d, c = np.asarray(d, float), np.asarray(c, float)
    m = d.shape[0]
    code = np.full(m, -1, dtype=np.int8)
    used = np.zeros(m, dtype=np.int64)
    delta = float(stop.min_effect_log)
    plan_looks = stop.looks
    for k, look in enumerate(plan_looks):
        open_ = code < 0
        if not open_.any():
            break
        n = int(look.blocks)
        dec = V.decide(d[open_, :n], c[open_, :n], 1.0 - float(look.alpha))
        v = dec.verdict.astype(np.int8)
        within = np.isfinite(dec.low_log) & np.isfinite(dec.high_log) & (dec.low_log > -delta) & (dec.high_log < delta)
        last = k == len(plan_looks) - 1
        got = np.where(np.isin(v, (V.FASTER, V.SLOWER)), v,
                       np.where(within, V.NO_CHANGE, np.where(last, np.where(v == V.NO_CHANGE, V.NO_CHANGE, V.INCONCLUSIVE), -1)))
        idx = np.nonzero(open_)[0]
        code[idx] = got
        used[idx[got >= 0]] = n
    return code, used
