"""The looks of a sequential design (`trials: {stop: early}`), fixed in the plan before any run.

compare/sequential.py has the method, its citation and its guarantee; this is the part the
plan records: after how many blocks each look comes and how much of the error it spends.
"""

from __future__ import annotations

import math

from .types import Stop, StopLook


STOPS = ("fixed", "early")
# Blocks per wave after the first look (config trials.wave_blocks): fewer means more looks,
# each with less alpha; 2 keeps the waves short while each look still has an interval.
DEFAULT_WAVE = 2
# The change a no-change stop must rule out (config trials.min_effect_pct): the same 5% the
# fixed design's "no detectable change" must be able to resolve (verdict.MAX_NULL_MDE_LOG).
DEFAULT_MIN_EFFECT_PCT = 5.0


def _interval_exists(n: int, alpha: float) -> bool:
    """n blocks have a signed-rank interval at level 1 - alpha iff all-one-sign is rare enough:
    2 * 2**-n <= alpha (compare/stats.walsh_rank; the same tolerance)."""
    return alpha > 0 and n >= 1 and 2.0 ** (1 - n) <= alpha * (1.0 + 1e-12)


def looks(limit: int, wave: int, confidence: float) -> list[dict]:
    """[{"blocks", "alpha"}]: when to look and at what error, fixed before any run.

    Wave ends at wave, 2*wave, ..., limit; each adds alpha * (blocks added) / limit; alpha
    too small for an interval at that many blocks is carried to the next wave end. Whatever
    is left at the limit goes to the last look (moved to the limit), so sum(alpha) = alpha."""
    if limit < 1 or wave < 1:
        raise ValueError(f"block limit {limit} and wave {wave} must be >= 1")
    alpha = 1.0 - confidence
    ends = sorted({*range(wave, limit, wave), limit})
    out, carried, prev = [], 0.0, 0
    for n in ends:
        carried += alpha * (n - prev) / limit
        prev = n
        if _interval_exists(n, carried):
            out.append({"blocks": n, "alpha": carried})
            carried = 0.0
    if carried > 0 and out:
        out[-1] = {"blocks": limit, "alpha": out[-1]["alpha"] + carried}
    if not out:
        raise ValueError(f"no look has an interval: {limit} blocks at confidence {confidence} "
                         f"(at least {math.ceil(math.log2(2.0 / (1.0 - confidence)) - 1e-12)} blocks are needed)")
    return out


def design(trials: dict) -> Stop | None:
    """The plan's `stop` for the config's trials section, as the plan's class (the config side and the
    plan read the same Stop); None for the fixed design."""
    if trials.get("stop", "fixed") != "early":
        return None
    limit, wave = int(trials["blocks"]), int(trials.get("wave_blocks", DEFAULT_WAVE))
    confidence = float(trials["confidence"])
    pct = float(trials.get("min_effect_pct", DEFAULT_MIN_EFFECT_PCT))
    return Stop(rule="early", method="group_sequential_linear_alpha_spending_bonferroni",
                block_limit=limit, wave_blocks=wave, min_effect_log=math.log1p(pct / 100.0),
                looks=[StopLook(**x) for x in looks(limit, wave, confidence)])


