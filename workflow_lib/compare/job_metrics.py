"""A job's other metrics beside the chosen one, each with its own A/A floor.

Every run of a job records its value under each job metric it could be judged by
(plan/job_metric.alternates: the slowest rank per step and the throughput, over every rank
and per declared role), keyed by the `trials.metric` that selects it. Per used block this
module forms, as the headline does, d_b = log(median B / median A) and c_b = log(median A' /
median A) and judges them with verdict.decide: each role's throughput and time per step come
with an interval and a floor of their own (`job_metrics[]`).

When the chosen metric's floor is too wide to conclude, `suggestion` names the metric whose
A/A floor was smallest, read from the A and A' runs only (c_b; never the candidate, so
choosing it cannot favour an answer), and the config line that selects it.
"""

from __future__ import annotations

import math

import numpy as np

from ..plan.job_metric import config_line, selector
from ..trials.types import Execution
from . import verdict as V


def _medians(execution: Execution, key: str) -> dict[str, float | None]:
    vals: dict[str, list[float]] = {"A": [], "B": [], "A'": []}
    for run in execution.runs:
        if run["status"] == "ok" and run["arm"] in vals:
            v = (run.get("alternates") or {}).get(key)
            if v is None or not (math.isfinite(v) and v > 0):
                return {}
            vals[run["arm"]].append(float(v))
    return {arm: (float(np.median(v)) if v else None) for arm, v in vals.items()}


def _keys(executions: list[Execution]) -> list[str]:
    seen: dict[str, None] = {}
    for ex in executions:
        for run in ex.runs:
            if run["status"] == "ok":
                seen.update(dict.fromkeys(run.get("alternates") or {}))
    return sorted(seen)


def _label(key: str) -> str:
    parts = dict(p.split("=", 1) for p in key.split(","))
    who = f"the {parts['role']} ranks" if "role" in parts else "every rank"
    return {"throughput": f"throughput of {who} (time over work)",
            "slowest_rank": f"time per step of {who} (slowest rank per step)"}.get(parts["job"], key)


def rows(used: list[Execution], confidence: float, chosen: str | None) -> list[dict]:
    """`job_metrics[]`: each alternate's estimate, interval and own floor over the used blocks."""
    out = []
    for key in _keys(used):
        meds = [_medians(ex, key) for ex in used]
        if not meds or any(not m or m["A"] is None or m["B"] is None for m in meds):
            continue
        d = np.asarray([math.log(m["B"]) - math.log(m["A"]) for m in meds])
        c = np.asarray([math.log(m["A'"]) - math.log(m["A"]) for m in meds if m["A'"] is not None])
        try:
            dec = V.decide(d[None, :], c[None, :], confidence)
        except (FloatingPointError, ArithmeticError, ValueError):
            continue
        est, lo, hi, floor = (float(getattr(dec, n)[0]) for n in ("estimate_log", "low_log", "high_log", "floor_log"))
        pct = (lambda x: math.expm1(x) * 100.0 if math.isfinite(x) else None)
        out.append({"selector": key, "label": _label(key), "config": config_line(key), "chosen": key == chosen,
                    "change_pct": pct(est), "low_pct": pct(lo), "high_pct": pct(hi),
                    "floor_pct": pct(floor), "verdict": V.VERDICTS[int(dec.verdict[0])]})
    return out


def chosen_selector(metric: dict) -> str | None:
    """The selector of the plan's own metric (None for one process or a rank subset)."""
    if "expect_ranks" not in metric or metric.get("ranks") is not None and metric.get("role") is None:
        return None
    return selector(metric.get("job", "slowest_rank"), metric.get("role"))


def suggestion(verdict: str, noise_floor, job_rows: list[dict]) -> str | None:
    """When the chosen metric's A/A floor (`noise_floor`: the comparison's NoiseFloor) is too wide
    to conclude: the other recorded metric with the smallest floor (from A and A' only) and the
    config line that selects it."""
    if verdict in ("faster", "slower"):
        return None
    floor = noise_floor.log
    if floor is not None and floor <= V.MAX_NULL_MDE_LOG:
        return None  # the floor is not what stopped it
    others = [r for r in job_rows if not r["chosen"] and r["floor_pct"] is not None]
    if not others:
        return None
    best = min(others, key=lambda r: r["floor_pct"])
    mine = noise_floor.pct
    if mine is not None and best["floor_pct"] >= mine:
        return (f"no other recorded metric had a smaller A/A floor (smallest: {best['label']} "
                f"±{best['floor_pct']:.3g}%)")
    return (f"the A/A floor is too wide to conclude (±{mine:.3g}%); {best['label']} had an A/A floor of "
            f"±{best['floor_pct']:.3g}% in these runs (A and A' only): select it with `{best['config']}`"
            if mine is not None else
            f"{best['label']} had an A/A floor of ±{best['floor_pct']:.3g}% (A and A' only): `{best['config']}`")
