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

from ..core.typed import ABSENT
from ..plan.job_metric import config_line, selector
from ..plan.job_shape import WAITING_SHARE
from ..plan.types import PlanMetric
from ..trials.types import Execution, Run
from . import verdict as V


def _medians(execution: Execution, key: str) -> dict[str, float | None]:
    vals: dict[str, list[float]] = {"A": [], "B": [], "A'": []}
    for run in execution.runs:
        if run.status == "ok" and run.arm in vals:
            v = (run.alternates or {}).get(key)  # alternates: a map keyed by job metric, null for a single process
            if v is None or not (math.isfinite(v) and v > 0):
                return {}
            vals[run.arm].append(float(v))
    return {arm: (float(np.median(v)) if v else None) for arm, v in vals.items()}


def _keys(executions: list[Execution]) -> list[str]:
    seen: dict[str, None] = {}
    for ex in executions:
        for run in ex.runs:
            if run.status == "ok":
                seen.update(dict.fromkeys(run.alternates or {}))
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


def chosen_selector(metric: PlanMetric) -> str | None:
    """The selector of the plan's own metric (None for one process or a rank subset)."""
    role = metric.role or None  # absent or null: every rank
    if metric.expect_ranks is ABSENT or metric.ranks not in (None, ABSENT) and role is None:
        return None
    return selector(metric.job or "slowest_rank", role)


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


# The fed role's steps per second relative to the bound role's (each run's counted steps over
# their counted time, ranks[]) may fall by this much from the baseline's runs to the
# candidate's before the comparison says the fed role may no longer keep up. The baseline's
# ratio already swings with how much of a startup backlog the fed role drains (H200 job: 1.7
# to 6.4 between A runs, medians 2.0-3.1); a candidate whose fed role falls behind makes the
# queue grow, and the ratio falls below its steady value, at or under the baseline's.
KEEP_UP = 0.75


def _role_rates(run: Run) -> dict[str, float]:
    rates: dict[str, float] = {}
    for r in run.ranks or []:  # ranks: null for a single process
        if r.role and r.steps and (r.total_ns or 0) > 0:  # total_ns: ABSENT (falsy) in older records
            rates[r.role] = rates.get(r.role, 0.0) + r.steps / r.total_ns
    return rates


def bound_warning(metric: PlanMetric, used: list[Execution]) -> str | None:
    """A pipeline judged by the role that feeds it (plan/job_shape.py `bound_role`): its
    throughput is the job's only while the fed roles keep up. When, in the candidate's runs, a
    fed role's steps per second relative to the bound role's fell under KEEP_UP of the
    baseline's (A and A'), the candidate may have moved the bottleneck: say so, with the
    numbers and the config line that judges by the fed role."""
    shape = metric.shape
    bound = shape.bound_role if shape else None
    if not bound or metric.role != bound or metric.job != "throughput":
        return None
    fed = sorted(r for r, v in (shape.wait_share or {}).items() if r != bound and v >= WAITING_SHARE)
    for role in fed:
        ratio: dict[str, list[float]] = {"base": [], "B": []}
        for ex in used:
            for run in ex.runs:
                if run.status != "ok" or run.arm not in ("A", "A'", "B"):
                    continue
                rates = _role_rates(run)
                if rates.get(role) and rates.get(bound):
                    ratio["B" if run.arm == "B" else "base"].append(rates[role] / rates[bound])
        if not ratio["base"] or not ratio["B"]:
            continue
        base, cand = float(np.median(ratio["base"])), float(np.median(ratio["B"]))
        if cand < KEEP_UP * base:
            return (f"the {role} ranks may no longer keep up with the {bound} ranks in the candidate: their steps per "
                    f"second relative to the {bound}s' fell from {base:.3g} (baseline runs, median) to {cand:.3g}; "
                    f"the {bound}s' throughput is the job's only while the {role}s keep up, so compare by theirs too: "
                    f"`{config_line(selector('throughput', role))}`")
    return None
